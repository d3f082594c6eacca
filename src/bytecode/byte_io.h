// Little-endian byte I/O for the bytecode writer and reader. Private to src/bytecode.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace stowage::bytecode {

inline uint32_t crc32_of(std::span<const uint8_t> bytes) {
  return static_cast<uint32_t>(::crc32_z(0L, bytes.data(), bytes.size()));
}

template <typename T>
T load_le(const uint8_t* p) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(p[i]) << (8 * i);
  return value;
}

template <typename T>
void store_le(uint8_t* p, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

// Appends little-endian values to a growing buffer.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  size_t position() const { return out_.size(); }
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v); }
  void u32(uint32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v)); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put(bits);
  }
  void bytes(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  void bytes(std::span<const uint8_t> s) { out_.insert(out_.end(), s.begin(), s.end()); }
  // Zeros up to `position`, if the buffer is shorter.
  void zeros_to(size_t position) {
    if (position > out_.size()) out_.resize(position, 0);
  }
  // A u32 length, then the bytes.
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s);
  }
  void pad_to(size_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(0);
  }

 private:
  template <typename T>
  void put(T v) {
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    store_le(out_.data() + at, v);
  }
  std::vector<uint8_t>& out_;
};

}  // namespace stowage::bytecode
