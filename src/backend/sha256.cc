#include "sha256.h"

#include <openssl/evp.h>

#include <new>

namespace stowage::opencl {
namespace {

EVP_MD_CTX* ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

Sha256Fields::Sha256Fields() : context_(EVP_MD_CTX_new()) {
  if (context_ == nullptr || EVP_DigestInit_ex(ctx(context_), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

Sha256Fields::~Sha256Fields() { EVP_MD_CTX_free(ctx(context_)); }

Sha256Fields& Sha256Fields::add(std::string_view field) {
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(field.size()) >> (8 * i));
  EVP_DigestUpdate(ctx(context_), length, sizeof(length));
  EVP_DigestUpdate(ctx(context_), field.data(), field.size());
  return *this;
}

Sha256Digest Sha256Fields::finish() {
  Sha256Digest digest{};
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx(context_), digest.data(), &size);
  return digest;
}

Sha256Digest sha256(std::string_view bytes) {
  Sha256Digest digest{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  return digest;
}

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace stowage::opencl
