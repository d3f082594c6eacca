#include "npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <string_view>

#include "stowage/support/file.h"

namespace stowage::npy {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct DescrName {
  std::string_view descr;
  DType dtype;
};

constexpr std::array<DescrName, 12> kDescrs = {{
    {"|b1", DType::kBool}, {"|i1", DType::kInt8}, {"<i2", DType::kInt16}, {"<i4", DType::kInt32},
    {"<i8", DType::kInt64}, {"|u1", DType::kUInt8}, {"<u2", DType::kUInt16}, {"<u4", DType::kUInt32},
    {"<u8", DType::kUInt64}, {"<f2", DType::kFloat16}, {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64},
}};

Error bad(const std::string& origin, const std::string& what) {
  return Error(ErrorKind::kInvalidInput, fmt::format("{}: not a valid .npy file: {}", origin, what));
}

// A tiny reader for the header's Python dict literal.
class HeaderReader {
 public:
  explicit HeaderReader(std::string_view text) : text_(text) {}
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool string(std::string& out) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool word(std::string_view w) {
    skip_space();
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool integer(int64_t& out) {
    skip_space();
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (v > (uint64_t{INT64_MAX} - 9) / 10) return false;
      v = v * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
    }
    if (pos_ == start) return false;
    out = static_cast<int64_t>(v);
    return true;
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Expected<Array> parse(const std::vector<std::byte>& bytes, const std::string& origin) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 10 || std::memcmp(p, kMagic.data(), kMagic.size()) != 0) return bad(origin, "no NUMPY magic");
  uint8_t major = p[6];
  uint8_t minor = p[7];
  // numpy defines 1.0, 2.0 and 3.0 (2.0 with a UTF-8 header; the dtypes read here
  // have ASCII names, so it reads the same).
  if (minor != 0 || major < 1 || major > 3) {
    return bad(origin, fmt::format("format version {}.{} is not supported", major, minor));
  }
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = p[8] | (p[9] << 8);
    header_start = 10;
  } else {
    if (bytes.size() < 12) return bad(origin, "truncated header");
    header_len = static_cast<size_t>(p[8]) | (static_cast<size_t>(p[9]) << 8) | (static_cast<size_t>(p[10]) << 16) |
                 (static_cast<size_t>(p[11]) << 24);
    header_start = 12;
  }
  if (header_len > kMaxHeaderBytes) {
    return bad(origin, fmt::format("header of {} bytes exceeds the limit of {}", header_len, kMaxHeaderBytes));
  }
  if (header_len > bytes.size() - header_start) return bad(origin, "header runs past the end of the file");
  std::string_view header(reinterpret_cast<const char*>(p + header_start), header_len);
  HeaderReader r(header);
  std::string descr;
  bool fortran = false;
  bool have_descr = false, have_order = false, have_shape = false;
  Array array;
  if (!r.eat('{')) return bad(origin, "header is not a dict");
  while (!r.eat('}')) {
    std::string key;
    if (!r.string(key) || !r.eat(':')) return bad(origin, "malformed header dict");
    if (key == "descr") {
      if (!r.string(descr)) return bad(origin, "descr is not a string");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (r.word("False")) {
        fortran = false;
      } else if (r.word("True")) {
        fortran = true;
      } else {
        return bad(origin, "fortran_order is not True or False");
      }
      have_order = true;
    } else if (key == "shape") {
      if (!r.eat('(')) return bad(origin, "shape is not a tuple");
      while (!r.eat(')')) {
        int64_t extent = 0;
        if (!r.integer(extent)) return bad(origin, "shape holds a non-integer");
        if (array.shape.size() >= 16) return bad(origin, "shape has more than 16 dimensions");
        array.shape.push_back(extent);
        if (r.eat(')')) break;
        if (!r.eat(',')) return bad(origin, "malformed shape tuple");
      }
      have_shape = true;
    } else {
      return bad(origin, fmt::format("unexpected header key '{}'", key));
    }
    if (!r.eat(',')) {
      if (!r.eat('}')) return bad(origin, "malformed header dict");
      break;
    }
  }
  if (!r.at_end()) return bad(origin, "trailing characters after the header dict");
  if (!have_descr || !have_order || !have_shape) return bad(origin, "header lacks descr, fortran_order or shape");
  if (fortran) return bad(origin, "Fortran-ordered arrays are not supported; save a C-ordered array");
  bool known = false;
  for (const auto& d : kDescrs) {
    if (d.descr == descr || (d.descr[0] == '|' && descr.size() == 3 && descr.substr(1) == d.descr.substr(1))) {
      array.dtype = d.dtype;
      known = true;
    }
  }
  if (!known) return bad(origin, fmt::format("dtype '{}' is not supported (little-endian numeric types only)", descr));
  auto nbytes = checked_nbytes(array.shape, array.dtype);
  size_t data_start = header_start + header_len;
  if (!nbytes) return bad(origin, "array size overflows");
  if (*nbytes != bytes.size() - data_start) {
    return bad(origin, fmt::format("data holds {} bytes, the header says {}", bytes.size() - data_start, *nbytes));
  }
  array.data.assign(bytes.begin() + static_cast<ptrdiff_t>(data_start), bytes.end());
  return array;
}

Expected<Array> read_file(const std::string& path, uint64_t max_data_bytes) {
  constexpr uint64_t kPreamble = 12;  // magic, version, header length (format 2.0 and 3.0)
  uint64_t limit = std::min(max_data_bytes, kMaxDataBytes) + kPreamble + kMaxHeaderBytes;
  auto raw = read_regular_file(path, limit, ".npy file");
  if (!raw) return raw.error();
  std::vector<std::byte> bytes(raw->size());
  if (!raw->empty()) std::memcpy(bytes.data(), raw->data(), raw->size());
  return parse(bytes, path);
}

std::vector<std::byte> serialize(const std::vector<int64_t>& shape, DType dtype, const std::vector<std::byte>& data) {
  std::string descr;
  for (const auto& d : kDescrs) {
    if (d.dtype == dtype) descr = d.descr;
  }
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Pad so that the data starts on a 64-byte boundary, ending with a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::vector<std::byte> out;
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  out.push_back(std::byte{1});
  out.push_back(std::byte{0});
  out.push_back(static_cast<std::byte>(header.size() & 0xff));
  out.push_back(static_cast<std::byte>(header.size() >> 8));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status write_file(const std::string& path, const std::vector<int64_t>& shape, DType dtype,
                  const std::vector<std::byte>& data) {
  auto bytes = serialize(shape, dtype, data);
  return write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                               ".npy file", WrittenFile::kOutput);
}

}  // namespace stowage::npy
