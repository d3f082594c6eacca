// SHA-256 through OpenSSL's libcrypto: the keys and checksums of the kernel cache.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stowage::opencl {

using Sha256Digest = std::array<uint8_t, 32>;

// Hashes a sequence of fields, each prefixed with its length, so that no two
// different sequences hash the same bytes ("ab","c" and "a","bc" differ).
class Sha256Fields {
 public:
  Sha256Fields();
  ~Sha256Fields();
  Sha256Fields(const Sha256Fields&) = delete;
  Sha256Fields& operator=(const Sha256Fields&) = delete;

  Sha256Fields& add(std::string_view field);
  Sha256Digest finish();

 private:
  void* context_;  // EVP_MD_CTX
};

Sha256Digest sha256(std::string_view bytes);
std::string to_hex(const Sha256Digest& digest);

}  // namespace stowage::opencl
