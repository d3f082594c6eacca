// Verifier rules for call_kernel: arguments against the kernel's signature, and the
// launch size.
#include <fmt/format.h>

#include <limits>

#include "function_verifier.h"
#include "stowage/bytecode/format.h"
#include "stowage/ir/printer.h"

namespace stowage::ir::verify {
namespace {

// The OpenCL C spelling of an element type: int32 -> int, float16 x4 -> half4.
std::string cl_type_name(DType dtype, uint8_t lanes) {
  std::string_view name;
  switch (dtype) {
    case DType::kBool: name = "bool"; break;
    case DType::kInt8: name = "char"; break;
    case DType::kInt16: name = "short"; break;
    case DType::kInt32: name = "int"; break;
    case DType::kInt64: name = "long"; break;
    case DType::kUInt8: name = "uchar"; break;
    case DType::kUInt16: name = "ushort"; break;
    case DType::kUInt32: name = "uint"; break;
    case DType::kUInt64: name = "ulong"; break;
    case DType::kFloat16: name = "half"; break;
    case DType::kFloat32: name = "float"; break;
    case DType::kFloat64: name = "double"; break;
  }
  if (lanes <= 1) return std::string(name);
  return fmt::format("{}{}", name, lanes);
}

bool int_fits(DType dtype, int64_t v) {
  switch (dtype) {
    case DType::kBool: return v == 0 || v == 1;
    case DType::kInt8: return v >= INT8_MIN && v <= INT8_MAX;
    case DType::kInt16: return v >= INT16_MIN && v <= INT16_MAX;
    case DType::kInt32: return v >= INT32_MIN && v <= INT32_MAX;
    case DType::kUInt8: return v >= 0 && v <= UINT8_MAX;
    case DType::kUInt16: return v >= 0 && v <= UINT16_MAX;
    case DType::kUInt32: return v >= 0 && v <= static_cast<int64_t>(UINT32_MAX);
    case DType::kUInt64: return v >= 0;
    default: return true;
  }
}

std::string describe_param(const KernelSignature& kernel, const KernelParam& param) {
  return fmt::format("parameter '{}' of kernel '{}'", param.name, kernel.name);
}

}  // namespace

Status FunctionVerifier::check_call_kernel(const Binding& b) {
  const KernelSignature* kernel = module_.find_kernel(b.callee);
  if (kernel == nullptr) return broken_rule("unknown kernel '{}'", b.callee);
  // A discontiguous tensor fills three parameters: its tables, its root table's offset, its data.
  // Image offset parameters take no argument: the runtime sets them from the image's tensor.
  auto is_discontiguous = [this](const Arg& a) { return a.kind == Arg::Kind::kVar && lookup(a.var)->discontiguous; };
  const size_t listed = listed_param_count(*kernel);
  size_t filled = 0;
  for (const Arg& a : b.args) filled += is_discontiguous(a) ? 3 : 1;
  if (filled != listed) {
    if (filled == b.args.size()) {
      return broken_rule("kernel '{}' takes {} argument{}, got {}", b.callee, listed, listed == 1 ? "" : "s",
                         b.args.size());
    }
    return broken_rule("kernel '{}' takes {} parameter{}, but the arguments fill {} (a discontiguous tensor fills 3: "
                       "tables, root offset, data)",
                       b.callee, listed, listed == 1 ? "" : "s", filled);
  }
  std::vector<size_t> param_of(b.args.size());  // the parameter each argument fills (its first)
  size_t param = 0;
  for (size_t i = 0; i < b.args.size(); ++i) {
    param_of[i] = param;
    if (is_discontiguous(b.args[i])) {
      STOWAGE_TRY(check_discontiguous_arg(*kernel, param, b.args[i].var));
      param += 3;
      continue;
    }
    STOWAGE_TRY(check_kernel_arg(*kernel, kernel->params[param], b.args[i], i));
    if (kernel->params[param].is_image()) STOWAGE_TRY(check_image_offset_arg(*kernel, param, b.args[i].var));
    param += has_image_offset(*kernel, param) ? 2 : 1;
  }
  STOWAGE_TRY(check_image_aliasing(*kernel, b, param_of));
  return check_launch_size(b);
}

// The three parameters a discontiguous tensor fills, starting at `first`.
Status FunctionVerifier::check_discontiguous_arg(const KernelSignature& kernel, size_t first,
                                                 const std::string& name) {
  const VarInfo& tensor = *lookup(name);
  const DiscontiguousInfo& info = *tensor.discontiguous;
  DType entry = info.entry_bytes == 8 ? DType::kUInt64 : DType::kUInt32;
  std::string entry_type = cl_type_name(entry, 1);
  const KernelParam& tables = kernel.params[first];
  const KernelParam& root = kernel.params[first + 1];
  const KernelParam& data = kernel.params[first + 2];
  auto role = [&](const KernelParam& p, std::string_view what, std::string_view wanted) {
    return broken_rule("{} receives the {} of discontiguous tensor '{}', so it must be {}",
                       describe_param(kernel, p), what, name, wanted);
  };
  if (tables.kind != KernelParamKind::kGlobalBuffer || !tables.is_const || tables.dtype != entry ||
      tables.lanes != 1) {
    return role(tables, "tables", fmt::format("__global const {}*", entry_type));
  }
  if (root.kind != KernelParamKind::kScalar || root.dtype != entry || root.lanes != 1) {
    return role(root, "root table offset", fmt::format("a scalar {}", entry_type));
  }
  std::string element = cl_type_name(tensor.type.dtype, 1);
  if (!data.is_buffer() || data.dtype != tensor.type.dtype || data.lanes != 1) {
    return role(data, "data", fmt::format("a __global {}* (or const)", element));
  }
  return Status::ok();
}

Status FunctionVerifier::check_kernel_arg(const KernelSignature& kernel, const KernelParam& param, const Arg& arg,
                                          size_t index) {
  if (param.kind == KernelParamKind::kLocal) {
    return broken_rule("{} is a local buffer, which call_kernel does not support yet", describe_param(kernel, param));
  }
  if (arg.kind == Arg::Kind::kNull) {
    // A null pointer: the kernel must leave the parameter unread, as its other
    // arguments say (a flag, a count of 0); only the kernel's author knows that.
    if (param.is_buffer()) return Status::ok();
    return broken_rule("{} is a {}, but {} is null, which only a buffer parameter takes",
                       describe_param(kernel, param), kernel_param_kind_name(param.kind), describe_arg(arg, index));
  }
  if (param.kind == KernelParamKind::kScalar) return check_scalar_arg(kernel, param, arg, index);
  if (param.is_image_offset()) {  // only a signature made without the kernel reader has one elsewhere
    return broken_rule("{} is an image offset that does not follow an image parameter", describe_param(kernel, param));
  }
  if (arg.kind == Arg::Kind::kVar && lookup(arg.var)->type.kind == Type::Kind::kTensor) {
    return check_tensor_arg(kernel, param, arg.var);
  }
  std::string what = arg.kind == Arg::Kind::kVar ? print_type(lookup(arg.var)->type) : "a literal";
  return broken_rule("{} is a {}, but {} is {}, not a tensor", describe_param(kernel, param),
                     kernel_param_kind_name(param.kind), describe_arg(arg, index), what);
}

Status FunctionVerifier::check_tensor_arg(const KernelSignature& kernel, const KernelParam& param,
                                          const std::string& name) {
  const VarInfo& tensor = *lookup(name);
  if (tensor.is_constant && param.writes()) {
    return broken_rule("constant '{}' is read-only, but {} may write it (declare it {})", name,
                       describe_param(kernel, param),
                       param.is_image() ? "read_only image2d_t" : "__global const or __constant");
  }
  // Tensors of unknown placement (parameters, call results) live in buffers.
  bool in_image = tensor.scope != nullptr && tensor.scope->kind == ScopeKind::kImage2d;
  if (param.is_image()) {
    if (in_image) return Status::ok();
    return broken_rule("{} is a {}, but tensor '{}' is not in an image scope", describe_param(kernel, param),
                       kernel_param_kind_name(param.kind), name);
  }
  if (in_image) {
    return broken_rule("{} is a {}, but tensor '{}' is in image scope '{}'", describe_param(kernel, param),
                       kernel_param_kind_name(param.kind), name, tensor.scope->name);
  }
  std::string pointee = cl_type_name(param.dtype, param.lanes);
  if (tensor.type.dtype != param.dtype) {
    return broken_rule("{} points to {}, but tensor '{}' holds {}", describe_param(kernel, param), pointee, name,
                       dtype_name(tensor.type.dtype));
  }
  // A shape without an element count is reported where its type is declared.
  std::optional<uint64_t> elements = checked_num_elements(tensor.type.shape);
  if (param.lanes > 1 && elements && *elements % param.lanes != 0) {
    return broken_rule("{} points to {}, but tensor '{}' has {} elements, not a multiple of {}",
                       describe_param(kernel, param), pointee, name, *elements, param.lanes);
  }
  return Status::ok();
}

Status FunctionVerifier::check_scalar_arg(const KernelSignature& kernel, const KernelParam& param, const Arg& arg,
                                          size_t index) {
  std::string type = cl_type_name(param.dtype, param.lanes);
  if (param.lanes > 1) {
    return broken_rule("{} is a vector scalar {}, which call_kernel does not support yet",
                       describe_param(kernel, param), type);
  }
  bool wants_float = dtype_is_float(param.dtype);
  Type given = arg_type(arg);
  bool matches = wants_float ? given.kind == Type::Kind::kFloat : given.kind == Type::Kind::kInt;
  if (!matches) {
    return broken_rule("{} is a scalar {}, but {} is {}", describe_param(kernel, param), type,
                       describe_arg(arg, index), print_type(given));
  }
  if (arg.kind == Arg::Kind::kInt && !int_fits(param.dtype, arg.int_value)) {
    return broken_rule("the integer {} does not fit {}, a {}", arg.int_value, describe_param(kernel, param), type);
  }
  return Status::ok();
}

// An image parameter without an offset parameter after it reads or writes from the
// image's origin: it takes only a tensor that starts there.
Status FunctionVerifier::check_image_offset_arg(const KernelSignature& kernel, size_t param,
                                                const std::string& name) {
  if (has_image_offset(kernel, param)) return Status::ok();
  const VarInfo& tensor = *lookup(name);
  if (tensor.image_offset == ImageOffset{}) return Status::ok();
  return broken_rule("{} has no stowage_image_offset parameter after it, so it takes only tensors at [0, 0], but "
                     "tensor '{}' is at [{}, {}] in image storage '{}'",
                     describe_param(kernel, kernel.params[param]), name, tensor.image_offset.y, tensor.image_offset.x,
                     tensor.image_storage);
}

// OpenCL 1.2 images are either read or written within one kernel: no image storage
// is bound to both a read_only and a write_only parameter, whichever tensors in it
// are bound; nor is one tensor bound to two parameters that write it.
Status FunctionVerifier::check_image_aliasing(const KernelSignature& kernel, const Binding& b,
                                              const std::vector<size_t>& param_of) {
  auto image_arg = [&](size_t i) -> const VarInfo* {
    const Arg& a = b.args[i];
    if (a.kind != Arg::Kind::kVar || !kernel.params[param_of[i]].is_image()) return nullptr;
    const VarInfo* info = lookup(a.var);
    return info->image_storage.empty() ? nullptr : info;
  };
  for (size_t i = 0; i < b.args.size(); ++i) {
    const VarInfo* first = image_arg(i);
    if (first == nullptr) continue;
    for (size_t j = i + 1; j < b.args.size(); ++j) {
      const VarInfo* second = image_arg(j);
      if (second == nullptr || second->image_storage != first->image_storage) continue;
      const KernelParam& p = kernel.params[param_of[i]];
      const KernelParam& q = kernel.params[param_of[j]];
      const bool same_tensor = b.args[i].var == b.args[j].var;
      if (p.writes() == q.writes() && !(same_tensor && p.writes())) continue;
      if (same_tensor) {
        return broken_rule("tensor '{}' is bound to parameters '{}' and '{}' of kernel '{}': it would be read and "
                           "written through an image",
                           b.args[i].var, p.name, q.name, kernel.name);
      }
      return broken_rule("tensors '{}' and '{}' share image storage '{}' and are bound to parameters '{}' ({}) and "
                         "'{}' ({}) of kernel '{}': one kernel cannot read and write the same image",
                         b.args[i].var, b.args[j].var, first->image_storage, p.name, kernel_param_kind_name(p.kind),
                         q.name, kernel_param_kind_name(q.kind), kernel.name);
    }
  }
  return Status::ok();
}

Status FunctionVerifier::check_launch_size(const Binding& b) {
  std::string grid = print_shape_list(b.grid);
  if (b.grid.empty() || b.grid.size() > 3) return broken_rule("grid {} must have 1 to 3 dimensions", grid);
  for (int64_t g : b.grid) {
    if (g <= 0) return broken_rule("grid {} has an extent that is not positive", grid);
  }
  if (std::optional<uint64_t> items = checked_num_elements(b.grid); !items || *items > bytecode::kMaxLaunchWorkItems) {
    return broken_rule("grid {} has {} work items, more than the limit of {} (2^40)", grid,
                       items ? fmt::to_string(*items) : "2^64 or more", bytecode::kMaxLaunchWorkItems);
  }
  if (b.local.empty()) return Status::ok();
  std::string local = print_shape_list(b.local);
  if (b.local.size() != b.grid.size()) {
    return broken_rule("local size {} has {} dimensions, but grid {} has {}", local, b.local.size(), grid,
                       b.grid.size());
  }
  for (size_t d = 0; d < b.local.size(); ++d) {
    if (b.local[d] <= 0) return broken_rule("local size {} has an extent that is not positive", local);
    if (b.grid[d] % b.local[d] != 0) {
      return broken_rule("local size {} does not divide grid {} in dimension {}", local, grid, d);
    }
  }
  return Status::ok();
}

}  // namespace stowage::ir::verify
