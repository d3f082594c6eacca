#include "constant_text.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace stowage::ir::text {
namespace {

template <typename T>
void put(std::vector<std::byte>& out, T value) {  // little-endian, as the host is
  std::array<std::byte, sizeof(T)> bytes;
  std::memcpy(bytes.data(), &value, sizeof(T));
  out.insert(out.end(), bytes.begin(), bytes.end());
}

template <typename T>
T get(std::span<const std::byte> bytes, size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
bool fits(int64_t v) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return v >= 0;
  } else {
    return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// Shortest text that reads back as the same value of the type, marked as a float.
template <typename F>
std::string float_text(F value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

Expected<std::vector<std::byte>> numbers_to_bytes(DType dtype, std::span<const ConstantNumber> numbers) {
  std::vector<std::byte> out;
  out.reserve(numbers.size() * dtype_bytes(dtype));
  for (size_t i = 0; i < numbers.size(); ++i) {
    const ConstantNumber& n = numbers[i];
    if (dtype_is_float(dtype)) {
      double v = n.is_float ? n.float_value : static_cast<double>(n.int_value);
      switch (dtype) {
        case DType::kFloat16: put(out, float_to_half(static_cast<float>(v))); break;
        case DType::kFloat32: put(out, static_cast<float>(v)); break;
        default: put(out, v); break;
      }
      continue;
    }
    if (n.is_float) {
      return Error(ErrorKind::kInvalidInput, fmt::format("element {} is a float, but the dtype is {}", i,
                                                         dtype_name(dtype)));
    }
    const int64_t v = n.int_value;
    bool ok = true;
    switch (dtype) {
      case DType::kBool: ok = v == 0 || v == 1; if (ok) put(out, static_cast<uint8_t>(v)); break;
      case DType::kInt8: ok = fits<int8_t>(v); if (ok) put(out, static_cast<int8_t>(v)); break;
      case DType::kInt16: ok = fits<int16_t>(v); if (ok) put(out, static_cast<int16_t>(v)); break;
      case DType::kInt32: ok = fits<int32_t>(v); if (ok) put(out, static_cast<int32_t>(v)); break;
      case DType::kInt64: put(out, v); break;
      case DType::kUInt8: ok = fits<uint8_t>(v); if (ok) put(out, static_cast<uint8_t>(v)); break;
      case DType::kUInt16: ok = fits<uint16_t>(v); if (ok) put(out, static_cast<uint16_t>(v)); break;
      case DType::kUInt32: ok = fits<uint32_t>(v); if (ok) put(out, static_cast<uint32_t>(v)); break;
      case DType::kUInt64: ok = fits<uint64_t>(v); if (ok) put(out, static_cast<uint64_t>(v)); break;
      default: break;
    }
    if (!ok) {
      return Error(ErrorKind::kInvalidInput, fmt::format("element {} ({}) does not fit {}", i, v, dtype_name(dtype)));
    }
  }
  return out;
}

std::optional<std::string> format_numbers(DType dtype, std::span<const std::byte> bytes) {
  const size_t count = bytes.size() / dtype_bytes(dtype);
  std::string out = "[";
  std::vector<ConstantNumber> parsed;
  for (size_t i = 0; i < count; ++i) {
    if (i != 0) out += ", ";
    std::string text;
    ConstantNumber n;
    switch (dtype) {
      case DType::kBool: n.int_value = get<uint8_t>(bytes, i); break;
      case DType::kInt8: n.int_value = get<int8_t>(bytes, i); break;
      case DType::kInt16: n.int_value = get<int16_t>(bytes, i); break;
      case DType::kInt32: n.int_value = get<int32_t>(bytes, i); break;
      case DType::kInt64: n.int_value = get<int64_t>(bytes, i); break;
      case DType::kUInt8: n.int_value = get<uint8_t>(bytes, i); break;
      case DType::kUInt16: n.int_value = get<uint16_t>(bytes, i); break;
      case DType::kUInt32: n.int_value = get<uint32_t>(bytes, i); break;
      case DType::kUInt64: {
        uint64_t v = get<uint64_t>(bytes, i);
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        n.int_value = static_cast<int64_t>(v);
        break;
      }
      case DType::kFloat16: {
        float f = half_to_float(get<uint16_t>(bytes, i));
        n = ConstantNumber{true, 0, f};
        text = float_text(f);
        break;
      }
      case DType::kFloat32: {
        float f = get<float>(bytes, i);
        n = ConstantNumber{true, 0, f};
        text = float_text(f);
        break;
      }
      case DType::kFloat64: {
        double d = get<double>(bytes, i);
        n = ConstantNumber{true, 0, d};
        text = float_text(d);
        break;
      }
    }
    out += n.is_float ? text : fmt::to_string(n.int_value);
    if (n.is_float && std::isnan(n.float_value)) n.float_value = std::numeric_limits<double>::quiet_NaN();  // as read
    parsed.push_back(n);
  }
  // NaN payloads and signs do not survive `nan`: keep the list only if it reads back.
  Expected<std::vector<std::byte>> again = numbers_to_bytes(dtype, parsed);
  if (!again || again->size() != bytes.size() ||
      (!bytes.empty() && std::memcmp(again->data(), bytes.data(), bytes.size()) != 0)) {  // empty: data() may be null
    return std::nullopt;
  }
  return out + "]";
}

std::string base64_encode(std::span<const std::byte> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = std::to_integer<uint32_t>(bytes[i]) << 16 | std::to_integer<uint32_t>(bytes[i + 1]) << 8 |
                 std::to_integer<uint32_t>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
  }
  if (size_t rest = bytes.size() - i; rest != 0) {
    uint32_t v = std::to_integer<uint32_t>(bytes[i]) << 16;
    if (rest == 2) v |= std::to_integer<uint32_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::vector<std::byte>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::array<int8_t, 256> value;
  value.fill(-1);
  for (size_t k = 0; k < kAlphabet.size(); ++k) value[static_cast<uint8_t>(kAlphabet[k])] = static_cast<int8_t>(k);
  std::vector<std::byte> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = last ? (text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0) : 0;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      int8_t d = k >= 4 - pad ? 0 : value[static_cast<uint8_t>(text[i + k])];
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<std::byte>(v >> 16));
    if (pad < 2) out.push_back(static_cast<std::byte>(v >> 8));
    if (pad < 1) out.push_back(static_cast<std::byte>(v));
  }
  // One encoding per byte string: the bits a padded group leaves over must be zero.
  if (!out.empty() && base64_encode(out) != text) return std::nullopt;
  return out;
}

}  // namespace stowage::ir::text
