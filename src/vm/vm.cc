#include "stowage/vm/vm.h"

#include <fmt/format.h>

#include <chrono>

#include "vm_impl.h"

namespace stowage::vm {
namespace {

constexpr uint32_t kMaxCallDepth = 256;
constexpr uint32_t kMaxFramesNamed = 8;  // frames an error message names, outermost first

std::string describe(const ValueDesc& desc) {
  switch (desc.kind) {
    case ValueKind::kTensor:
      return fmt::format("Tensor[({}), {}]", fmt::join(desc.shape, ", "), dtype_name(desc.dtype));
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kBool: return "bool";
    case ValueKind::kOther: return "Object";
  }
  return "?";
}

std::string describe(const Value& v) {
  if (v.kind == Value::Kind::kTensor) {
    return fmt::format("Tensor[({}), {}]", fmt::join(v.tensor->shape, ", "), dtype_name(v.tensor->dtype));
  }
  return v.kind_name();
}

// Checks an argument of invoke against the parameter's description.
void check_argument(const Function& f, size_t i, const Value& v) {
  const ValueDesc& want = f.params[i];
  bool ok = false;
  switch (want.kind) {
    case ValueKind::kTensor:
      ok = v.kind == Value::Kind::kTensor && v.tensor && v.tensor->dtype == want.dtype && v.tensor->shape == want.shape;
      break;
    case ValueKind::kInt:
    case ValueKind::kBool: ok = v.kind == Value::Kind::kInt; break;
    case ValueKind::kFloat: ok = v.kind == Value::Kind::kFloat || v.kind == Value::Kind::kInt; break;
    case ValueKind::kOther: ok = v.kind != Value::Kind::kNone; break;
  }
  if (!ok) {
    throw StowageError(ErrorKind::kInvalidInput,
                       fmt::format("invoke '{}': argument {} '{}' must be {}, got {}", f.name, i, want.name,
                                   describe(want), describe(v)));
  }
}

}  // namespace

void throw_runtime(const std::string& message) { throw StowageError(ErrorKind::kRuntime, message); }

void throw_cl(cl_int status, std::string_view call) { throw StowageError(opencl::cl_error(status, call)); }

VirtualMachine::Impl::~Impl() {
  for (auto& function_sites : sites) {
    for (auto& site : function_sites) {
      if (site.kernel) clReleaseKernel(site.kernel);
    }
  }
  // Writes of discontiguous tables read from the sites' memory: finish them first.
  if (context) clFinish(context->queue());
  sites.clear();
}

Expected<std::unique_ptr<VirtualMachine>> VirtualMachine::create(std::shared_ptr<const Executable> executable,
                                                                 const VmOptions& options) {
  auto device = opencl::select_device(options.device, executable->requirements);
  if (!device) return device.error();
  auto context = opencl::Context::create(*device);
  if (!context) return context.error();

  auto impl = std::make_unique<Impl>();
  impl->exe = std::move(executable);
  impl->context = *context;
  impl->profiling = options.profile;
  impl->programs = std::make_unique<opencl::ProgramCache>(impl->context);
  for (const auto& unit : impl->exe->units) {
    auto program = impl->programs->program(unit);
    if (!program) return program.error();
    impl->unit_programs.push_back(*program);
  }
  for (const auto& req : impl->exe->requirements.scopes) {
    auto usage = std::make_shared<ScopeUsage>();
    usage->scope = req.scope;
    usage->onchip = req.onchip;
    // OpenCL offers no on-chip storage objects: on-chip scopes are buffers whose
    // capacity the VM enforces.
    usage->emulated = req.onchip;
    usage->capacity = req.onchip ? req.capacity : 0;
    impl->scope_index.emplace(req.scope, impl->scope_usage.size());
    impl->scope_usage.push_back(std::move(usage));
  }
  impl->sites.resize(impl->exe->functions.size());
  for (size_t f = 0; f < impl->exe->functions.size(); ++f) {
    impl->sites[f].resize(impl->exe->functions[f].code.size());
  }
  impl->kernel_checked.assign(impl->exe->kernels.size(), false);
  return std::unique_ptr<VirtualMachine>(new VirtualMachine(std::move(impl)));
}

VirtualMachine::VirtualMachine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VirtualMachine::~VirtualMachine() = default;

Value VirtualMachine::invoke(std::string_view function, std::vector<Value> args) {
  int64_t index = impl_->exe->find_function(function);
  if (index < 0) {
    throw StowageError(ErrorKind::kInvalidInput, fmt::format("invoke: the executable has no function '{}'", function));
  }
  const Function& f = impl_->exe->functions[static_cast<size_t>(index)];
  if (args.size() != f.params.size()) {
    throw StowageError(ErrorKind::kInvalidInput, fmt::format("invoke '{}': takes {} arguments, {} given", f.name,
                                                             f.params.size(), args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    check_argument(f, i, args[i]);
    if (args[i].kind == Value::Kind::kTensor && !args[i].tensor->on_host() &&
        args[i].tensor->context != impl_->context) {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("invoke '{}': argument {} '{}' lives on another VM's device; pass a host copy",
                                     f.name, i, f.params[i].name));
    }
  }
  return impl_->run(static_cast<uint32_t>(index), args);
}

Value VirtualMachine::Impl::run(uint32_t function, std::vector<Value>& args) {
  const Function& f = exe->functions[function];
  if (depth >= kMaxCallDepth) {
    throw_runtime(fmt::format("call depth exceeds {} when calling '{}'", kMaxCallDepth, f.name));
  }
  ++depth;
  struct DepthGuard {
    uint32_t& d;
    ~DepthGuard() { --d; }
  } guard{depth};

  std::vector<Value> regs(f.num_registers);
  for (size_t i = 0; i < args.size(); ++i) regs[i] = std::move(args[i]);
  Value result;
  bool returned = false;
  auto& fsites = sites[function];
  for (uint32_t pc = 0; pc < f.code.size() && !returned; ++pc) {
    const Instruction& ins = f.code[pc];
    try {
      if (!profiling) {
        execute(function, pc, ins, regs, result, returned);
      } else {
        auto start = std::chrono::steady_clock::now();
        execute(function, pc, ins, regs, result, returned);
        clFinish(context->queue());
        std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
        fsites[pc].count += 1;
        fsites[pc].total_us += took.count();
      }
    } catch (const StowageError& e) {
      if (depth > kMaxFramesNamed) throw;  // deep recursion: the outer frames name the place, the message stays short
      throw StowageError(e.kind(), fmt::format("function '{}' instruction {} ({}): {}", f.name, pc,
                                               opcode_info(ins.op).name, e.what()));
    }
  }
  return result;
}

void VirtualMachine::Impl::execute(uint32_t function, uint32_t pc, const Instruction& ins, std::vector<Value>& regs,
                                   Value& result, bool& returned) {
  SiteState& site = sites[function][pc];
  switch (ins.op) {
    case Opcode::kAllocStorage: alloc_storage(site, ins, regs); break;
    case Opcode::kAllocTensor: alloc_tensor(site, ins, regs); break;
    case Opcode::kAllocDiscontiguous: alloc_discontiguous(site, ins, regs); break;
    case Opcode::kKill: regs[ins.ops[operands::Kill::kReg]] = Value(); break;
    case Opcode::kCopyTensor: copy_tensor(ins, regs); break;
    case Opcode::kCallKernel: call_kernel(site, ins, regs); break;
    case Opcode::kCall: {
      std::vector<Value> args;
      args.reserve(ins.list.size());
      for (uint32_t r : ins.list) args.push_back(regs[r]);
      regs[ins.ops[operands::Call::kDst]] = run(static_cast<uint32_t>(ins.ops[operands::Call::kFunc]), args);
      break;
    }
    case Opcode::kMove: regs[ins.ops[operands::Move::kDst]] = regs[ins.ops[operands::Move::kSrc]]; break;
    case Opcode::kRet:
      result = std::move(regs[ins.ops[operands::Ret::kReg]]);
      returned = true;
      break;
    case Opcode::kLoadConst: {
      const Constant& c = exe->constants[ins.ops[operands::LoadConst::kConst]];
      Value v;
      switch (c.kind) {
        case ConstantKind::kInt: v = Value::integer(c.int_value); break;
        case ConstantKind::kFloat: v = Value::real(c.float_value); break;
        case ConstantKind::kShape:
          v.kind = Value::Kind::kShape;
          v.shape = &c.shape;
          break;
      }
      regs[ins.ops[operands::LoadConst::kDst]] = std::move(v);
      break;
    }
  }
}

Profile VirtualMachine::profile() const {
  Profile p;
  p.device_allocations = impl_->device_allocations;
  p.device_bytes_allocated = impl_->device_bytes_allocated;
  p.sub_buffers_created = impl_->sub_buffers_created;
  p.kernel_launches = impl_->kernel_launches;
  p.programs_built = impl_->programs->stats().built_from_source;
  p.programs_loaded = impl_->programs->stats().loaded_from_disk;
  for (const auto& usage : impl_->scope_usage) p.scopes.push_back(*usage);
  for (size_t f = 0; f < impl_->sites.size(); ++f) {
    const Function& fn = impl_->exe->functions[f];
    for (size_t pc = 0; pc < impl_->sites[f].size(); ++pc) {
      const SiteState& site = impl_->sites[f][pc];
      if (site.count == 0) continue;
      InstructionProfile ip;
      ip.function = fn.name;
      ip.index = static_cast<uint32_t>(pc);
      ip.op = fn.code[pc].op;
      if (ip.op == Opcode::kCallKernel) {
        ip.detail = impl_->exe->kernels[fn.code[pc].ops[operands::CallKernel::kKernel]].name;
      }
      ip.count = site.count;
      ip.total_us = site.total_us;
      p.instructions.push_back(std::move(ip));
    }
  }
  return p;
}

void VirtualMachine::reset_profile() {
  impl_->device_allocations = 0;
  impl_->device_bytes_allocated = 0;
  impl_->sub_buffers_created = 0;
  impl_->kernel_launches = 0;
  for (auto& usage : impl_->scope_usage) {
    usage->allocations = 0;
    usage->peak = usage->in_use;
  }
  for (auto& fsites : impl_->sites) {
    for (auto& site : fsites) {
      site.count = 0;
      site.total_us = 0;
    }
  }
}

void VirtualMachine::set_profiling(bool on) { impl_->profiling = on; }
const opencl::DeviceInfo& VirtualMachine::device() const { return impl_->context->info(); }
const Executable& VirtualMachine::executable() const { return *impl_->exe; }

void VirtualMachine::synchronize() {
  cl_int status = clFinish(impl_->context->queue());
  if (status != CL_SUCCESS) throw_cl(status, "clFinish");
}

}  // namespace stowage::vm
