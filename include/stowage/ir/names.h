// What may name a variable, function or kernel unit in the IR: names the text
// form can print and read back unchanged.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace stowage::ir {

// [A-Za-z_][A-Za-z0-9_.]*
bool is_identifier(std::string_view name);

// A word the text form gives a meaning of its own: fn, kernels, return, the type
// names (Tensor, Storage, Shape, Tuple, Object, int, float, bool), the dtype
// names, true, false, inf, nan.
bool is_reserved_word(std::string_view name);

// Why `name` cannot name something, e.g. "'1x' is not a valid name (expected
// [A-Za-z_][A-Za-z0-9_.]*)" or "'return' is a reserved word"; nullopt when it can.
std::optional<std::string> name_problem(std::string_view name);

}  // namespace stowage::ir
