#include "stowage/support/dtype.h"

#include <array>
#include <bit>
#include <cmath>

namespace stowage {
namespace {

struct DTypeInfo {
  std::string_view name;
  uint32_t bytes;
};

constexpr std::array<DTypeInfo, kDTypeCount> kInfo = {{
    {"bool", 1},
    {"int8", 1},
    {"int16", 2},
    {"int32", 4},
    {"int64", 8},
    {"uint8", 1},
    {"uint16", 2},
    {"uint32", 4},
    {"uint64", 8},
    {"float16", 2},
    {"float32", 4},
    {"float64", 8},
}};

}  // namespace

std::string_view dtype_name(DType dtype) { return kInfo[static_cast<uint8_t>(dtype)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (uint8_t i = 0; i < kDTypeCount; ++i) {
    if (kInfo[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_code(uint64_t code) {
  if (code >= kDTypeCount) return std::nullopt;
  return static_cast<DType>(code);
}

uint32_t dtype_bytes(DType dtype) { return kInfo[static_cast<uint8_t>(dtype)].bytes; }

bool dtype_is_float(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

bool dtype_is_signed_int(DType dtype) {
  return dtype == DType::kInt8 || dtype == DType::kInt16 || dtype == DType::kInt32 ||
         dtype == DType::kInt64;
}

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<uint64_t> checked_num_elements(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    auto next = checked_mul(n, static_cast<uint64_t>(extent));
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

std::optional<uint64_t> checked_nbytes(std::span<const int64_t> shape, DType dtype) {
  auto n = checked_num_elements(shape);
  if (!n) return std::nullopt;
  return checked_mul(*n, dtype_bytes(dtype));
}

float half_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa x 2^-24, exact in binary32.
  float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign != 0 ? -magnitude : magnitude;
}

uint16_t float_to_half(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t exponent = (bits >> 23) & 0xff;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent == 0xff) {  // inf stays inf; NaN keeps its top payload bits and stays NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0u));
  }
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;  // the half's biased exponent
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);     // overflow: infinity
  if (e <= 0) {
    // Subnormal half (or zero): shift the full significand into place, rounding.
    if (e < -10) return sign;
    mantissa |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u) != 0)) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1u) != 0)) ++half;  // may carry into the exponent: still right
  return static_cast<uint16_t>(sign | half);
}

}  // namespace stowage
