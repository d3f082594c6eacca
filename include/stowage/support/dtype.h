// Element types shared by the IR, the bytecode and the runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace stowage {

// The numeric values are part of the bytecode format: never renumber.
enum class DType : uint8_t {
  kBool = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kUInt8 = 5,
  kUInt16 = 6,
  kUInt32 = 7,
  kUInt64 = 8,
  kFloat16 = 9,
  kFloat32 = 10,
  kFloat64 = 11,
};
inline constexpr uint8_t kDTypeCount = 12;

std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);
// Decodes a stored byte; nullopt when it names no dtype.
std::optional<DType> dtype_from_code(uint64_t code);
uint32_t dtype_bytes(DType dtype);
bool dtype_is_float(DType dtype);
bool dtype_is_signed_int(DType dtype);

// Checked arithmetic: nullopt on overflow. Sizes come from untrusted input.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b);
std::optional<uint64_t> checked_add(uint64_t a, uint64_t b);
// Product of the extents (each must be >= 0) times the element size; nullopt when
// an extent is negative or the product overflows 64 bits.
std::optional<uint64_t> checked_nbytes(std::span<const int64_t> shape, DType dtype);
std::optional<uint64_t> checked_num_elements(std::span<const int64_t> shape);

// IEEE 754 binary16 <-> binary32: exact widening; narrowing rounds to nearest even
// (overflow gives infinity, NaN stays NaN).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);

}  // namespace stowage
