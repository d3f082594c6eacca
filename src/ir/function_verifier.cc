#include "function_verifier.h"

#include <fmt/format.h>

#include <algorithm>

#include "stowage/bytecode/storage_rules.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"

namespace stowage::ir::verify {
namespace {

// Which fields of a Binding an op reads (its row in op_table.h); the others must
// stay at their defaults so that the text form, which omits them, round-trips.
struct OpForm {
  size_t vars = 0;
  bool args, shape, offset, device, dtype, scope, table_scope, table_offsets, data_offsets, callee, launch;
};

OpForm form_of(Op op) {
  const OpInfo& info = op_info(op);
  OpForm form{};
  for (Operand o : info.operand_list()) form.vars += o == Operand::kVar ? 1 : 0;
  form.args = info.has(Operand::kArgs);
  form.shape = info.has(Operand::kShape) || info.has(Operand::kSize);
  form.offset = info.has(Operand::kOffset);
  form.device = info.has(Operand::kDeviceKw);
  form.dtype = info.has(Operand::kDType) || info.has(Operand::kDTypeKw);
  form.scope = info.has(Operand::kScopeKw) || info.has(Operand::kScopeOptKw);
  form.table_scope = info.has(Operand::kTableScopeKw);
  form.table_offsets = info.has(Operand::kTableOffsets);
  form.data_offsets = info.has(Operand::kDataOffsets);
  form.callee = info.has(Operand::kKernel) || info.has(Operand::kFunction);
  form.launch = info.has(Operand::kGridKw);
  return form;
}

bool is_tensor_or_storage(const Type& t) { return t.kind == Type::Kind::kTensor || t.kind == Type::Kind::kStorage; }

Status check_type_extents(const Type& type) {
  if (type.kind == Type::Kind::kTensor) {
    for (int64_t extent : type.shape) {
      if (extent < 0) return broken_rule("{} has a negative extent", print_type(type));
    }
    if (!checked_nbytes(type.shape, type.dtype)) return broken_rule("{} is larger than 2^64 bytes", print_type(type));
  }
  for (const Type& field : type.fields) {
    STOWAGE_TRY(check_type_extents(field));
  }
  return Status::ok();
}

}  // namespace

std::string at_loc(SourceLoc loc) {
  if (loc.line == 0) return "";
  return fmt::format(" at {}:{}", loc.line, loc.col);
}

const VarInfo* FunctionVerifier::lookup(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

std::string FunctionVerifier::describe_arg(const Arg& arg, size_t index) const {
  switch (arg.kind) {
    case Arg::Kind::kInt: return fmt::format("argument {} (the integer {})", index + 1, arg.int_value);
    case Arg::Kind::kFloat: return fmt::format("argument {} (the float {})", index + 1, print_arg(arg));
    case Arg::Kind::kNull: return fmt::format("argument {}", index + 1);  // the message says it is null
    case Arg::Kind::kVar: break;
  }
  return fmt::format("argument {} ('{}')", index + 1, arg.var);
}

std::optional<FunctionVerifier::Failure> FunctionVerifier::run() {
  using Where = Failure::Where;
  // The module's constants are variables of every function, defined before it.
  for (const ConstantTensor& c : module_.constants) {
    VarInfo info;
    info.type = c.type;
    info.def_loc = c.loc;
    info.is_constant = true;
    info.scope = target_.find_scope(c.scope);
    vars_.emplace(c.name, std::move(info));
  }
  if (auto failure = check_params()) return failure;
  if (Status s = check_type_extents(function_.ret_type); !s) {
    return Failure{Where::kSignature, "return type " + s.error().message(), function_.loc, 0, {}};
  }
  for (size_t i = 0; i < function_.bindings.size(); ++i) {
    const Binding& b = function_.bindings[i];
    if (Status s = check_binding(b); !s) return Failure{Where::kBinding, s.error().message(), b.loc, i, {}};
  }
  if (Status s = check_return(); !s) return Failure{Where::kReturn, s.error().message(), function_.ret_loc, 0, {}};
  return std::nullopt;
}

std::optional<FunctionVerifier::Failure> FunctionVerifier::check_params() {
  for (const Param& p : function_.params) {
    auto fail = [&p](std::string message) {
      return Failure{Failure::Where::kParam, std::move(message), p.loc, 0, p.name};
    };
    if (!is_valid_variable_name(p.name)) return fail(fmt::format("'{}' is not a valid variable name", p.name));
    if (const VarInfo* earlier = lookup(p.name); earlier && earlier->is_constant) {
      return fail(fmt::format("'{}' is already defined as a constant{}", p.name, at_loc(earlier->def_loc)));
    }
    if (const VarInfo* earlier = lookup(p.name)) {
      return fail(fmt::format("'{}' is declared twice (first{})", p.name, at_loc(earlier->def_loc)));
    }
    if (Status s = check_type_extents(p.type); !s) return fail(s.error().message());
    VarInfo info;
    info.type = p.type;
    info.def_loc = p.loc;
    info.is_param = true;
    vars_.emplace(p.name, std::move(info));
  }
  return std::nullopt;
}

Status FunctionVerifier::check_binding(const Binding& b) {
  result_info_ = VarInfo();
  STOWAGE_TRY(check_form(b));
  STOWAGE_TRY(check_uses(b));
  STOWAGE_TRY(check_result_is_new(b));
  STOWAGE_TRY(check_op(b));
  if (!b.result.empty()) define_result(b);
  return Status::ok();
}

Status FunctionVerifier::check_op(const Binding& b) {
  switch (b.op) {
    case Op::kAllocStorage: return check_alloc_storage(b);
    case Op::kAllocTensor: return check_alloc_tensor(b);
    case Op::kKillObject: return check_kill(b);
    case Op::kCopyTensor: return check_copy(b);
    case Op::kCallKernel: return check_call_kernel(b);
    case Op::kEmpty: return check_empty(b);
    case Op::kCall: return check_call(b);
    case Op::kAllocDiscontiguousTensor: return check_alloc_discontiguous(b);
    case Op::kEmptyDiscontiguous: return check_empty_discontiguous(b);
    case Op::kView: return check_view(b);
  }
  return Status::ok();
}

Status FunctionVerifier::check_form(const Binding& b) {
  const char* op = op_name(b.op);
  if (op_produces_value(b.op) && b.result.empty()) return broken_rule("{} produces a value but binds no variable", op);
  if (!op_produces_value(b.op) && !b.result.empty()) {
    return broken_rule("{} produces no value to bind to '{}'", op, b.result);
  }
  OpForm form = form_of(b.op);
  if (b.vars.size() != form.vars) {
    return broken_rule("{} takes {} variable operand{}, got {}", op, form.vars, form.vars == 1 ? "" : "s",
                       b.vars.size());
  }
  auto unused = [op](std::string_view field) {
    return broken_rule("{} does not take '{}'; leave that field at its default", op, field);
  };
  if (!form.args && !b.args.empty()) return unused("args");
  if (!form.shape && !b.shape.empty()) return unused("shape");
  if (!form.offset && b.offset != 0) return unused("offset");
  if (!form.device && b.device != 0) return unused("device");
  if (!form.dtype && b.dtype != Binding().dtype) return unused("dtype");
  if (!form.scope && !b.scope.empty()) return unused("scope");
  if (!form.callee && !b.callee.empty()) return unused("callee");
  if (!form.launch && !b.grid.empty()) return unused("grid");
  if (!form.launch && !b.local.empty()) return unused("local");
  if (!form.table_scope && !b.table_scope.empty()) return unused("table_scope");
  if (!form.table_offsets && !b.table_offsets.empty()) return unused("table_offsets");
  if (!form.data_offsets && !b.data_offsets.empty()) return unused("data_offsets");
  return Status::ok();
}

Status FunctionVerifier::check_use(const std::string& name, bool is_kill) {
  const VarInfo* info = lookup(name);
  if (info == nullptr) return broken_rule("'{}' is not defined", name);
  if (!info->view_of.empty()) {
    const VarInfo& base = *lookup(info->view_of);
    if (base.killed) {
      return broken_rule("'{}' is a view of '{}', which was killed{}", name, info->view_of, at_loc(base.kill_loc));
    }
  }
  if (!info->killed) return Status::ok();
  if (is_kill) return broken_rule("'{}' is killed twice (first{})", name, at_loc(info->kill_loc));
  return broken_rule("'{}' is used after its kill_object{}", name, at_loc(info->kill_loc));
}

Status FunctionVerifier::check_uses(const Binding& b) {
  for (const std::string& var : b.vars) {
    STOWAGE_TRY(check_use(var, b.op == Op::kKillObject));
  }
  for (const Arg& arg : b.args) {
    if (arg.kind != Arg::Kind::kVar) continue;
    STOWAGE_TRY(check_use(arg.var, false));
  }
  return Status::ok();
}

Status FunctionVerifier::check_result_is_new(const Binding& b) {
  if (b.result.empty()) return Status::ok();
  if (!is_valid_variable_name(b.result)) return broken_rule("'{}' is not a valid variable name", b.result);
  const VarInfo* earlier = lookup(b.result);
  if (earlier == nullptr) return Status::ok();
  if (earlier->is_param) return broken_rule("'{}' is already defined as a parameter", b.result);
  if (earlier->is_constant) return broken_rule("'{}' is already defined as a constant", b.result);
  return broken_rule("'{}' is already defined{}", b.result, at_loc(earlier->def_loc));
}

Status FunctionVerifier::check_kill(const Binding& b) {
  const std::string& name = b.vars[0];
  VarInfo& info = vars_.at(name);
  if (info.is_constant) return broken_rule("constant '{}' cannot be killed: it lives as long as the VM", name);
  if (!is_tensor_or_storage(info.type)) {
    return broken_rule("'{}' is {}; only tensors and storages can be killed", name, print_type(info.type));
  }
  info.killed = true;
  info.kill_loc = b.loc;
  for (const Placement& placement : info.placements) {
    auto& live = vars_.at(placement.storage).storage->live_tensors;
    live.erase(std::remove(live.begin(), live.end(), name), live.end());
  }
  if (info.storage) {
    auto& live = live_storages_[info.storage->scope];
    live.erase(std::remove(live.begin(), live.end(), name), live.end());
  }
  return Status::ok();
}

Status FunctionVerifier::check_copy(const Binding& b) {
  const Type& src = lookup(b.vars[0])->type;
  const Type& dst = lookup(b.vars[1])->type;
  if (src.kind != Type::Kind::kTensor) {
    return broken_rule("source '{}' is {}, not a tensor", b.vars[0], print_type(src));
  }
  if (dst.kind != Type::Kind::kTensor) {
    return broken_rule("destination '{}' is {}, not a tensor", b.vars[1], print_type(dst));
  }
  if (!(src == dst)) {
    return broken_rule("source is {} but destination is {}; shapes and dtypes must be equal", print_type(src),
                       print_type(dst));
  }
  const VarInfo& s = *lookup(b.vars[0]);
  const VarInfo& d = *lookup(b.vars[1]);
  if (d.is_constant) return broken_rule("constant '{}' is read-only: it cannot be copied into", b.vars[1]);
  auto in_image = [](const VarInfo& v) { return v.scope != nullptr && v.scope->kind == ScopeKind::kImage2d; };
  if ((s.discontiguous && in_image(d)) || (d.discontiguous && in_image(s))) {
    return broken_rule("copy_tensor between a discontiguous tensor and an image tensor is not supported; copy "
                       "through a buffer tensor");
  }
  // Two images are copied pixel for pixel, so their extents (the layouts' reshapes
  // of the same shape) must agree.
  if (in_image(s) && in_image(d)) {
    std::optional<ImageExtent> from = image_extent(src.shape, s.scope->image_layout());
    std::optional<ImageExtent> to = image_extent(dst.shape, d.scope->image_layout());
    if (from && to && (from->height != to->height || from->width != to->width)) {
      return broken_rule("copy_tensor between images of {}x{} pixels (scope '{}') and {}x{} pixels (scope '{}') is "
                         "not supported; copy through a buffer tensor",
                         from->height, from->width, s.scope->name, to->height, to->width, d.scope->name);
    }
  }
  return Status::ok();
}

// A view shares a byte range of a contiguous buffer tensor: inside it, aligned as the
// scope's sub-buffers must be. It lives no longer than the tensor it views.
Status FunctionVerifier::check_view(const Binding& b) {
  const std::string& name = b.vars[0];
  const VarInfo& base = *lookup(name);
  if (base.type.kind != Type::Kind::kTensor) {
    return broken_rule("'{}' is {}, not a tensor", name, print_type(base.type));
  }
  if (base.discontiguous) return broken_rule("'{}' is a discontiguous tensor, which has no byte range to view", name);
  if (b.offset < 0) return broken_rule("offset {} is negative", b.offset);
  STOWAGE_TRY(check_tensor_shape(b.shape, b.dtype));
  if (base.scope != nullptr && base.scope->kind == ScopeKind::kImage2d) return check_image_view(b, base);
  const uint64_t nbytes = *checked_nbytes(b.shape, b.dtype);
  const uint64_t base_bytes = *checked_nbytes(base.type.shape, base.type.dtype);  // checked where it was defined
  const auto offset = static_cast<uint64_t>(b.offset);
  if (nbytes > base_bytes || offset > base_bytes - nbytes) {
    return broken_rule("bytes [{}, {}) lie outside '{}', which has {} bytes", offset, offset + nbytes, name,
                       base_bytes);
  }
  const ScopeDesc* scope = base.scope != nullptr ? base.scope : target_.find_scope("global");
  if (scope != nullptr) {
    STOWAGE_TRY(offset_is_aligned(offset, scope->alignment, scope->name));
  }
  result_info_.scope = base.scope;
  result_info_.view_of = base.view_of.empty() ? name : base.view_of;
  return Status::ok();
}

// A view of a tensor in an image is a band of whole rows of its rectangle (its bytes
// are the pixels row by row): the rows from offset / row bytes, as wide as the tensor.
Status FunctionVerifier::check_image_view(const Binding& b, const VarInfo& base) {
  const std::string& name = b.vars[0];
  const ScopeDesc& scope = *base.scope;
  if (b.dtype != base.type.dtype) {
    return broken_rule("'{}' is in image scope '{}': a view of it keeps its dtype {}, not {}", name, scope.name,
                       dtype_name(base.type.dtype), dtype_name(b.dtype));
  }
  const std::optional<ImageExtent> whole = image_extent(base.type.shape, scope.image_layout());
  const std::optional<ImageExtent> band = image_extent(b.shape, scope.image_layout());
  if (!band) {
    return broken_rule("shape {} is not an image shape (last extent 4, rank at most 5), so it cannot view '{}' in "
                       "image scope '{}'",
                       print_shape_list(b.shape), name, scope.name);
  }
  std::optional<uint64_t> row = whole ? checked_mul(whole->width, 4 * dtype_bytes(base.type.dtype)) : std::nullopt;
  if (!row) {
    return broken_rule("'{}' of shape {} has no image extent in image scope '{}' to view", name,
                       print_shape_list(base.type.shape), scope.name);
  }
  const uint64_t row_bytes = *row;
  const auto offset = static_cast<uint64_t>(b.offset);
  if (band->width != whole->width) {
    return broken_rule("a view of '{}' in image scope '{}' is whole rows of it: the view is {} pixels wide, '{}' {}",
                       name, scope.name, band->width, name, whole->width);
  }
  if (row_bytes == 0 ? offset != 0 : offset % row_bytes != 0) {
    return broken_rule("a view of '{}' in image scope '{}' is whole rows of it: offset {} is not a multiple of its "
                       "rows' {} bytes",
                       name, scope.name, offset, row_bytes);
  }
  const uint64_t first_row = row_bytes == 0 ? 0 : offset / row_bytes;
  if (first_row > whole->height || band->height > whole->height - first_row) {
    return broken_rule("rows [{}, {}) lie outside '{}', which has {} rows in image scope '{}'", first_row,
                       first_row + band->height, name, whole->height, scope.name);
  }
  result_info_.scope = base.scope;
  result_info_.view_of = base.view_of.empty() ? name : base.view_of;
  result_info_.image_storage = base.image_storage;
  result_info_.image_offset = ImageOffset{base.image_offset.x, base.image_offset.y + first_row};
  result_info_.image_extent = *band;
  return Status::ok();
}

Type FunctionVerifier::arg_type(const Arg& arg) const {
  switch (arg.kind) {
    case Arg::Kind::kInt: return Type::of(Type::Kind::kInt);
    case Arg::Kind::kFloat: return Type::of(Type::Kind::kFloat);
    case Arg::Kind::kNull: return Type::of(Type::Kind::kObject);  // refused before it is compared
    case Arg::Kind::kVar: break;
  }
  return lookup(arg.var)->type;
}

Status FunctionVerifier::check_call(const Binding& b) {
  const Function* callee = module_.find_function(b.callee);
  if (callee == nullptr) return broken_rule("unknown function '{}'", b.callee);
  if (b.args.size() != callee->params.size()) {
    return broken_rule("function '{}' takes {} argument{}, got {}", b.callee, callee->params.size(),
                       callee->params.size() == 1 ? "" : "s", b.args.size());
  }
  for (size_t i = 0; i < b.args.size(); ++i) {
    if (b.args[i].kind == Arg::Kind::kNull) {
      return broken_rule("{} is null, which only a kernel's buffer parameter takes", describe_arg(b.args[i], i));
    }
    if (b.args[i].kind == Arg::Kind::kVar && lookup(b.args[i].var)->is_constant) {
      return broken_rule("{} is a constant, which cannot be passed to a function (it could write its parameter); "
                         "copy_tensor it into a tensor first",
                         describe_arg(b.args[i], i));
    }
    if (b.args[i].kind == Arg::Kind::kVar && lookup(b.args[i].var)->discontiguous) {
      return broken_rule("{} is a discontiguous tensor, which cannot be passed to a function; copy_tensor it into a "
                         "contiguous tensor first",
                         describe_arg(b.args[i], i));
    }
    Type type = arg_type(b.args[i]);
    const Param& param = callee->params[i];
    if (!(type == param.type)) {
      return broken_rule("{} is {}, but parameter '{}' of function '{}' is {}", describe_arg(b.args[i], i),
                         print_type(type), param.name, b.callee, print_type(param.type));
    }
  }
  return Status::ok();
}

Type FunctionVerifier::result_type(const Binding& b) const {
  switch (op_info(b.op).result) {
    case OpResult::kStorage: return Type::of(Type::Kind::kStorage);
    case OpResult::kTensor: return Type::tensor(b.shape, b.dtype);
    case OpResult::kCall: return module_.find_function(b.callee)->ret_type;
    case OpResult::kNone: break;
  }
  return Type::of(Type::Kind::kObject);
}

void FunctionVerifier::define_result(const Binding& b) {
  VarInfo info = std::move(result_info_);
  info.type = result_type(b);
  info.def_loc = b.loc;
  for (const Placement& placement : info.placements) {
    auto& live = vars_.at(placement.storage).storage->live_tensors;
    if (std::find(live.begin(), live.end(), b.result) == live.end()) live.push_back(b.result);
  }
  if (info.storage && info.storage->scope->capacity > 0) live_storages_[info.storage->scope].push_back(b.result);
  vars_.emplace(b.result, std::move(info));
}

// What may leave the function through `return`, tuple field or not.
Status FunctionVerifier::check_returned_var(const std::string& name) const {
  const VarInfo* info = lookup(name);
  if (info == nullptr) return broken_rule("'{}' is not defined", name);
  if (info->killed) return broken_rule("'{}' was killed{}", name, at_loc(info->kill_loc));
  if (info->is_constant) {
    return broken_rule("'{}' is a constant, which cannot be returned (the caller could write it); return a copy",
                       name);
  }
  if (info->discontiguous) {
    return broken_rule("'{}' is a discontiguous tensor, which cannot be returned; copy_tensor it into a contiguous "
                       "tensor first",
                       name);
  }
  return Status::ok();
}

Status FunctionVerifier::check_return() {
  if (function_.returns.empty() && function_.returns_tuple) {
    return broken_rule("the function returns an empty tuple; return at least one tensor");
  }
  if (function_.returns.empty()) return broken_rule("the function returns no variable");
  if (function_.returns_tuple) return check_returned_tuple();
  if (function_.returns.size() != 1) {
    return broken_rule("a return that is not a tuple names one variable, not {}", function_.returns.size());
  }
  const std::string& name = function_.returns[0];
  STOWAGE_TRY(check_returned_var(name));
  const VarInfo* info = lookup(name);
  if (!(info->type == function_.ret_type)) {
    return broken_rule("'{}' is {}, but the function returns {}", name, print_type(info->type),
                       print_type(function_.ret_type));
  }
  return Status::ok();
}

// Each field a tensor of its own: one returned twice would hand the caller two
// results sharing bytes, so it is refused (a copy says what is meant).
Status FunctionVerifier::check_returned_tuple() const {
  const std::vector<std::string>& names = function_.returns;
  const Type& want = function_.ret_type;
  if (want.kind != Type::Kind::kTuple || want.fields.size() != names.size()) {
    return broken_rule("the function returns a tuple of {} value{}, but its return type is {}", names.size(),
                       names.size() == 1 ? "" : "s", print_type(want));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    STOWAGE_TRY(check_returned_var(name));
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == name) {
        return broken_rule("'{}' is returned twice (fields {} and {}); return a copy of it instead", name, j, i);
      }
    }
    const Type& type = lookup(name)->type;
    if (type.kind != Type::Kind::kTensor) {
      return broken_rule("field {} '{}' is {}; a returned tuple holds tensors", i, name, print_type(type));
    }
    if (!(type == want.fields[i])) {
      return broken_rule("field {} '{}' is {}, but the return type has {} there", i, name, print_type(type),
                         print_type(want.fields[i]));
    }
  }
  return Status::ok();
}

}  // namespace stowage::ir::verify
