#include "stowage/ir/names.h"

#include <fmt/format.h>

#include <array>

#include "stowage/support/dtype.h"

namespace stowage::ir {
namespace {

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

constexpr std::array<std::string_view, 16> kReservedWords = {
    "fn",  "kernels", "return", "Tensor", "Storage", "Shape", "Tuple", "Object",
    "int", "float",   "bool",   "true",   "false",   "inf",   "nan",   "null"};

}  // namespace

bool is_identifier(std::string_view name) {
  if (name.empty() || !is_letter(name[0])) return false;
  for (char c : name.substr(1)) {
    if (!is_letter(c) && !is_digit(c) && c != '.') return false;
  }
  return true;
}

bool is_reserved_word(std::string_view name) {
  for (std::string_view word : kReservedWords) {
    if (name == word) return true;
  }
  return parse_dtype(name).has_value();
}

Status validate_name(std::string_view name) {
  if (!is_identifier(name)) {
    return Error(ErrorKind::kInvalidInput,
                 fmt::format("'{}' is not a valid name (expected [A-Za-z_][A-Za-z0-9_.]*)", name));
  }
  if (is_reserved_word(name)) return Error(ErrorKind::kInvalidInput, fmt::format("'{}' is a reserved word", name));
  return Status::ok();
}

}  // namespace stowage::ir
