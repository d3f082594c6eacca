// A regular file mapped read-only into memory, so that a bytecode file's constant
// data can be used where it lies rather than read into a second buffer. Private to
// src/bytecode.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "stowage/support/error.h"

namespace stowage::bytecode {

// Files larger than this are refused before anything is mapped.
inline constexpr uint64_t kMaxFileBytes = uint64_t{1} << 40;

class MappedFile {
 public:
  // Maps `path`, which must be a regular file of at most kMaxFileBytes. Errors are
  // of kind kIo and name the path: missing, a directory, a FIFO or device, too large.
  static Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  MappedFile(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace stowage::bytecode
