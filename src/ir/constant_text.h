// The data of a constant in the text form (docs/ir.md, "Constants"): a list of
// numbers when the tensor is small, else base64 of its little-endian bytes, or the
// word `external` when the data travels beside the text. Internal to src/ir.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/support/dtype.h"
#include "stowage/support/error.h"

namespace stowage::ir::text {

// Tensors of at most this many elements print as a list of numbers.
inline constexpr uint64_t kMaxListedElements = 64;

// A number of a constant's list as written: an integer literal or a float one
// (`inf`, `-inf` and `nan` included).
struct ConstantNumber {
  bool is_float = false;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// The bytes of `numbers` as elements of `dtype`; an error when one does not fit
// the dtype (an integer out of range, a float for an integer dtype).
Expected<std::vector<std::byte>> numbers_to_bytes(DType dtype, std::span<const ConstantNumber> numbers);

// `[1.5, -2.0]`: the elements of `bytes` as numbers, or nullopt when some would not
// read back to the same bytes (a NaN with a payload).
std::optional<std::string> format_numbers(DType dtype, std::span<const std::byte> bytes);

std::string base64_encode(std::span<const std::byte> bytes);
// nullopt for a character outside the alphabet, bad padding or a bad length.
std::optional<std::vector<std::byte>> base64_decode(std::string_view text);

}  // namespace stowage::ir::text
