// The .npy reader of vm-run: format versions 1.0, 2.0 and 3.0 (2.0 with a UTF-8
// header), strictly; anything else refused with one line.
#include "npy.h"

#include <gtest/gtest.h>

#include <cstring>

namespace stowage::npy {
namespace {

// A file of `major`.`minor` with `header` (padded as numpy pads it) and `data`.
std::vector<std::byte> file_of(uint8_t major, uint8_t minor, std::string header, const std::string& data) {
  size_t preamble = major == 1 ? 10 : 12;
  size_t total = preamble + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += static_cast<char>(minor);
  for (size_t i = 0; i < preamble - 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + data;
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

const std::string kHeader = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
const std::string kData("\x01\x00\x00\x00\xff\xff\xff\xff", 8);

TEST(Npy, ReadsVersions1To3) {
  for (uint8_t major : {1, 2, 3}) {
    auto array = parse(file_of(major, 0, kHeader, kData), "a.npy");
    ASSERT_TRUE(array) << int{major} << ": " << array.error().message();
    EXPECT_EQ(array->shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(array->dtype, DType::kInt32);
    EXPECT_EQ(array->data.size(), 8u);
  }
}

TEST(Npy, RefusesOtherVersions) {
  auto v4 = parse(file_of(4, 0, kHeader, kData), "a.npy");
  ASSERT_FALSE(v4);
  EXPECT_EQ(v4.error().message(), "a.npy: not a valid .npy file: format version 4.0 is not supported");
  auto v31 = parse(file_of(3, 1, kHeader, kData), "a.npy");
  ASSERT_FALSE(v31);
  EXPECT_EQ(v31.error().message(), "a.npy: not a valid .npy file: format version 3.1 is not supported");
}

TEST(Npy, RefusesAHeaderPastTheLimit) {
  std::string header = kHeader;
  header.insert(header.size() - 1, std::string(kMaxHeaderBytes, ' '));
  auto array = parse(file_of(2, 0, header, kData), "a.npy");
  ASSERT_FALSE(array);
  EXPECT_EQ(array.error().message(),
            "a.npy: not a valid .npy file: header of 1048692 bytes exceeds the limit of 1048576");
}

}  // namespace
}  // namespace stowage::npy
