#include "host_arrays.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace stowage::host_arrays {
namespace {

Expected<uint64_t> checked_bytes(std::span<const int64_t> shape, DType dtype, const std::string& what) {
  for (int64_t extent : shape) {
    if (extent < 0) {
      return Error(ErrorKind::kInvalidInput, fmt::format("{}: the file gives no static shape to generate", what));
    }
  }
  std::optional<uint64_t> nbytes = checked_nbytes(shape, dtype);
  if (!nbytes || *nbytes > kMaxGeneratedBytes) {
    return Error(ErrorKind::kInvalidInput,
                 fmt::format("{}: too large to generate (the limit is {} bytes)", what, kMaxGeneratedBytes));
  }
  return *nbytes;
}

template <typename T>
void store(std::byte* out, T value) {
  std::memcpy(out, &value, sizeof(T));
}

template <typename T>
T load(const std::byte* in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  return value;
}

// A floating-point element as a double.
double element(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::kFloat16: return half_to_float(load<uint16_t>(p));
    case DType::kFloat32: return load<float>(p);
    case DType::kFloat64: return load<double>(p);
    default: return 0.0;
  }
}

// An integer or bool element as 64 bits: signed types sign-extended (compared and
// printed as int64), unsigned ones and bools zero-extended.
uint64_t integer(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::kBool: return load<uint8_t>(p) != 0 ? 1 : 0;
    case DType::kInt8: return static_cast<uint64_t>(int64_t{load<int8_t>(p)});
    case DType::kInt16: return static_cast<uint64_t>(int64_t{load<int16_t>(p)});
    case DType::kInt32: return static_cast<uint64_t>(int64_t{load<int32_t>(p)});
    case DType::kInt64: return static_cast<uint64_t>(load<int64_t>(p));
    case DType::kUInt8: return load<uint8_t>(p);
    case DType::kUInt16: return load<uint16_t>(p);
    case DType::kUInt32: return load<uint32_t>(p);
    case DType::kUInt64: return load<uint64_t>(p);
    default: return 0;
  }
}

// One element as text: integers exactly, floats with 6 significant digits.
std::string element_text(DType dtype, const std::byte* p) {
  if (dtype == DType::kBool) return load<uint8_t>(p) != 0 ? "true" : "false";
  if (dtype_is_float(dtype)) return fmt::format("{:.6g}", element(dtype, p));
  const uint64_t v = integer(dtype, p);
  return dtype_is_signed_int(dtype) ? fmt::to_string(static_cast<int64_t>(v)) : fmt::to_string(v);
}

std::string number(double value) { return fmt::format("{:.6g}", value); }

}  // namespace

Expected<std::vector<std::byte>> zeros(std::span<const int64_t> shape, DType dtype, const std::string& what) {
  STOWAGE_TRY_ASSIGN(uint64_t nbytes, checked_bytes(shape, dtype, what));
  return std::vector<std::byte>(nbytes);
}

Expected<std::vector<std::byte>> random(std::span<const int64_t> shape, DType dtype, std::mt19937_64& engine,
                                        const std::string& what) {
  STOWAGE_TRY_ASSIGN(uint64_t nbytes, checked_bytes(shape, dtype, what));
  std::vector<std::byte> bytes(nbytes);
  const uint32_t size = dtype_bytes(dtype);
  for (uint64_t at = 0; at < nbytes; at += size) {
    const uint64_t bits = engine();
    std::byte* out = bytes.data() + at;
    // The top 24 bits: a multiple of 2^-23 in [-1, 1), exact in every float type.
    const double real = static_cast<double>(bits >> 40) * 0x1p-23 - 1.0;
    const uint64_t small = (bits >> 32) % 10;  // [0, 10); the bias of 2^32 mod 10 is negligible
    switch (dtype) {
      case DType::kBool: store<uint8_t>(out, static_cast<uint8_t>(bits >> 63)); break;
      case DType::kInt8: store<int8_t>(out, static_cast<int8_t>(small)); break;
      case DType::kInt16: store<int16_t>(out, static_cast<int16_t>(small)); break;
      case DType::kInt32: store<int32_t>(out, static_cast<int32_t>(small)); break;
      case DType::kInt64: store<int64_t>(out, static_cast<int64_t>(small)); break;
      case DType::kUInt8: store<uint8_t>(out, static_cast<uint8_t>(small)); break;
      case DType::kUInt16: store<uint16_t>(out, static_cast<uint16_t>(small)); break;
      case DType::kUInt32: store<uint32_t>(out, static_cast<uint32_t>(small)); break;
      case DType::kUInt64: store<uint64_t>(out, small); break;
      case DType::kFloat16: store<uint16_t>(out, float_to_half(static_cast<float>(real))); break;
      case DType::kFloat32: store<float>(out, static_cast<float>(real)); break;
      case DType::kFloat64: store<double>(out, real); break;
    }
  }
  return bytes;
}

std::string summarize(DType dtype, std::span<const std::byte> bytes, size_t first) {
  const uint32_t size = dtype_bytes(dtype);
  const uint64_t count = bytes.size() / size;
  if (count == 0) return "no elements";
  std::string text;
  if (dtype_is_float(dtype)) {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -std::numeric_limits<double>::infinity();
    double sum = 0.0;
    uint64_t nans = 0;
    for (uint64_t i = 0; i < count; ++i) {
      const double v = element(dtype, bytes.data() + i * size);
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    if (nans == count) {
      text = fmt::format("all {} NaN", count);
    } else {
      text = fmt::format("min {}, max {}, mean {}", number(lo), number(hi),
                         number(sum / static_cast<double>(count - nans)));
      if (nans > 0) text += fmt::format(", {} NaN", nans);
    }
  } else {
    // Integers and bools: min and max exactly, as the elements print.
    uint64_t lo = 0;
    uint64_t hi = 0;
    long double sum = 0.0;  // 64 bits of mantissa on x86-64: every int64 exactly
    const bool is_signed = dtype_is_signed_int(dtype);
    auto less = [&](uint64_t a, uint64_t b) {
      return is_signed ? static_cast<int64_t>(a) < static_cast<int64_t>(b) : a < b;
    };
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t v = integer(dtype, bytes.data() + i * size);
      if (i == 0 || less(v, lo)) lo = v;
      if (i == 0 || less(hi, v)) hi = v;
      sum += is_signed ? static_cast<long double>(static_cast<int64_t>(v)) : static_cast<long double>(v);
    }
    auto exact = [&](uint64_t v) {
      return is_signed ? fmt::to_string(static_cast<int64_t>(v)) : fmt::to_string(v);
    };
    text = fmt::format("min {}, max {}, mean {}", exact(lo), exact(hi), number(static_cast<double>(sum / static_cast<long double>(count))));
  }
  const uint64_t shown = std::min<uint64_t>(first, count);
  std::vector<std::string> values;
  for (uint64_t i = 0; i < shown; ++i) values.push_back(element_text(dtype, bytes.data() + i * size));
  text += shown == count ? fmt::format("; [{}]", fmt::join(values, ", "))
                         : fmt::format("; first {} of {}: [{}, ...]", shown, count, fmt::join(values, ", "));
  return text;
}

}  // namespace stowage::host_arrays
