// Reading and writing NumPy .npy files (format versions 1.0 to 3.0, little-endian,
// C order), strictly: every header field is checked, sizes are overflow-checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/support/dtype.h"
#include "stowage/support/error.h"

namespace stowage::npy {

struct Array {
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  std::vector<std::byte> data;
};

// The largest header read: numpy itself refuses headers past 10,000 bytes by default.
inline constexpr uint64_t kMaxHeaderBytes = 1 << 20;
// The largest array read_file takes unless told a smaller one.
inline constexpr uint64_t kMaxDataBytes = uint64_t{16} << 30;

Expected<Array> parse(const std::vector<std::byte>& bytes, const std::string& origin);
// Reads a regular file of at most the magic, version, kMaxHeaderBytes of header and
// `max_data_bytes` of data; anything else is refused (kIo) before it is read.
Expected<Array> read_file(const std::string& path, uint64_t max_data_bytes = kMaxDataBytes);
std::vector<std::byte> serialize(const std::vector<int64_t>& shape, DType dtype, const std::vector<std::byte>& data);
Status write_file(const std::string& path, const std::vector<int64_t>& shape, DType dtype,
                  const std::vector<std::byte>& data);

}  // namespace stowage::npy
