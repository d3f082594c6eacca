#include "stowage/ir/builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stowage/bytecode/storage_rules.h"
#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/names.h"
#include "stowage/support/error.h"

namespace stowage::ir {
namespace {

const char* kind_name(Type::Kind kind) {
  switch (kind) {
    case Type::Kind::kTensor: return "Tensor";
    case Type::Kind::kStorage: return "Storage";
    case Type::Kind::kShape: return "Shape";
    case Type::Kind::kTuple: return "Tuple";
    case Type::Kind::kInt: return "int";
    case Type::Kind::kFloat: return "float";
    case Type::Kind::kBool: return "bool";
    case Type::Kind::kObject: return "Object";
  }
  return "?";
}

// "a Tensor", "an int", "an Object".
std::string with_article(Type::Kind kind) {
  std::string name = kind_name(kind);
  bool vowel = std::string_view("aeiouAEIOU").find(name[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + name;
}

std::string describe(const Type& type) {
  if (type.kind == Type::Kind::kTensor) {
    std::string dims = fmt::format("{}", fmt::join(type.shape, ", "));
    if (type.shape.size() == 1) dims += ",";
    return fmt::format("Tensor[({}), {}]", dims, dtype_name(type.dtype));
  }
  if (type.kind == Type::Kind::kTuple) {
    std::vector<std::string> fields;
    for (const Type& field : type.fields) fields.push_back(describe(field));
    return fmt::format("Tuple[{}]", fmt::join(fields, ", "));
  }
  return kind_name(type.kind);
}

bool is_c_identifier(std::string_view name) {
  return is_identifier(name) && name.find('.') == std::string_view::npos;
}

bool is_scope_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

[[noreturn]] void throw_verify(std::string message) { throw StowageError(ErrorKind::kVerify, message); }

void check_name(std::string_view op, std::string_view name) {
  if (Status s = validate_name(name); !s) throw_verify(fmt::format("{}: name {}", op, s.error().message()));
}

}  // namespace

// ---- FunctionBuilder: checks ------------------------------------------------

FunctionBuilder::FunctionBuilder(std::string name) : FunctionBuilder(std::move(name), nullptr) {}

FunctionBuilder::FunctionBuilder(std::string name, std::shared_ptr<const Module> module)
    : module_(std::move(module)) {
  check_name("function", name);
  function_.name = std::move(name);
}

void FunctionBuilder::fail(std::string_view op, std::string_view message) const {
  throw_verify(fmt::format("{}: {}", op, message));
}

void FunctionBuilder::check_open(std::string_view op) const {
  if (finished_) fail(op, fmt::format("function '{}' was already finished by ret", function_.name));
}

const FunctionBuilder::Var* FunctionBuilder::find(const std::string& var) const {
  if (auto it = vars_.find(var); it != vars_.end()) return &it->second;
  if (auto it = constants_.find(var); it != constants_.end()) return &it->second;
  const ConstantTensor* c = module_ ? module_->find_constant(var) : nullptr;
  if (c == nullptr) return nullptr;
  return &constants_.emplace(var, Var{c->type, false, true}).first->second;
}

const FunctionBuilder::Var& FunctionBuilder::use(std::string_view op, std::string_view arg,
                                                 const std::string& var) const {
  const Var* found = find(var);
  if (found == nullptr) fail(op, fmt::format("argument '{}': '{}' is not defined", arg, var));
  if (found->killed) fail(op, fmt::format("argument '{}': '{}' was killed by kill_object", arg, var));
  return *found;
}

void FunctionBuilder::refuse_constant(std::string_view op, std::string_view arg, const std::string& var,
                                      std::string_view what) const {
  const Var* found = find(var);
  if (found != nullptr && found->constant) {
    fail(op, fmt::format("argument '{}': '{}' is a constant, which {}", arg, var, what));
  }
}

const Type& FunctionBuilder::use_of_kind(std::string_view op, std::string_view arg, const std::string& var,
                                         Type::Kind kind) const {
  const Type& type = use(op, arg, var).type;
  if (type.kind != kind) {
    fail(op, fmt::format("argument '{}': '{}' is {}, not {}", arg, var, with_article(type.kind),
                         with_article(kind)));
  }
  return type;
}

void FunctionBuilder::check_extents(std::string_view op, std::string_view arg,
                                    const std::vector<int64_t>& extents) const {
  for (size_t i = 0; i < extents.size(); ++i) {
    if (extents[i] < 0) {
      fail(op, fmt::format("argument '{}': extent {} is {}; extents must not be negative", arg, i, extents[i]));
    }
  }
}

void FunctionBuilder::check_scope(std::string_view op, const std::string& scope) const {
  bool valid = !scope.empty();
  for (char c : scope) valid = valid && is_scope_char(c);
  if (!valid) {
    fail(op, fmt::format("argument 'scope': '{}' is not a scope name (letters, digits, '_', '.', '-')", scope));
  }
}

void FunctionBuilder::check_kernel_arg(size_t index, const Arg& arg) const {
  if (arg.kind != Arg::Kind::kVar) return;
  const Type& type = use("call_kernel", fmt::format("args[{}]", index), arg.var).type;
  switch (type.kind) {
    case Type::Kind::kTensor:
    case Type::Kind::kInt:
    case Type::Kind::kFloat:
    case Type::Kind::kBool: return;
    default:
      fail("call_kernel", fmt::format("argument 'args[{}]': '{}' is {}; kernels take tensors and scalars", index,
                                      arg.var, with_article(type.kind)));
  }
}

void FunctionBuilder::check_grid(const std::vector<int64_t>& grid, const std::vector<int64_t>& local) const {
  if (grid.empty() || grid.size() > 3) {
    fail("call_kernel", fmt::format("argument 'grid': expected 1 to 3 extents, got {}", grid.size()));
  }
  if (!local.empty() && local.size() != grid.size()) {
    fail("call_kernel", fmt::format("argument 'local': expected {} extents like 'grid', got {}", grid.size(),
                                    local.size()));
  }
  for (const auto& [arg, extents] : {std::pair{"grid", &grid}, std::pair{"local", &local}}) {
    for (size_t i = 0; i < extents->size(); ++i) {
      if ((*extents)[i] <= 0) {
        fail("call_kernel",
             fmt::format("argument '{}': extent {} is {}; extents must be positive", arg, i, (*extents)[i]));
      }
    }
  }
}

void FunctionBuilder::check_call_arg(const Function& callee, size_t index, const Arg& arg) const {
  const Param& param = callee.params[index];
  std::string arg_name = fmt::format("args[{}]", index);
  if (arg.kind == Arg::Kind::kVar) {
    const Type& type = use("call", arg_name, arg.var).type;
    refuse_constant("call", arg_name, arg.var, "cannot be passed to a function (it could write it); copy it first");
    if (type == param.type) return;
    fail("call", fmt::format("argument '{}': '{}' is {} but parameter '{}' of '{}' is {}", arg_name, arg.var,
                             describe(type), param.name, callee.name, describe(param.type)));
  }
  if (arg.kind == Arg::Kind::kNull) {
    fail("call", fmt::format("argument '{}': null is only for a kernel's buffer parameter", arg_name));
  }
  Type::Kind literal = arg.kind == Arg::Kind::kInt ? Type::Kind::kInt : Type::Kind::kFloat;
  if (param.type.kind == literal) return;
  fail("call", fmt::format("argument '{}': {} literal but parameter '{}' of '{}' is {}", arg_name,
                           with_article(literal), param.name, callee.name, describe(param.type)));
}

std::string FunctionBuilder::result_name(std::string_view op, std::string name) {
  if (name.empty()) {
    do {
      name = fmt::format("t{}", next_fresh_++);
    } while (vars_.count(name) || (module_ && module_->find_constant(name)));
    return name;
  }
  check_name(op, name);
  if (vars_.count(name)) fail(op, fmt::format("name '{}' is already defined", name));
  if (module_ && module_->find_constant(name)) fail(op, fmt::format("name '{}' is already defined as a constant", name));
  return name;
}

std::string FunctionBuilder::define(std::string name, Type type) {
  vars_.emplace(name, Var{std::move(type)});
  return name;
}

// What a method records has the form of its op's row in op_table.h: a result
// exactly when the op binds one, one name per variable operand, arguments only for
// ops that take them. A method disagreeing with the table is a bug in this file,
// refused here rather than left for the verifier to find in a user's module.
void FunctionBuilder::add(Binding binding) {
  const OpInfo& info = op_info(binding.op);
  size_t vars = 0;
  for (Operand operand : info.operand_list()) vars += operand == Operand::kVar ? 1 : 0;
  const bool binds = info.result != OpResult::kNone;
  if (binding.vars.size() != vars || binding.result.empty() == binds ||
      (!binding.args.empty() && !info.has(Operand::kArgs))) {
    fail(info.name, fmt::format("internal error: the builder recorded {} variable operands, {} result and {} "
                                "arguments where op_table.h has {} variable operands and {}",
                                binding.vars.size(), binding.result.empty() ? "no" : "a", binding.args.size(), vars,
                                binds ? "a result" : "no result"));
  }
  binding.origins = origins_;
  function_.bindings.push_back(std::move(binding));
}

// ---- FunctionBuilder: ops ---------------------------------------------------

std::string FunctionBuilder::param(std::string name, Type type) {
  check_open("param");
  if (!function_.bindings.empty()) fail("param", "parameters must come before the first binding");
  if (type.kind == Type::Kind::kTensor) check_extents("param", "type", type.shape);
  name = result_name("param", std::move(name));
  function_.params.push_back(Param{name, type, {}});
  return define(std::move(name), std::move(type));
}

std::string FunctionBuilder::alloc_storage(std::vector<int64_t> size, int64_t device, DType dtype,
                                           std::string scope, std::string name) {
  const std::string_view op = op_name(Op::kAllocStorage);
  check_open(op);
  if (size.empty() || size.size() > 2) {
    fail(op, fmt::format("argument 'size': expected [nbytes] or [height, width], got {} extents", size.size()));
  }
  check_extents(op, "size", size);
  if (device < 0) fail(op, fmt::format("argument 'device': {} is negative", device));
  check_scope(op, scope);
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kAllocStorage;
  b.shape = std::move(size);
  b.device = device;
  b.dtype = dtype;
  b.scope = std::move(scope);
  add(std::move(b));
  return define(std::move(name), Type::of(Type::Kind::kStorage));
}

std::string FunctionBuilder::alloc_tensor(const std::string& storage, int64_t offset, std::vector<int64_t> shape,
                                          DType dtype, std::string name) {
  return add_alloc_tensor(storage, offset, ImageOffset{}, std::move(shape), dtype, std::move(name));
}

std::string FunctionBuilder::alloc_tensor(const std::string& storage, ImageOffset offset, std::vector<int64_t> shape,
                                          DType dtype, std::string name) {
  return add_alloc_tensor(storage, 0, offset, std::move(shape), dtype, std::move(name));
}

std::string FunctionBuilder::add_alloc_tensor(const std::string& storage, int64_t offset, ImageOffset image_offset,
                                              std::vector<int64_t> shape, DType dtype, std::string name) {
  const std::string_view op = op_name(Op::kAllocTensor);
  check_open(op);
  use_of_kind(op, "storage", storage, Type::Kind::kStorage);
  if (offset < 0) fail(op, fmt::format("argument 'offset': {} is negative", offset));
  if (Status s = image_offset_in_range(image_offset); !s) {
    fail(op, fmt::format("argument 'offset': {}", s.error().message()));
  }
  check_extents(op, "shape", shape);
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kAllocTensor;
  b.vars = {storage};
  b.offset = offset;
  b.image_offset = image_offset;
  b.shape = shape;
  b.dtype = dtype;
  add(std::move(b));
  return define(std::move(name), Type::tensor(std::move(shape), dtype));
}

std::string FunctionBuilder::alloc_discontiguous_tensor(const std::string& table_storage,
                                                        std::vector<int64_t> table_offsets,
                                                        const std::string& data_storage,
                                                        std::vector<int64_t> data_offsets, std::vector<int64_t> shape,
                                                        DType dtype, std::string name) {
  const std::string_view op = op_name(Op::kAllocDiscontiguousTensor);
  check_open(op);
  use_of_kind(op, "table_storage", table_storage, Type::Kind::kStorage);
  use_of_kind(op, "data_storage", data_storage, Type::Kind::kStorage);
  for (auto [arg, offsets] : {std::pair{"table_offsets", &table_offsets}, std::pair{"data_offsets", &data_offsets}}) {
    for (size_t i = 0; i < offsets->size(); ++i) {
      if ((*offsets)[i] < 0) fail(op, fmt::format("argument '{}': offset {} is {}", arg, i, (*offsets)[i]));
    }
  }
  check_extents(op, "shape", shape);
  if (shape.size() < 2) fail(op, fmt::format("argument 'shape': rank {} (a discontiguous tensor has rank 2 or more)",
                                             shape.size()));
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kAllocDiscontiguousTensor;
  b.vars = {table_storage, data_storage};
  b.table_offsets = std::move(table_offsets);
  b.data_offsets = std::move(data_offsets);
  b.shape = shape;
  b.dtype = dtype;
  add(std::move(b));
  return define(std::move(name), Type::tensor(std::move(shape), dtype));
}

std::string FunctionBuilder::view(const std::string& tensor, int64_t offset, std::vector<int64_t> shape, DType dtype,
                                  std::string name) {
  const std::string_view op = op_name(Op::kView);
  check_open(op);
  use_of_kind(op, "tensor", tensor, Type::Kind::kTensor);
  if (offset < 0) fail(op, fmt::format("argument 'offset': {} is negative", offset));
  check_extents(op, "shape", shape);
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kView;
  b.vars = {tensor};
  b.offset = offset;
  b.shape = shape;
  b.dtype = dtype;
  add(std::move(b));
  return define(std::move(name), Type::tensor(std::move(shape), dtype));
}

void FunctionBuilder::kill_object(const std::string& var) {
  const std::string_view op = op_name(Op::kKillObject);
  check_open(op);
  use(op, "var", var);
  refuse_constant(op, "var", var, "lives as long as the VM and cannot be killed");
  Binding b;
  b.op = Op::kKillObject;
  b.vars = {var};
  add(std::move(b));
  vars_.at(var).killed = true;
}

void FunctionBuilder::copy_tensor(const std::string& src, const std::string& dst) {
  const std::string_view op = op_name(Op::kCopyTensor);
  check_open(op);
  const Type& src_type = use_of_kind(op, "src", src, Type::Kind::kTensor);
  const Type& dst_type = use_of_kind(op, "dst", dst, Type::Kind::kTensor);
  refuse_constant(op, "dst", dst, "is read-only");
  if (src_type != dst_type) {
    fail(op, fmt::format("'{}' is {} but '{}' is {}; shapes and dtypes must be equal", src, describe(src_type), dst,
                         describe(dst_type)));
  }
  Binding b;
  b.op = Op::kCopyTensor;
  b.vars = {src, dst};
  add(std::move(b));
}

void FunctionBuilder::call_kernel(const std::string& kernel, std::vector<Arg> args, std::vector<int64_t> grid,
                                  std::vector<int64_t> local) {
  const std::string_view op = op_name(Op::kCallKernel);
  check_open(op);
  if (!is_c_identifier(kernel)) fail(op, fmt::format("argument 'kernel': '{}' is not a kernel name", kernel));
  // The kernel may be added to the module later; ModuleBuilder::module() checks.
  for (size_t i = 0; i < args.size(); ++i) check_kernel_arg(i, args[i]);
  check_grid(grid, local);
  Binding b;
  b.op = Op::kCallKernel;
  b.callee = kernel;
  b.args = std::move(args);
  b.grid = std::move(grid);
  b.local = std::move(local);
  add(std::move(b));
}

std::string FunctionBuilder::empty(std::vector<int64_t> shape, DType dtype, std::string scope, std::string name) {
  const std::string_view op = op_name(Op::kEmpty);
  check_open(op);
  check_extents(op, "shape", shape);
  check_scope(op, scope);
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kEmpty;
  b.shape = shape;
  b.dtype = dtype;
  b.scope = std::move(scope);
  add(std::move(b));
  return define(std::move(name), Type::tensor(std::move(shape), dtype));
}

std::string FunctionBuilder::empty_discontiguous(std::vector<int64_t> shape, DType dtype, std::string scope,
                                                 std::string table_scope, std::string name) {
  const std::string_view op = op_name(Op::kEmptyDiscontiguous);
  check_open(op);
  check_extents(op, "shape", shape);
  if (shape.size() < 2) fail(op, fmt::format("argument 'shape': rank {} (a discontiguous tensor has rank 2 or more)",
                                             shape.size()));
  check_scope(op, scope);
  check_scope(op, table_scope);
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kEmptyDiscontiguous;
  b.shape = shape;
  b.dtype = dtype;
  b.scope = std::move(scope);
  b.table_scope = std::move(table_scope);
  add(std::move(b));
  return define(std::move(name), Type::tensor(std::move(shape), dtype));
}

std::string FunctionBuilder::call(const std::string& function, std::vector<Arg> args, std::string name) {
  const std::string_view op = op_name(Op::kCall);
  check_open(op);
  const Function* callee = module_ ? module_->find_function(function) : nullptr;
  if (callee == nullptr) fail(op, fmt::format("argument 'function': no function '{}' in the module", function));
  if (args.size() != callee->params.size()) {
    fail(op, fmt::format("function '{}' takes {} arguments, got {}", function, callee->params.size(), args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) check_call_arg(*callee, i, args[i]);
  Type result_type = callee->ret_type;
  name = result_name(op, std::move(name));
  Binding b;
  b.result = name;
  b.op = Op::kCall;
  b.callee = function;
  b.args = std::move(args);
  add(std::move(b));
  return define(std::move(name), std::move(result_type));
}

Function FunctionBuilder::ret(const std::string& var) {
  check_open("ret");
  const Type& type = use("ret", "var", var).type;
  refuse_constant("ret", "var", var, "cannot be returned (the caller could write it); return a copy");
  function_.returns = {var};
  function_.returns_tuple = false;
  function_.ret_type = type;
  finished_ = true;
  return function_;
}

Function FunctionBuilder::ret(const std::vector<std::string>& vars) {
  check_open("ret");
  if (vars.empty()) fail("ret", "argument 'vars': a returned tuple needs at least one variable");
  Type tuple = Type::of(Type::Kind::kTuple);
  for (size_t i = 0; i < vars.size(); ++i) {
    std::string arg = fmt::format("vars[{}]", i);
    tuple.fields.push_back(use_of_kind("ret", arg, vars[i], Type::Kind::kTensor));
    refuse_constant("ret", arg, vars[i], "cannot be returned (the caller could write it); return a copy");
    for (size_t j = 0; j < i; ++j) {
      if (vars[j] == vars[i]) {
        fail("ret", fmt::format("argument '{}': '{}' is returned twice (vars[{}] too); return a copy of it", arg,
                                vars[i], j));
      }
    }
  }
  function_.returns = vars;
  function_.returns_tuple = true;
  function_.ret_type = std::move(tuple);
  finished_ = true;
  return function_;
}

const Type& FunctionBuilder::type_of(const std::string& var) const {
  const Var* found = find(var);
  if (found == nullptr) fail("type_of", fmt::format("'{}' is not defined", var));
  return found->type;
}

// ---- ModuleBuilder ----------------------------------------------------------

ModuleBuilder::ModuleBuilder() : module_(std::make_shared<Module>()) {}

ModuleBuilder::ModuleBuilder(const ModuleBuilder& other) : module_(std::make_shared<Module>(*other.module_)) {}

ModuleBuilder& ModuleBuilder::operator=(const ModuleBuilder& other) {
  if (this != &other) module_ = std::make_shared<Module>(*other.module_);
  return *this;
}

void ModuleBuilder::add_kernels(std::string unit_name, std::string source) {
  constexpr std::string_view op = "add_kernels";
  check_name(op, unit_name);
  for (const KernelSourceUnit& unit : module_->units) {
    if (unit.name == unit_name) throw_verify(fmt::format("{}: kernel unit '{}' is already in the module", op, unit_name));
  }
  if (source.find("\"\"\"") != std::string::npos) {
    throw_verify(fmt::format("{}: kernel unit '{}': the source contains \"\"\", which the text form cannot hold", op,
                             unit_name));
  }
  KernelSourceUnit unit;
  unit.name = std::move(unit_name);
  unit.source = std::move(source);
  auto index = static_cast<uint32_t>(module_->units.size());
  Expected<std::vector<KernelSignature>> signatures = read_kernel_signatures(unit, index);
  if (!signatures) {
    throw StowageError(signatures.error().kind(), fmt::format("{}: {}", op, signatures.error().message()));
  }
  for (const KernelSignature& signature : *signatures) {
    if (const KernelSignature* other = module_->find_kernel(signature.name)) {
      throw_verify(fmt::format("{}: kernel unit '{}': kernel '{}' is already defined in kernel unit '{}'", op,
                               unit.name, signature.name, module_->units[other->unit].name));
    }
  }
  unit.signatures = signatures.take();
  module_->units.push_back(std::move(unit));
}

FunctionBuilder ModuleBuilder::function(std::string name) const {
  if (module_->find_function(name)) {
    throw_verify(fmt::format("function: function '{}' is already in the module", name));
  }
  return FunctionBuilder(std::move(name), module_);
}

void ModuleBuilder::add_function(Function function) {
  constexpr std::string_view op = "add_function";
  check_name(op, function.name);
  if (module_->find_function(function.name)) {
    throw_verify(fmt::format("{}: function '{}' is already in the module", op, function.name));
  }
  if (function.returns.empty()) {
    throw_verify(fmt::format("{}: function '{}' has no return; finish it with ret", op, function.name));
  }
  module_->functions.push_back(std::move(function));
}

std::string ModuleBuilder::add_constant(std::string name, Type type, std::shared_ptr<const std::vector<std::byte>> data,
                                        std::string scope) {
  constexpr std::string_view op = "constant";
  if (name.empty()) {
    for (size_t n = 0; name.empty() || module_->find_constant(name); ++n) name = fmt::format("c{}", n);
  }
  check_name(op, name);
  if (module_->find_constant(name)) throw_verify(fmt::format("{}: constant '{}' is already in the module", op, name));
  if (type.kind != Type::Kind::kTensor) {
    throw_verify(fmt::format("{}: argument 'type': {} is not a Tensor type", op, describe(type)));
  }
  for (size_t i = 0; i < type.shape.size(); ++i) {
    if (type.shape[i] < 0) {
      throw_verify(fmt::format("{}: argument 'type': extent {} is {}; extents must not be negative", op, i,
                               type.shape[i]));
    }
  }
  std::optional<uint64_t> nbytes = checked_nbytes(type.shape, type.dtype);
  if (!nbytes) throw_verify(fmt::format("{}: argument 'type': {} is larger than 2^64 bytes", op, describe(type)));
  if (!data || data->size() != *nbytes) {
    throw_verify(fmt::format("{}: argument 'data': {} bytes, but {} needs {}", op, data ? data->size() : 0,
                             describe(type), *nbytes));
  }
  bool valid_scope = !scope.empty();
  for (char c : scope) valid_scope = valid_scope && is_scope_char(c);
  if (!valid_scope) {
    throw_verify(
        fmt::format("{}: argument 'scope': '{}' is not a scope name (letters, digits, '_', '.', '-')", op, scope));
  }
  module_->constants.push_back(ConstantTensor{name, std::move(type), std::move(scope), std::move(data), {}});
  return name;
}

Module ModuleBuilder::module() const {
  for (const Function& f : module_->functions) {
    for (const Binding& b : f.bindings) {
      if (b.op == Op::kCallKernel && module_->find_kernel(b.callee) == nullptr) {
        throw StowageError(ErrorKind::kVerify,
                           fmt::format("module: function '{}' calls kernel '{}', which no kernel unit defines "
                                       "(add it with add_kernels)",
                                       f.name, b.callee));
      }
    }
  }
  return *module_;
}

}  // namespace stowage::ir
