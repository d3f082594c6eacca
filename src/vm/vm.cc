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
    case ValueKind::kTuple: {
      std::vector<std::string> fields;
      for (const ValueDesc& field : desc.fields) fields.push_back(describe(field));
      return fmt::format("Tuple[{}]", fmt::join(fields, ", "));
    }
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
    case ValueKind::kTuple: break;  // results only: the reader refuses a tuple parameter
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
  for (const auto& p : pending_launches) clReleaseEvent(p.event);
  sites.clear();
}

Expected<std::unique_ptr<VirtualMachine>> VirtualMachine::create(std::shared_ptr<const Executable> executable,
                                                                 const VmOptions& options) {
  auto device = opencl::select_device(options.device, executable->requirements,
                                      options.svm ? opencl::BufferViews::kSvmWhereOffered
                                                  : opencl::BufferViews::kSubBuffers);
  if (!device) return device.error();
  auto context = opencl::Context::create(*device, options.kernel_times);
  if (!context) return context.error();

  auto impl = std::make_unique<Impl>();
  impl->exe = std::move(executable);
  impl->context = *context;
  impl->profiling = options.profile;
  impl->kernel_times = options.kernel_times;
  impl->check_bounds = options.check_bounds;
  impl->use_svm = options.svm && impl->context->info().svm_coarse_grain;
  impl->programs = std::make_unique<opencl::ProgramCache>(impl->context);
  for (const auto& unit : impl->exe->units) {
    auto program = impl->programs->program(unit);
    if (!program) return program.error();
    impl->unit_programs.push_back(*program);
  }
  for (const auto& req : impl->exe->requirements.scopes) {
    auto usage = std::make_shared<ScopeCounter>();
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
    for (size_t pc = 0; pc < impl->sites[f].size(); ++pc) {
      impl->sites[f][pc].function = static_cast<uint32_t>(f);
      impl->sites[f][pc].index = static_cast<uint32_t>(pc);
    }
  }
  impl->kernel_checked.assign(impl->exe->kernels.size(), false);
  impl->argument_storage.resize(impl->exe->functions.size());
  for (size_t f = 0; f < impl->exe->functions.size(); ++f) {
    impl->argument_storage[f].resize(impl->exe->functions[f].params.size());
  }
  if (auto global = impl->scope_index.find("global"); global != impl->scope_index.end()) {
    impl->argument_usage = impl->scope_usage[global->second];
  } else {
    impl->argument_usage = std::make_shared<ScopeCounter>();
    impl->argument_usage->scope = "global";
  }
  try {
    impl->upload_constants();
    impl->plan_frames();
  } catch (const StowageError& e) {
    return Error(e.kind(), fmt::format("uploading the constants: {}", e.what()));
  }
  return std::unique_ptr<VirtualMachine>(new VirtualMachine(std::move(impl)));
}

VirtualMachine::VirtualMachine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VirtualMachine::~VirtualMachine() = default;

Value VirtualMachine::invoke(std::string_view function, std::vector<Value> args) {
  std::lock_guard lock(impl_->mutex);
  int64_t index = impl_->exe->find_function(function);
  if (index < 0) {
    throw StowageError(ErrorKind::kInvalidInput, fmt::format("invoke: the executable has no function '{}'", function));
  }
  const auto f_index = static_cast<uint32_t>(index);
  const Function& f = impl_->exe->functions[f_index];
  if (args.size() != f.params.size()) {
    throw StowageError(ErrorKind::kInvalidInput, fmt::format("invoke '{}': takes {} arguments, {} given", f.name,
                                                             f.params.size(), args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    check_argument(f, i, args[i]);
    if (args[i].kind == Value::Kind::kTensor && !args[i].tensor->on_host() &&
        args[i].tensor->context != impl_->context) {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("invoke '{}': argument {} '{}' lives on another VM's device or context; pass a "
                                     "host copy (Tensor::copy_to_host) or upload it to this VM",
                                     f.name, i, f.params[i].name));
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == Value::Kind::kTensor) args[i] = impl_->device_argument(f_index, i, args[i]);
  }
  return impl_->run(f_index, args);
}

Tensor VirtualMachine::upload(const Tensor& host) {
  std::lock_guard lock(impl_->mutex);
  const TensorObject& t = *host.object();
  if (!t.on_host()) {
    if (t.context != impl_->context) {
      throw StowageError(ErrorKind::kInvalidInput, "upload: the tensor lives on another VM's device or context");
    }
    return host;
  }
  const uint64_t nbytes = std::max<uint64_t>(t.nbytes, 1);
  auto storage = impl_->new_storage_buffer(impl_->argument_usage, nbytes, nbytes);
  auto tensor = impl_->whole_buffer_tensor(storage, t);
  impl_->copy_into_buffer(t, *tensor);
  return Tensor(std::move(tensor));
}

// Parameters are contiguous tensors in a buffer (docs/ir.md): a host argument is
// uploaded into the buffer this parameter keeps for it, a device tensor in a buffer
// is passed as it is, and one in an image is copied into that buffer on the device.
// Uploads go to shared virtual memory where the VM uses it, as planned storages do,
// so that a view of a parameter at any offset is a pointer (a sub-buffer would need
// the device's base-address alignment: a Slice of an input at byte 400 failed).
Value VirtualMachine::Impl::device_argument(uint32_t function, size_t index, const Value& arg) {
  const TensorObject& t = *arg.tensor;
  if (t.in_buffer()) return arg;
  std::shared_ptr<StorageObject>& cached = argument_storage[function][index];
  const uint64_t nbytes = std::max<uint64_t>(t.nbytes, 1);
  if (!cached || cached.use_count() != 1 || cached->nbytes() != nbytes) {
    cached = new_storage_buffer(argument_usage, nbytes, nbytes);
  }
  auto tensor = whole_buffer_tensor(cached, t);
  copy_into_buffer(t, *tensor);
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  return out;
}

std::shared_ptr<TensorObject> VirtualMachine::Impl::whole_buffer_tensor(const std::shared_ptr<StorageObject>& storage,
                                                                        const TensorObject& like) {
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = like.shape;
  tensor->dtype = like.dtype;
  tensor->nbytes = like.nbytes;
  tensor->storage = storage;
  tensor->context = context;
  if (like.nbytes != 0) {
    clRetainMemObject(storage->mem());
    tensor->view = opencl::MemHandle(storage->mem());
  }
  return tensor;
}

void VirtualMachine::Impl::copy_into_buffer(const TensorObject& src, const TensorObject& dst) {
  if (src.nbytes == 0) return;
  if (src.is_discontiguous()) {
    copy_discontiguous(src, dst);
  } else if (src.in_image()) {
    copy_with_image(src, dst);
  } else if (src.on_host()) {
    cl_int status = clEnqueueWriteBuffer(context->queue(), dst.storage->mem(), CL_TRUE, dst.offset, src.nbytes,
                                         src.host_data, 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteBuffer");
    context->transfers().note_upload(src.nbytes);
  } else {
    cl_int status = clEnqueueCopyBuffer(context->queue(), src.storage->mem(), dst.storage->mem(), src.offset,
                                        dst.offset, src.nbytes, 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyBuffer");
  }
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

  // The function's kept frame, unless it is running already (recursion).
  Frame& frame = frames[function];
  const bool kept = !frame.active;
  std::vector<Value> fresh;
  if (!kept) fresh.resize(f.num_registers);
  std::vector<Value>& regs = kept ? frame.regs : fresh;
  struct FrameGuard {
    Frame* frame;
    ~FrameGuard() {
      if (frame == nullptr) return;
      for (uint32_t r : frame->transient) frame->regs[r] = Value();
      frame->active = false;
    }
  } frame_guard{kept ? &frame : nullptr};
  frame.active = true;
  for (size_t i = 0; i < args.size(); ++i) regs[i] = std::move(args[i]);
  Value result;
  bool returned = false;
  auto& fsites = sites[function];
  for (uint32_t pc = 0; pc < f.code.size() && !returned; ++pc) {
    const Instruction& ins = f.code[pc];
    if (kept && frame.preloaded[pc]) continue;
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
    case Opcode::kRetTuple: {
      // The validator checked the registers are distinct, one per field of the result.
      std::vector<Value> fields;
      fields.reserve(ins.list.size());
      for (uint32_t r : ins.list) fields.push_back(std::move(regs[r]));
      result = Value::tuple(std::move(fields));
      returned = true;
      break;
    }
    case Opcode::kView: view(site, ins, regs); break;
    case Opcode::kLoadTensorConstant:
      regs[ins.ops[operands::LoadTensorConstant::kDst]] =
          Value::from(Tensor(constants[ins.ops[operands::LoadTensorConstant::kConstant]]));
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
  std::lock_guard lock(impl_->mutex);
  impl_->read_kernel_times();
  Profile p;
  p.device_allocations = impl_->device_allocations;
  p.device_bytes_allocated = impl_->device_bytes_allocated;
  p.sub_buffers_created = impl_->sub_buffers_created;
  p.svm_allocations = impl_->svm_allocations;
  p.kernel_launches = impl_->kernel_launches;
  p.constant_bytes = impl_->constant_bytes;
  p.programs_built = impl_->programs->stats().built_from_source;
  p.programs_loaded = impl_->programs->stats().loaded_from_disk;
  const opencl::TransferCounters& transfers = impl_->context->transfers();
  p.host_to_device = transfers.host_to_device;
  p.host_to_device_bytes = transfers.host_to_device_bytes;
  p.device_to_host = transfers.device_to_host;
  p.device_to_host_bytes = transfers.device_to_host_bytes;
  p.device_busy_us = impl_->device_busy_us;
  if (impl_->last_end_ns > impl_->first_start_ns) {
    p.device_span_us = static_cast<double>(impl_->last_end_ns - impl_->first_start_ns) / 1000.0;
  }
  for (const auto& usage : impl_->scope_usage) p.scopes.push_back(usage->snapshot());
  if (impl_->scope_index.count("global") == 0 && impl_->argument_usage->allocations != 0) {
    p.scopes.push_back(impl_->argument_usage->snapshot());
  }
  for (size_t f = 0; f < impl_->sites.size(); ++f) {
    const Function& fn = impl_->exe->functions[f];
    for (size_t pc = 0; pc < impl_->sites[f].size(); ++pc) {
      const SiteState& site = impl_->sites[f][pc];
      if (site.count == 0 && site.device_count == 0) continue;
      InstructionProfile ip;
      ip.function = fn.name;
      ip.index = static_cast<uint32_t>(pc);
      ip.op = fn.code[pc].op;
      if (ip.op == Opcode::kCallKernel) {
        ip.detail = impl_->exe->kernels[fn.code[pc].ops[operands::CallKernel::kKernel]].name;
      }
      if (const auto* nodes = impl_->exe->origin_of(static_cast<uint32_t>(f), static_cast<uint32_t>(pc))) {
        ip.nodes = *nodes;
      }
      ip.count = site.count;
      ip.total_us = site.total_us;
      ip.device_count = site.device_count;
      ip.device_us = site.device_us;
      p.instructions.push_back(std::move(ip));
    }
  }
  return p;
}

std::vector<LaunchRecord> VirtualMachine::launches(uint64_t* dropped) const {
  std::lock_guard lock(impl_->mutex);
  impl_->read_kernel_times();
  if (dropped != nullptr) *dropped = impl_->launch_records_dropped;
  return impl_->launch_records;
}

void VirtualMachine::reset_profile() {
  std::lock_guard lock(impl_->mutex);
  impl_->read_kernel_times();
  impl_->launch_records.clear();
  impl_->launch_records_dropped = 0;
  impl_->first_start_ns = UINT64_MAX;
  impl_->last_end_ns = 0;
  impl_->device_busy_us = 0;
  impl_->device_allocations = 0;
  impl_->device_bytes_allocated = 0;
  impl_->sub_buffers_created = 0;
  impl_->svm_allocations = 0;
  impl_->kernel_launches = 0;
  impl_->context->transfers().reset();
  impl_->argument_usage->restart();
  for (auto& usage : impl_->scope_usage) usage->restart();
  for (auto& fsites : impl_->sites) {
    for (auto& site : fsites) {
      site.count = 0;
      site.total_us = 0;
      site.device_count = 0;
      site.device_us = 0;
    }
  }
}

void VirtualMachine::set_profiling(bool on) {
  std::lock_guard lock(impl_->mutex);
  impl_->profiling = on;
}
const opencl::DeviceInfo& VirtualMachine::device() const { return impl_->context->info(); }
const Executable& VirtualMachine::executable() const { return *impl_->exe; }

void VirtualMachine::synchronize() {
  cl_int status = clFinish(impl_->context->queue());
  if (status != CL_SUCCESS) throw_cl(status, "clFinish");
}

}  // namespace stowage::vm
