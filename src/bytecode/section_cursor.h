// A bounds-checked little-endian cursor over one region of an untrusted bytecode
// file. Every read first checks the bytes left, in subtraction form and in the
// width of the access, and every failure is an Error naming the region, the
// absolute byte offset and the entity being read. Private to src/bytecode.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "byte_io.h"
#include "stowage/support/error.h"

namespace stowage::bytecode {

// "bytecode: <where> at byte <offset>: <message>", the one form of every reader error.
inline Error file_error(std::string_view where, uint64_t offset, std::string_view message) {
  return Error(ErrorKind::kInvalidInput, fmt::format("bytecode: {} at byte {}: {}", where, offset, message));
}

class SectionCursor {
 public:
  // `where` names the region in errors ("section 'strings'"); `region` starts at
  // absolute file offset `base`.
  SectionCursor(std::string where, std::span<const uint8_t> region, uint64_t base)
      : where_(std::move(where)), region_(region), base_(base) {}

  uint64_t offset() const { return base_ + pos_; }
  uint64_t remaining() const { return uint64_t{region_.size()} - pos_; }
  const std::string& where() const { return where_; }

  // The entity being read ("constant 3"), prefixed to messages; empty for none.
  void set_context(std::string context) { context_ = std::move(context); }

  Error error_at(uint64_t offset, std::string_view message) const {
    if (context_.empty()) return file_error(where_, offset, message);
    return file_error(where_, offset, fmt::format("{}: {}", context_, message));
  }
  Error error(std::string_view message) const { return error_at(offset(), message); }

  template <typename T>
  Status read(T& out, std::string_view what) {
    constexpr uint64_t kWidth = sizeof(T);
    if (kWidth > remaining()) return truncated(kWidth, what);
    out = load_le<T>(region_.data() + pos_);
    pos_ += kWidth;
    return Status::ok();
  }

  Status read_i64(int64_t& out, std::string_view what) {
    uint64_t bits = 0;
    if (Status s = read(bits, what); !s) return s;
    out = static_cast<int64_t>(bits);
    return Status::ok();
  }

  Status read_f64(double& out, std::string_view what) {
    uint64_t bits = 0;
    if (Status s = read(bits, what); !s) return s;
    std::memcpy(&out, &bits, sizeof out);
    return Status::ok();
  }

  // `length` raw bytes, as a view into the file.
  Status read_bytes(uint64_t length, std::string_view& out, std::string_view what) {
    if (length > remaining()) return truncated(length, what);
    out = std::string_view(reinterpret_cast<const char*>(region_.data() + pos_), length);
    pos_ += length;
    return Status::ok();
  }

  // A str (u32 length, bytes) of at most `limit` bytes.
  Status read_str(std::string& out, uint32_t limit, std::string_view what) {
    uint64_t at = offset();
    uint32_t length = 0;
    if (Status s = read(length, what); !s) return s;
    if (length > limit) {
      return error_at(at, fmt::format("{} of {} bytes exceeds the limit of {} bytes", what, length, limit));
    }
    std::string_view bytes;
    if (Status s = read_bytes(length, bytes, what); !s) return s;
    out.assign(bytes);
    return Status::ok();
  }

  // A u64 table count, refused when above `limit` or when `count` entries of at
  // least `min_entry_bytes` each cannot fit in what is left: afterwards the count
  // may size an allocation.
  Status read_count(uint64_t& out, uint64_t limit, uint64_t min_entry_bytes, std::string_view what) {
    uint64_t at = offset();
    if (Status s = read(out, what); !s) return s;
    return check_count(at, out, limit, min_entry_bytes, what);
  }

  // The same checks for a count read some other way (a u32 field).
  Status check_count(uint64_t at, uint64_t count, uint64_t limit, uint64_t min_entry_bytes,
                     std::string_view what) const {
    if (count > limit) return error_at(at, fmt::format("{} {} exceeds the limit {}", what, count, limit));
    if (count > remaining() / min_entry_bytes) {
      return error_at(at,
                      fmt::format("{} {} cannot fit in the {} bytes left in the section", what, count, remaining()));
    }
    return Status::ok();
  }

  Status expect_end() const {
    if (remaining() != 0) {
      return file_error(where_, offset(), fmt::format("{} unread bytes at the end of the section", remaining()));
    }
    return Status::ok();
  }

 private:
  Error truncated(uint64_t needed, std::string_view what) const {
    return error(fmt::format("truncated: {} needs {} bytes, {} left in the section", what, needed, remaining()));
  }

  std::string where_;
  std::span<const uint8_t> region_;
  uint64_t base_;
  uint64_t pos_ = 0;
  std::string context_;
};

}  // namespace stowage::bytecode
