#include "stowage/ir/printer.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "constant_text.h"

namespace stowage::ir {
namespace {

std::string join_ints(const std::vector<int64_t>& values) { return fmt::format("{}", fmt::join(values, ", ")); }

// Scope names are plain words in practice; escaping keeps any string parseable.
std::string quote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

// Shortest text that reads back as the same double, always marked as a float.
std::string print_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string print_args(const std::vector<Arg>& args) {
  std::string out = "[";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i != 0) out += ", ";
    out += print_arg(args[i]);
  }
  return out + "]";
}

std::string print_keyword(const Binding& b, Operand keyword) {
  switch (keyword) {
    case Operand::kDeviceKw: return fmt::format("device={}", b.device);
    case Operand::kDTypeKw: return fmt::format("dtype={}", dtype_name(b.dtype));
    case Operand::kScopeKw:
    case Operand::kScopeOptKw: return fmt::format("scope={}", quote(b.scope));
    case Operand::kTableScopeKw: return fmt::format("table_scope={}", quote(b.table_scope));
    case Operand::kGridKw: return fmt::format("grid={}", print_shape_list(b.grid));
    case Operand::kLocalKw: return b.local.empty() ? "" : fmt::format("local={}", print_shape_list(b.local));
    default: return "";
  }
}

// The operands in the order of the op's row in op_table.h. `in_image`: b is an
// alloc_tensor in a storage known to be an image, whose offset prints as [y, x].
std::string print_operands(const Binding& b, bool in_image = false) {
  std::string out;
  size_t var = 0;
  auto add = [&out](const std::string& part) {
    if (part.empty()) return;
    if (!out.empty()) out += ", ";
    out += part;
  };
  for (Operand operand : op_info(b.op).operand_list()) {
    switch (operand) {
      case Operand::kVar: add(var < b.vars.size() ? b.vars[var] : ""); ++var; break;
      case Operand::kOffset:
        // A byte offset in an image storage (which the verifier refuses) prints as it is.
        if (b.op == Op::kAllocTensor && ((in_image && b.offset == 0) || b.image_offset != ImageOffset{})) {
          add(fmt::format("[{}, {}]", b.image_offset.y, b.image_offset.x));
        } else {
          add(fmt::format("{}", b.offset));
        }
        break;
      case Operand::kSize:
      case Operand::kShape: add(print_shape_list(b.shape)); break;
      case Operand::kDType: add(std::string(dtype_name(b.dtype))); break;
      case Operand::kKernel:
      case Operand::kFunction: add(b.callee); break;
      case Operand::kArgs: add(print_args(b.args)); break;
      case Operand::kTableOffsets:
        add(b.table_offsets.size() == 1 && b.shape.size() == 2 ? fmt::format("{}", b.table_offsets[0])
                                                               : print_shape_list(b.table_offsets));
        break;
      case Operand::kDataOffsets: add(print_shape_list(b.data_offsets)); break;
      default: add(print_keyword(b, operand)); break;
    }
  }
  return out;
}

std::string print_unit(const KernelSourceUnit& unit) {
  return fmt::format("kernels {} \"\"\"\n{}\"\"\"\n", unit.name, unit.source);
}

}  // namespace

std::string print_shape_list(const std::vector<int64_t>& shape) { return "[" + join_ints(shape) + "]"; }

std::string print_type(const Type& type) {
  switch (type.kind) {
    case Type::Kind::kTensor: {
      std::string dims = join_ints(type.shape);
      if (type.shape.size() == 1) dims += ",";
      return fmt::format("Tensor[({}), {}]", dims, dtype_name(type.dtype));
    }
    case Type::Kind::kTuple: {
      std::string out = "Tuple[";
      for (size_t i = 0; i < type.fields.size(); ++i) {
        if (i != 0) out += ", ";
        out += print_type(type.fields[i]);
      }
      return out + "]";
    }
    case Type::Kind::kStorage: return "Storage";
    case Type::Kind::kShape: return "Shape";
    case Type::Kind::kInt: return "int";
    case Type::Kind::kFloat: return "float";
    case Type::Kind::kBool: return "bool";
    case Type::Kind::kObject: return "Object";
  }
  return "Object";
}

std::string print_arg(const Arg& arg) {
  switch (arg.kind) {
    case Arg::Kind::kVar: return arg.var;
    case Arg::Kind::kInt: return fmt::format("{}", arg.int_value);
    case Arg::Kind::kFloat: return print_float(arg.float_value);
    case Arg::Kind::kNull: return "null";
  }
  return arg.var;
}

std::string print_binding(const Binding& binding) {
  std::string out;
  if (!binding.result.empty()) out = binding.result + " = ";
  return out + fmt::format("{}({})", op_name(binding.op), print_operands(binding));
}

namespace {

// Within a function, storages allocated with a size [height, width] are images
// (buffers have [nbytes]): tensors in them print their offsets as [y, x].
std::string print_bindings(const Function& function) {
  std::string out;
  std::set<std::string> images;
  for (const Binding& b : function.bindings) {
    if (b.op == Op::kAllocStorage && b.shape.size() == 2) images.insert(b.result);
    bool in_image = b.op == Op::kAllocTensor && !b.vars.empty() && images.count(b.vars[0]) != 0;
    std::string result = b.result.empty() ? "" : b.result + " = ";
    out += fmt::format("  {}{}({})\n", result, op_name(b.op), print_operands(b, in_image));
  }
  return out;
}

}  // namespace

std::string print_function(const Function& function) {
  std::string out = fmt::format("fn {}(", function.name);
  for (size_t i = 0; i < function.params.size(); ++i) {
    if (i != 0) out += ", ";
    out += fmt::format("{}: {}", function.params[i].name, print_type(function.params[i].type));
  }
  out += fmt::format(") -> {} {{\n", print_type(function.ret_type));
  out += print_bindings(function);
  return out + fmt::format("  return {}\n}}\n", print_returned(function));
}

std::string print_returned(const Function& function) {
  std::string names = fmt::format("{}", fmt::join(function.returns, ", "));
  if (!function.returns_tuple) return names;
  return fmt::format("({}{})", names, function.returns.size() == 1 ? "," : "");
}

std::string print_constant(const ConstantTensor& c, const PrintOptions& options) {
  std::string data = "external";
  if (c.data && c.data->size() <= options.external_above_bytes) {
    std::span<const std::byte> bytes(c.data->data(), c.data->size());
    std::optional<std::string> numbers;
    auto count = checked_num_elements(c.type.shape);
    if (count && *count <= text::kMaxListedElements && bytes.size() == *count * dtype_bytes(c.type.dtype)) {
      numbers = text::format_numbers(c.type.dtype, bytes);
    }
    data = numbers ? *numbers : "base64 \"" + text::base64_encode(bytes) + "\"";
  }
  return fmt::format("const {}: {} = {}, scope={}", c.name, print_type(c.type), data, quote(c.scope));
}

std::string print_module(const Module& module, const PrintOptions& options) {
  std::string out;
  auto separate = [&out] {
    if (!out.empty()) out += "\n";
  };
  for (const auto& unit : module.units) {
    separate();
    out += print_unit(unit);
  }
  if (!module.constants.empty()) {
    separate();
    for (const auto& constant : module.constants) out += print_constant(constant, options) + "\n";
  }
  for (const auto& function : module.functions) {
    separate();
    out += print_function(function);
  }
  return out;
}

bool kernel_source_is_printable(std::string_view source) { return source.find("\"\"\"") == std::string_view::npos; }

}  // namespace stowage::ir
