#include "cl_headers.h"

#include <fmt/format.h>

#include <algorithm>
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

// The line of `source` that holds byte `offset`, without its newline.
std::string_view line_at(std::string_view source, size_t offset) {
  size_t start = source.rfind('\n', offset);
  start = start == std::string_view::npos ? 0 : start + 1;
  size_t end = source.find('\n', offset);
  if (end == std::string_view::npos) end = source.size();
  return source.substr(start, end - start);
}

}  // namespace

std::span<const ClHeader> shipped_cl_headers() { return kHeaders; }

std::string table_entry_define(uint32_t table_entry_bytes) {
  return fmt::format("STOWAGE_TABLE_ENTRY_BYTES={}", table_entry_bytes);
}

std::optional<FileAccess> first_foreign_file_access(std::string_view source) {
  for (FileAccess& access : find_file_accesses(source)) {
    if (access.form != "#include" || !included_header(line_at(source, access.offset))) return std::move(access);
  }
  return std::nullopt;
}

std::string shipped_header_names() {
  std::string names;
  for (const ClHeader& h : kHeaders) names += fmt::format("{}<stowage/{}>", names.empty() ? "" : ", ", h.name);
  return names;
}

std::string expand_shipped_includes(std::string_view source, uint32_t table_entry_bytes) {
  std::string out;
  size_t copied = 0;
  for (const FileAccess& access : find_file_accesses(source)) {
    if (access.form != "#include") continue;
    std::string_view line = line_at(source, access.offset);
    std::optional<ClHeader> header = included_header(line);
    if (!header) continue;  // left for the loader to refuse
    size_t line_start = static_cast<size_t>(line.data() - source.data());
    size_t line_end = line_start + line.size();
    out += source.substr(copied, line_start - copied);
    out += fmt::format("#ifndef STOWAGE_TABLE_ENTRY_BYTES\n#define STOWAGE_TABLE_ENTRY_BYTES {}\n#endif\n",
                       table_entry_bytes);
    out += header->text;
    if (!out.empty() && out.back() != '\n') out += '\n';
    size_t next_line = std::count(source.begin(), source.begin() + static_cast<ptrdiff_t>(line_end), '\n') + 2;
    out += fmt::format("#line {}", next_line);
    copied = line_end;  // the include's newline follows the #line
  }
  out += source.substr(copied);
  return out;
}

}  // namespace stowage::ir
