// libFuzzer target for the validating loader: any input must yield an Executable
// or one kInvalidInput error, never a crash, leak, hang or sanitizer report.
//
// Random mutations almost never keep the CRC-32s right, so each input is read
// twice: as it is (exercising the header and checksum checks) and with both
// checksums recomputed (exercising the section readers and the code validator).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "stowage/bytecode/file.h"
#include "stowage/bytecode/format.h"

namespace {

void store_u32(std::vector<uint8_t>& bytes, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

std::vector<uint8_t> with_checksums_recomputed(std::span<const uint8_t> input) {
  using namespace stowage::bytecode;
  std::vector<uint8_t> bytes(input.begin(), input.end());
  if (bytes.size() < kHeaderSize) return bytes;
  store_u32(bytes, HeaderField::kBodyCrc,
            static_cast<uint32_t>(crc32_z(0, bytes.data() + kHeaderSize, bytes.size() - kHeaderSize)));
  store_u32(bytes, HeaderField::kHeaderCrc, 0);
  store_u32(bytes, HeaderField::kHeaderCrc, static_cast<uint32_t>(crc32_z(0, bytes.data(), kHeaderSize)));
  return bytes;
}

void check(std::span<const uint8_t> bytes) {
  stowage::Expected<stowage::Executable> exe = stowage::read_bytecode(bytes);
  if (!exe) {
    if (exe.error().kind() != stowage::ErrorKind::kInvalidInput) std::abort();
    return;
  }
  // What the reader accepts, the writer writes as a file the reader accepts again
  // and rebuilds identically (compared as bytes: NaN constants are not ==).
  std::vector<uint8_t> written = stowage::write_bytecode(*exe);
  stowage::Expected<stowage::Executable> again = stowage::read_bytecode(written);
  if (!again || stowage::write_bytecode(*again) != written) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> input(data, size);
  check(input);
  check(with_checksums_recomputed(input));
  return 0;
}
