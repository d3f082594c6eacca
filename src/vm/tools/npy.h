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

Expected<Array> parse(const std::vector<std::byte>& bytes, const std::string& origin);
Expected<Array> read_file(const std::string& path);
std::vector<std::byte> serialize(const std::vector<int64_t>& shape, DType dtype, const std::vector<std::byte>& data);
Status write_file(const std::string& path, const std::vector<int64_t>& shape, DType dtype,
                  const std::vector<std::byte>& data);

}  // namespace stowage::npy
