// What may name a variable, function or kernel unit in the IR: names the text
// form can print and read back unchanged.
#pragma once

#include <string_view>

#include "stowage/support/error.h"

namespace stowage::ir {

// [A-Za-z_][A-Za-z0-9_.]*
bool is_identifier(std::string_view name);

// A word the text form gives a meaning of its own: fn, kernels, return, the type
// names (Tensor, Storage, Shape, Tuple, Object, int, float, bool), the dtype
// names, true, false, inf, nan, null.
bool is_reserved_word(std::string_view name);

// Ok when `name` can name something; else why not, e.g. "'1x' is not a valid name
// (expected [A-Za-z_][A-Za-z0-9_.]*)" or "'return' is a reserved word".
Status validate_name(std::string_view name);

}  // namespace stowage::ir
