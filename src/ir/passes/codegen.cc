#include "stowage/ir/codegen.h"

#include <fmt/format.h>

#include "../cl_headers.h"

#include <algorithm>
#include <map>
#include <set>

#include "stowage/bytecode/storage_rules.h"

namespace stowage::ir {
namespace {

ValueDesc value_desc(const std::string& name, const Type& type) {
  ValueDesc d;
  d.name = name;
  switch (type.kind) {
    case Type::Kind::kTensor:
      d.kind = ValueKind::kTensor;
      d.shape = type.shape;
      d.dtype = type.dtype;
      break;
    case Type::Kind::kInt: d.kind = ValueKind::kInt; break;
    case Type::Kind::kFloat: d.kind = ValueKind::kFloat; break;
    case Type::Kind::kBool: d.kind = ValueKind::kBool; break;
    default: d.kind = ValueKind::kOther; break;
  }
  return d;
}

Error codegen_error(const Function& f, const Binding* b, const std::string& what) {
  if (b != nullptr && b->loc.line > 0) {
    return Error(ErrorKind::kVerify, fmt::format("{}:{}: error: codegen: function '{}', binding '{}': {}", b->loc.line,
                                                 b->loc.col, f.name, op_name(b->op), what));
  }
  return Error(ErrorKind::kVerify, fmt::format("error: codegen: function '{}': {}", f.name, what));
}

// Builds the tables that instructions refer to, without duplicates.
class ExecutableBuilder {
 public:
  ExecutableBuilder(const Module& module, const TargetDesc& target) : module_(module), target_(target) {}

  uint32_t string_index(const std::string& s) {
    auto [it, inserted] = strings_.emplace(s, static_cast<uint32_t>(exe_.strings.size()));
    if (inserted) exe_.strings.push_back(s);
    return it->second;
  }

  uint32_t shape_constant(const std::vector<int64_t>& shape) {
    auto [it, inserted] = shapes_.emplace(shape, static_cast<uint32_t>(exe_.constants.size()));
    if (inserted) {
      Constant c;
      c.kind = ConstantKind::kShape;
      c.shape = shape;
      exe_.constants.push_back(std::move(c));
    }
    return it->second;
  }

  uint32_t scalar_constant(const Arg& arg, DType dtype) {
    Constant c;
    c.dtype = dtype;
    if (arg.kind == Arg::Kind::kFloat || dtype_is_float(dtype)) {
      c.kind = ConstantKind::kFloat;
      c.float_value = arg.kind == Arg::Kind::kFloat ? arg.float_value : static_cast<double>(arg.int_value);
    } else {
      c.kind = ConstantKind::kInt;
      c.int_value = arg.int_value;
    }
    for (size_t i = 0; i < exe_.constants.size(); ++i) {
      if (exe_.constants[i] == c) return static_cast<uint32_t>(i);
    }
    exe_.constants.push_back(std::move(c));
    return static_cast<uint32_t>(exe_.constants.size() - 1);
  }

  // The requirement entry of `scope`, created on first use; nullptr when the
  // target does not offer the scope.
  ScopeRequirement* scope_requirement(const std::string& scope) {
    for (auto& req : exe_.requirements.scopes) {
      if (req.scope == scope) return &req;
    }
    const ScopeDesc* desc = target_.find_scope(scope);
    if (desc == nullptr) return nullptr;
    ScopeRequirement req;
    req.scope = scope;
    req.kind = desc->kind;
    req.onchip = desc->onchip;
    req.capacity = desc->capacity;
    if (desc->kind == ScopeKind::kImage2d) {
      req.layout = desc->image_layout();
      req.offset_alignment = 1;  // tensors in images always sit at offset 0
    }
    exe_.requirements.scopes.push_back(req);
    if (desc->kind == ScopeKind::kImage2d) exe_.requirements.features |= kFeatureImages;
    return &exe_.requirements.scopes.back();
  }

  Executable& exe() { return exe_; }
  const Module& module() const { return module_; }

 private:
  const Module& module_;
  const TargetDesc& target_;
  Executable exe_;

 public:
  const TargetDesc& target() const { return target_; }

 private:
  std::map<std::string, uint32_t> strings_;
  std::map<std::vector<int64_t>, uint32_t> shapes_;
};

// Keeps the lowest set bit over every non-zero offset: the alignment all share.
void note_offset(ScopeRequirement& req, uint64_t offset) {
  if (offset == 0) return;
  uint64_t lowest = offset & (~offset + 1);
  req.offset_alignment = req.offset_alignment == 0 ? lowest : std::min(req.offset_alignment, lowest);
}

class FunctionLowering {
 public:
  FunctionLowering(ExecutableBuilder& b, const Function& f, const std::map<std::string, uint32_t>& kernels,
                   const std::map<std::string, uint32_t>& functions, const std::map<std::string, uint32_t>& constants)
      : b_(b), f_(f), kernels_(kernels), functions_(functions), constants_(constants) {}

  Expected<stowage::Function> lower() {
    out_.name = f_.name;
    for (const auto& p : f_.params) {
      out_.params.push_back(value_desc(p.name, p.type));
      define(p.name);
    }
    for (const auto& binding : f_.bindings) {
      current_ = &binding;
      STOWAGE_TRY(lower_binding(binding));
    }
    current_ = nullptr;
    STOWAGE_TRY(lower_return());
    out_.num_registers = next_reg_;
    return std::move(out_);
  }

 private:
  // `ret` of the one variable, or `ret_tuple` of the tuple's fields, described
  // field by field under the names the IR returned them by.
  Status lower_return() {
    if (!f_.returns_tuple) {
      STOWAGE_TRY_ASSIGN(uint32_t ret, reg_of(f_.returns.at(0), nullptr));
      emit(Opcode::kRet, {ret});
      out_.result = value_desc(f_.returns[0], f_.ret_type);
      return Status::ok();
    }
    std::vector<uint32_t> regs;
    out_.result.kind = ValueKind::kTuple;
    for (size_t i = 0; i < f_.returns.size(); ++i) {
      STOWAGE_TRY_ASSIGN(uint32_t r, reg_of(f_.returns[i], nullptr));
      regs.push_back(r);
      out_.result.fields.push_back(value_desc(f_.returns[i], f_.ret_type.fields.at(i)));
    }
    emit(Opcode::kRetTuple, {}, std::move(regs));
    return Status::ok();
  }

  uint32_t define(const std::string& name) {
    uint32_t r = next_reg_++;
    regs_[name] = r;
    return r;
  }

  // A constant is loaded into a register of its own where the function first reads it.
  Expected<uint32_t> reg_of(const std::string& name, const Binding* b) {
    auto it = regs_.find(name);
    if (it != regs_.end()) return it->second;
    if (auto c = constants_.find(name); c != constants_.end()) {
      uint32_t r = define(name);
      emit(Opcode::kLoadTensorConstant, {r, c->second});
      return r;
    }
    return codegen_error(f_, b, fmt::format("'{}' is not defined", name));
  }

  void emit(Opcode op, std::initializer_list<uint64_t> ops, std::vector<uint32_t> list = {}) {
    Instruction ins;
    ins.op = op;
    size_t i = 0;
    for (uint64_t v : ops) ins.ops[i++] = v;
    ins.list = std::move(list);
    // Kernels and copies are what profiles time: they keep the nodes they compute.
    if (current_ != nullptr && !current_->origins.empty() && (op == Opcode::kCallKernel || op == Opcode::kCopyTensor)) {
      origins_.sites.push_back(SiteOrigin{static_cast<uint32_t>(out_.code.size()), current_->origins});
    }
    out_.code.push_back(std::move(ins));
  }

 public:
  // The nodes behind the lowered function's instructions (after lower()).
  FunctionOrigins take_origins() {
    origins_.function = f_.name;
    return std::move(origins_);
  }

 private:

  // Registers for call arguments; literals are loaded into fresh registers, null is
  // kNullRegister.
  Expected<std::vector<uint32_t>> arg_registers(const Binding& b, const std::vector<DType>& literal_types) {
    std::vector<uint32_t> regs;
    for (size_t i = 0; i < b.args.size(); ++i) {
      const Arg& a = b.args[i];
      if (a.kind == Arg::Kind::kVar) {
        STOWAGE_TRY_ASSIGN(uint32_t r, reg_of(a.var, &b));
        regs.push_back(r);
        continue;
      }
      if (a.kind == Arg::Kind::kNull) {  // call_kernel only (the verifier's rule)
        regs.push_back(kNullRegister);
        continue;
      }
      DType dtype = i < literal_types.size() ? literal_types[i]
                                             : (a.kind == Arg::Kind::kFloat ? DType::kFloat64 : DType::kInt64);
      uint32_t c = b_.scalar_constant(a, dtype);
      uint32_t r = next_reg_++;
      emit(Opcode::kLoadConst, {r, c});
      regs.push_back(r);
    }
    return regs;
  }

  Status lower_binding(const Binding& b) {
    switch (b.op) {
      case Op::kAllocStorage: {
        ScopeRequirement* req = b_.scope_requirement(b.scope);
        if (req == nullptr) return codegen_error(f_, &b, fmt::format("scope '{}' is not offered by the target", b.scope));
        if (req->kind == ScopeKind::kImage2d && b.shape.size() == 2) {
          req->max_image_height = std::max(req->max_image_height, static_cast<uint64_t>(b.shape[0]));
          req->max_image_width = std::max(req->max_image_width, static_cast<uint64_t>(b.shape[1]));
        } else if (b.shape.size() == 1) {
          req->max_storage_bytes = std::max(req->max_storage_bytes, static_cast<uint64_t>(b.shape[0]));
        }
        uint32_t size = b_.shape_constant(b.shape);
        uint32_t scope = b_.string_index(b.scope);
        storage_scope_[b.result] = b.scope;
        uint32_t r = define(b.result);
        emit(Opcode::kAllocStorage, {r, size, static_cast<uint64_t>(b.device), static_cast<uint64_t>(b.dtype), scope});
        return {};
      }
      case Op::kAllocTensor: {
        STOWAGE_TRY_ASSIGN(uint32_t storage, reg_of(b.vars.at(0), &b));
        if (auto it = storage_scope_.find(b.vars[0]); it != storage_scope_.end()) {
          note_offset(*b_.scope_requirement(it->second), static_cast<uint64_t>(b.offset));
        }
        // A tensor in an image is placed at a pixel: the operand packs it (y << 32 | x).
        const uint64_t offset =
            b.image_offset != ImageOffset{} ? pack_image_offset(b.image_offset) : static_cast<uint64_t>(b.offset);
        uint32_t shape = b_.shape_constant(b.shape);
        uint32_t r = define(b.result);
        emit(Opcode::kAllocTensor, {r, storage, offset, shape, static_cast<uint64_t>(b.dtype)});
        return {};
      }
      case Op::kView: {
        STOWAGE_TRY_ASSIGN(uint32_t tensor, reg_of(b.vars.at(0), &b));
        uint32_t shape = b_.shape_constant(b.shape);
        uint32_t r = define(b.result);
        emit(Opcode::kView, {r, tensor, static_cast<uint64_t>(b.offset), shape, static_cast<uint64_t>(b.dtype)});
        return {};
      }
      case Op::kKillObject: {
        STOWAGE_TRY_ASSIGN(uint32_t r, reg_of(b.vars.at(0), &b));
        emit(Opcode::kKill, {r});
        return {};
      }
      case Op::kCopyTensor: {
        STOWAGE_TRY_ASSIGN(uint32_t src, reg_of(b.vars.at(0), &b));
        STOWAGE_TRY_ASSIGN(uint32_t dst, reg_of(b.vars.at(1), &b));
        emit(Opcode::kCopyTensor, {src, dst});
        return {};
      }
      case Op::kCallKernel: {
        auto k = kernels_.find(b.callee);
        if (k == kernels_.end()) return codegen_error(f_, &b, fmt::format("unknown kernel '{}'", b.callee));
        // A discontiguous tensor fills three parameters (tables, root, data): its
        // register repeats in all three slots, so the list matches the signature
        // but for image offsets, which the VM sets and the list leaves out.
        const auto& params = b_.exe().kernels[k->second].params;
        std::vector<DType> literal_types;
        for (size_t i = 0, p = 0; i < b.args.size(); ++i) {
          bool spread = b.args[i].kind == Arg::Kind::kVar && discontiguous_.count(b.args[i].var) != 0;
          literal_types.push_back(p < params.size() ? params[p].dtype : DType::kInt64);
          p += spread ? 3 : 1;
          while (p < params.size() && params[p].is_image_offset()) ++p;
        }
        STOWAGE_TRY_ASSIGN(std::vector<uint32_t> regs, arg_registers(b, literal_types));
        std::vector<uint32_t> list;
        for (size_t i = 0; i < b.args.size(); ++i) {
          bool spread = b.args[i].kind == Arg::Kind::kVar && discontiguous_.count(b.args[i].var) != 0;
          list.insert(list.end(), spread ? 3 : 1, regs[i]);
        }
        uint32_t grid = b_.shape_constant(b.grid);
        uint64_t local = b.local.empty() ? kNoConstant : b_.shape_constant(b.local);
        emit(Opcode::kCallKernel, {k->second, grid, local}, std::move(list));
        return {};
      }
      case Op::kCall: {
        auto fn = functions_.find(b.callee);
        if (fn == functions_.end()) return codegen_error(f_, &b, fmt::format("unknown function '{}'", b.callee));
        const Function& callee = b_.module().functions[fn->second];
        std::vector<DType> literal_types;
        for (const auto& p : callee.params) {
          literal_types.push_back(p.type.kind == Type::Kind::kFloat ? DType::kFloat64 : DType::kInt64);
        }
        STOWAGE_TRY_ASSIGN(std::vector<uint32_t> args, arg_registers(b, literal_types));
        uint32_t r = define(b.result);
        emit(Opcode::kCall, {r, fn->second}, std::move(args));
        return {};
      }
      case Op::kEmpty:
        return codegen_error(f_, &b, "tensor-level 'empty' must be planned into storage before code generation");
      case Op::kEmptyDiscontiguous:
        return codegen_error(f_, &b,
                             "tensor-level 'empty_discontiguous' must be planned into storage before code generation");
      case Op::kAllocDiscontiguousTensor: return lower_alloc_discontiguous(b);
    }
    return {};
  }

  Status lower_alloc_discontiguous(const Binding& b) {
    STOWAGE_TRY_ASSIGN(uint32_t tables, reg_of(b.vars.at(0), &b));
    STOWAGE_TRY_ASSIGN(uint32_t data, reg_of(b.vars.at(1), &b));
    // Tables and blocks are read through offsets, not sub-buffers: no offset alignment to note.
    uint32_t table_offsets = b_.shape_constant(b.table_offsets);
    uint32_t data_offsets = b_.shape_constant(b.data_offsets);
    uint32_t shape = b_.shape_constant(b.shape);
    uint32_t r = define(b.result);
    discontiguous_.insert(b.result);
    emit(Opcode::kAllocDiscontiguous, {r, tables, table_offsets, data, data_offsets, shape,
                                       static_cast<uint64_t>(b.dtype), b_.target().table_entry_bytes});
    return {};
  }

  std::set<std::string> discontiguous_;  // results of alloc_discontiguous_tensor
  ExecutableBuilder& b_;
  const Function& f_;
  const std::map<std::string, uint32_t>& kernels_;
  const std::map<std::string, uint32_t>& functions_;
  const std::map<std::string, uint32_t>& constants_;  // name -> tensor constant index
  stowage::Function out_;
  std::map<std::string, uint32_t> regs_;
  std::map<std::string, std::string> storage_scope_;
  uint32_t next_reg_ = 0;
  const Binding* current_ = nullptr;  // the binding being lowered
  FunctionOrigins origins_;
};

// The constant storages and tensors of `plan`, their bytes shared with the module.
std::map<std::string, uint32_t> add_constants(ExecutableBuilder& builder, const Module& module,
                                              const ConstantPlan& plan) {
  Executable& exe = builder.exe();
  std::map<std::string, uint32_t> index;
  for (const ConstantStoragePlan& p : plan.storages) {
    ConstantStorage storage;
    storage.scope = p.scope;
    storage.kind = p.kind;
    storage.pixel_dtype = p.pixel_dtype;
    storage.nbytes = p.nbytes;
    storage.image = p.image;
    ScopeRequirement* req = builder.scope_requirement(p.scope);  // the verifier checked the scope
    if (p.kind == ScopeKind::kImage2d) {
      req->max_image_height = std::max(req->max_image_height, p.image.height);
      req->max_image_width = std::max(req->max_image_width, p.image.width);
    } else {
      req->max_storage_bytes = std::max(req->max_storage_bytes, p.nbytes);
    }
    exe.constant_storages.push_back(std::move(storage));
  }
  for (const ConstantSlot& slot : plan.slots) {
    const ConstantTensor& c = module.constants[slot.constant];
    ConstantStorage& storage = exe.constant_storages[slot.storage];
    if (!c.data->empty()) {
      std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(c.data->data()), c.data->size());
      storage.segments.push_back(DataSegment{slot.offset, ByteView(std::shared_ptr<const void>(c.data), bytes)});
    }
    if (storage.kind == ScopeKind::kBuffer) note_offset(*builder.scope_requirement(storage.scope), slot.offset);
    index.emplace(c.name, static_cast<uint32_t>(exe.tensor_constants.size()));
    exe.tensor_constants.push_back(TensorConstant{c.name, c.type.dtype, c.type.shape, slot.storage, slot.offset});
  }
  return index;
}

}  // namespace

Expected<Executable> generate_executable(const Module& module, const TargetDesc& target,
                                         const CodegenOptions& options) {
  ExecutableBuilder builder(module, target);
  Executable& exe = builder.exe();
  std::map<std::string, uint32_t> kernels;
  for (size_t u = 0; u < module.units.size(); ++u) {
    exe.units.push_back(
        KernelUnit{module.units[u].name, expand_shipped_includes(module.units[u].source, target.table_entry_bytes)});
    for (KernelSignature sig : module.units[u].signatures) {
      sig.unit = static_cast<uint32_t>(u);
      for (const auto& p : sig.params) {
        if (p.is_image()) {
          exe.requirements.features |= kFeatureImages;
        } else if (p.dtype == DType::kFloat16) {
          exe.requirements.features |= kFeatureFp16;
        } else if (p.dtype == DType::kFloat64) {
          exe.requirements.features |= kFeatureFp64;
        }
      }
      kernels.emplace(sig.name, static_cast<uint32_t>(exe.kernels.size()));
      exe.kernels.push_back(std::move(sig));
    }
  }
  std::map<std::string, uint32_t> functions;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    functions.emplace(module.functions[i].name, static_cast<uint32_t>(i));
  }
  ConstantPlan planned;
  if (options.constants == nullptr) {
    STOWAGE_TRY_ASSIGN(planned, plan_constants(module, target));
  }
  const ConstantPlan& plan = options.constants != nullptr ? *options.constants : planned;
  std::map<std::string, uint32_t> constants = add_constants(builder, module, plan);
  for (const auto& f : module.functions) {
    FunctionLowering lowering(builder, f, kernels, functions, constants);
    STOWAGE_TRY_ASSIGN(stowage::Function lowered, lowering.lower());
    exe.functions.push_back(std::move(lowered));
    FunctionOrigins origins = lowering.take_origins();
    if (!origins.sites.empty()) exe.origins.push_back(std::move(origins));
  }
  // A scope whose tensors all sit at offset 0 constrains no alignment: any power
  // of two divides 0, so record the largest.
  for (auto& req : exe.requirements.scopes) {
    if (req.offset_alignment == 0) req.offset_alignment = uint64_t{1} << 63;
  }
  exe.debug_text = options.debug_text;
  exe.minor_version = exe.required_minor_version();
  return std::move(exe);
}

}  // namespace stowage::ir
