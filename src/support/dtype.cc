#include "stowage/support/dtype.h"

#include <array>

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

}  // namespace stowage
