#include "cl_headers.h"

#include <fmt/format.h>

#include <optional>

namespace stowage::ir {
namespace {

constexpr ClHeader kHeaders[] = {
#include "embedded_cl_headers.inc"
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The shipped header a line includes, if it is such an include.
std::optional<ClHeader> included_header(std::string_view line) {
  line = trim(line);
  if (line.empty() || line.front() != '#') return std::nullopt;
  line = trim(line.substr(1));
  if (!line.starts_with("include")) return std::nullopt;
  line = trim(line.substr(7));
  if (line.size() < 2) return std::nullopt;
  char close = line.front() == '<' ? '>' : line.front() == '"' ? '"' : '\0';
  if (close == '\0' || line.back() != close) return std::nullopt;
  std::string_view path = line.substr(1, line.size() - 2);
  if (!path.starts_with("stowage/")) return std::nullopt;
  for (const ClHeader& h : kHeaders) {
    if (path.substr(8) == h.name) return h;
  }
  return std::nullopt;
}

}  // namespace

std::span<const ClHeader> shipped_cl_headers() { return kHeaders; }

std::string table_entry_define(uint32_t table_entry_bytes) {
  return fmt::format("STOWAGE_TABLE_ENTRY_BYTES={}", table_entry_bytes);
}

std::string expand_shipped_includes(std::string_view source, uint32_t table_entry_bytes) {
  std::string out;
  size_t line_number = 1;
  size_t pos = 0;
  while (pos < source.size()) {
    size_t end = source.find('\n', pos);
    size_t next = end == std::string_view::npos ? source.size() : end + 1;
    std::string_view line = source.substr(pos, next - pos);
    if (std::optional<ClHeader> header = included_header(line.substr(0, line.find('\n')))) {
      out += fmt::format("#ifndef STOWAGE_TABLE_ENTRY_BYTES\n#define STOWAGE_TABLE_ENTRY_BYTES {}\n#endif\n",
                         table_entry_bytes);
      out += header->text;
      if (!out.empty() && out.back() != '\n') out += '\n';
      out += fmt::format("#line {}\n", line_number + 1);
    } else {
      out += line;
    }
    pos = next;
    ++line_number;
  }
  return out;
}

}  // namespace stowage::ir
