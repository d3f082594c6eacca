#include "file_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "byte_io.h"
#include "section_cursor.h"
#include "stowage/bytecode/executable.h"

namespace stowage::bytecode {

std::string_view section_name(SectionKind kind) {
  switch (kind) {
    case SectionKind::kStrings: return "strings";
    case SectionKind::kConstants: return "constants";
    case SectionKind::kKernels: return "kernels";
    case SectionKind::kFunctions: return "functions";
    case SectionKind::kCode: return "code";
    case SectionKind::kRequirements: return "requirements";
    case SectionKind::kDebug: return "debug";
    case SectionKind::kTensorConstants: return "tensor constants";
    case SectionKind::kConstantData: return "constant data";
    case SectionKind::kMemoryLayout: return "memory layout";
    case SectionKind::kMemoryPlan: return "memory plan";
    case SectionKind::kOrigins: return "origins";
  }
  return "unknown";
}

namespace {

constexpr std::string_view kHeader = "header";
constexpr std::string_view kSectionTable = "section table";

Error header_error(uint64_t offset, std::string_view message) { return file_error(kHeader, offset, message); }

struct Extent {
  uint64_t begin;
  uint64_t end;
  std::string name;
  uint64_t entry;  // where the extent was declared, for errors
};

class LayoutReader {
 public:
  explicit LayoutReader(std::span<const uint8_t> file) : file_(file) {}

  Expected<FileLayout> read() {
    for (Status (LayoutReader::*step)() : {&LayoutReader::check_identity, &LayoutReader::check_checksums,
                                           &LayoutReader::read_header_fields, &LayoutReader::read_section_table}) {
      if (Status s = (this->*step)(); !s) return s.error();
    }
    return layout_;
  }

 private:
  // Magic, version and sizes: checked before the checksums so that a file of
  // another version is reported as such.
  Status check_identity();
  Status check_checksums();
  Status read_header_fields();
  Status read_section_table();
  Status read_section_entry(uint32_t index, std::vector<Extent>& extents);
  // The two constant sections come together, need version 1.2, and the data starts
  // where a mapped file can use it in place.
  Status check_constant_sections() const;
  // No two extents (header, table, sections) overlap; the bytes between are zero.
  Status check_extents(std::vector<Extent>& extents) const;
  Status check_padding(uint64_t begin, uint64_t end) const;

  std::span<const uint8_t> file_;
  uint64_t table_offset_ = 0;
  uint32_t section_count_ = 0;
  FileLayout layout_;
};

Status LayoutReader::check_identity() {
  const uint64_t size = file_.size();
  if (size < kMagic.size() || !std::equal(kMagic.begin(), kMagic.end(), file_.begin())) {
    if (size < kMagic.size()) {
      return header_error(0, fmt::format("file is {} bytes, shorter than the {}-byte header", size, kHeaderSize));
    }
    return header_error(0, "bad magic: not a Stowage bytecode file");
  }
  if (size < kHeaderSize) {
    return header_error(size, fmt::format("file is {} bytes, shorter than the {}-byte header", size, kHeaderSize));
  }
  const uint8_t* h = file_.data();
  uint16_t major = load_le<uint16_t>(h + HeaderField::kMajor);
  uint16_t minor = load_le<uint16_t>(h + HeaderField::kMinor);
  if (major != kMajorVersion) {
    return header_error(HeaderField::kMajor,
                        fmt::format("major version {} not supported (this runtime reads {})", major, kMajorVersion));
  }
  if (minor > kMinorVersion) {
    return header_error(HeaderField::kMinor, fmt::format("version {}.{} is newer than this runtime's {}.{}", major,
                                                         minor, kMajorVersion, kMinorVersion));
  }
  uint32_t header_size = load_le<uint32_t>(h + HeaderField::kHeaderSize);
  if (header_size != kHeaderSize) {
    return header_error(HeaderField::kHeaderSize, fmt::format("header size {} (version {}.{} headers are {} bytes)",
                                                              header_size, major, minor, kHeaderSize));
  }
  uint64_t file_size = load_le<uint64_t>(h + HeaderField::kFileSize);
  if (file_size != size) {
    return header_error(HeaderField::kFileSize,
                        fmt::format("file size field says {} bytes, the file has {}", file_size, size));
  }
  return Status::ok();
}

Status LayoutReader::check_checksums() {
  const uint8_t* h = file_.data();
  std::array<uint8_t, kHeaderSize> zeroed;
  std::copy(h, h + kHeaderSize, zeroed.begin());
  store_le<uint32_t>(zeroed.data() + HeaderField::kHeaderCrc, 0);
  uint32_t header_crc = load_le<uint32_t>(h + HeaderField::kHeaderCrc);
  if (uint32_t computed = crc32_of(zeroed); computed != header_crc) {
    return header_error(
        HeaderField::kHeaderCrc,
        fmt::format("header checksum mismatch (stored 0x{:08x}, computed 0x{:08x})", header_crc, computed));
  }
  uint32_t body_crc = load_le<uint32_t>(h + HeaderField::kBodyCrc);
  if (uint32_t computed = crc32_of(file_.subspan(kHeaderSize)); computed != body_crc) {
    return header_error(HeaderField::kBodyCrc,
                        fmt::format("body checksum mismatch (stored 0x{:08x}, computed 0x{:08x})", body_crc, computed));
  }
  return Status::ok();
}

Status LayoutReader::read_header_fields() {
  const uint64_t size = file_.size();
  const uint8_t* h = file_.data();
  for (uint32_t at = HeaderField::kReserved; at < kHeaderSize; ++at) {
    if (h[at] != 0) return header_error(at, "reserved header bytes are not zero");
  }

  layout_.minor = load_le<uint16_t>(h + HeaderField::kMinor);
  layout_.features = load_le<uint64_t>(h + HeaderField::kFeatures);
  if (uint64_t unknown = layout_.features & ~uint64_t{kKnownFeatures}; unknown != 0) {
    return header_error(HeaderField::kFeatures, fmt::format("unknown feature bits 0x{:x} (this runtime knows 0x{:x})",
                                                            unknown, uint64_t{kKnownFeatures}));
  }
  table_offset_ = load_le<uint64_t>(h + HeaderField::kSectionTableOffset);
  section_count_ = load_le<uint32_t>(h + HeaderField::kSectionCount);
  if (section_count_ > kMaxSections) {
    return header_error(HeaderField::kSectionCount,
                        fmt::format("{} sections (a file has at most {})", section_count_, kMaxSections));
  }
  uint64_t table_bytes = uint64_t{section_count_} * kSectionEntrySize;  // <= kMaxSections * 24: no overflow
  if (table_offset_ < kHeaderSize || table_offset_ % kSectionAlignment != 0 ||
      !(table_bytes <= size && table_offset_ <= size - table_bytes)) {
    return header_error(HeaderField::kSectionTableOffset,
                        fmt::format("section table at offset {} ({} entries) must be {}-aligned, after the header "
                                    "and inside the {}-byte file",
                                    table_offset_, section_count_, kSectionAlignment, size));
  }
  return Status::ok();
}

Status LayoutReader::read_section_table() {
  std::vector<Extent> extents = {{0, kHeaderSize, "the header", 0},
                                 {table_offset_, table_offset_ + uint64_t{section_count_} * kSectionEntrySize,
                                  "the section table", HeaderField::kSectionTableOffset}};
  for (uint32_t i = 0; i < section_count_; ++i) STOWAGE_TRY(read_section_entry(i, extents));
  for (uint32_t k = kFirstSectionKind; k <= kLastSectionKind; ++k) {
    auto kind = static_cast<SectionKind>(k);
    if (is_required(kind) && !layout_.section(kind)) {
      return file_error(kSectionTable, table_offset_,
                        fmt::format("required section '{}' is missing", section_name(kind)));
    }
  }
  STOWAGE_TRY(check_constant_sections());
  if (layout_.section(SectionKind::kMemoryLayout) && layout_.minor < 3) {
    return header_error(HeaderField::kMinor, fmt::format("version {}.{} files have no memory layout; it needs 1.3",
                                                         kMajorVersion, layout_.minor));
  }
  if (layout_.section(SectionKind::kMemoryPlan) && layout_.minor < 5) {
    return header_error(HeaderField::kMinor, fmt::format("version {}.{} files have no memory plan; it needs 1.5",
                                                         kMajorVersion, layout_.minor));
  }
  if (layout_.section(SectionKind::kOrigins) && layout_.minor < 5) {
    return header_error(HeaderField::kMinor, fmt::format("version {}.{} files have no origins; they need 1.5",
                                                         kMajorVersion, layout_.minor));
  }
  return check_extents(extents);
}

Status LayoutReader::check_constant_sections() const {
  const auto& tensors = layout_.section(SectionKind::kTensorConstants);
  const auto& data = layout_.section(SectionKind::kConstantData);
  if (!tensors && !data) return Status::ok();
  if (!tensors || !data) {
    return file_error(kSectionTable, (tensors ? tensors : data)->entry,
                      fmt::format("section '{}' is present without section '{}'",
                                  section_name(tensors ? SectionKind::kTensorConstants : SectionKind::kConstantData),
                                  section_name(tensors ? SectionKind::kConstantData : SectionKind::kTensorConstants)));
  }
  if (layout_.minor < 2) {
    return header_error(HeaderField::kMinor, fmt::format("version {}.{} files have no tensor constants; they need 1.2",
                                                         kMajorVersion, layout_.minor));
  }
  if (data->offset % kConstantDataAlignment != 0) {
    return file_error(kSectionTable, data->entry + SectionEntryField::kOffset,
                      fmt::format("section 'constant data' at offset {} is not a multiple of {}", data->offset,
                                  kConstantDataAlignment));
  }
  return Status::ok();
}

Status LayoutReader::read_section_entry(uint32_t i, std::vector<Extent>& extents) {
  const uint64_t size = file_.size();
  uint64_t entry = table_offset_ + uint64_t{i} * kSectionEntrySize;
  const uint8_t* e = file_.data() + entry;
  uint32_t raw_kind = load_le<uint32_t>(e + SectionEntryField::kKind);
  uint32_t flags = load_le<uint32_t>(e + SectionEntryField::kFlags);
  uint64_t offset = load_le<uint64_t>(e + SectionEntryField::kOffset);
  uint64_t length = load_le<uint64_t>(e + SectionEntryField::kSize);
  if (raw_kind < kFirstSectionKind || raw_kind > kLastSectionKind) {
    return file_error(kSectionTable, entry, fmt::format("entry {}: unknown section kind {}", i, raw_kind));
  }
  std::string name = fmt::format("section '{}'", section_name(static_cast<SectionKind>(raw_kind)));
  if (flags != 0) {
    return file_error(kSectionTable, entry + SectionEntryField::kFlags,
                      fmt::format("entry {}: reserved flags 0x{:x} of {} are not zero", i, flags, name));
  }
  std::optional<Section>& slot = layout_.sections[raw_kind - kFirstSectionKind];
  if (slot) return file_error(kSectionTable, entry, fmt::format("entry {}: {} appears twice", i, name));
  if (offset % kSectionAlignment != 0) {
    return file_error(
        kSectionTable, entry + SectionEntryField::kOffset,
        fmt::format("entry {}: {} offset {} is not a multiple of {}", i, name, offset, kSectionAlignment));
  }
  if (!(length <= size && offset <= size - length)) {
    return file_error(
        kSectionTable, entry + SectionEntryField::kOffset,
        fmt::format("entry {}: {} (offset {}, size {}) lies outside the {}-byte file", i, name, offset, length, size));
  }
  slot = Section{offset, length, entry};
  extents.push_back({offset, offset + length, std::move(name), entry + SectionEntryField::kOffset});
  return Status::ok();
}

Status LayoutReader::check_extents(std::vector<Extent>& extents) const {
  // Sorted by start, neighbours must not overlap (empty extents overlap nothing).
  std::erase_if(extents, [](const Extent& x) { return x.begin == x.end; });
  std::stable_sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    const Extent& prev = extents[i - 1];
    const Extent& next = extents[i];
    if (next.begin < prev.end) {
      return file_error(kSectionTable, next.entry,
                        fmt::format("{} [{}, {}) overlaps {} [{}, {})", next.name, next.begin, next.end, prev.name,
                                    prev.begin, prev.end));
    }
  }
  // Bytes outside every extent are padding and must be zero, so that every byte of a
  // valid file means something and no data can hide between sections.
  uint64_t covered = 0;
  for (const Extent& extent : extents) {
    STOWAGE_TRY(check_padding(covered, extent.begin));
    covered = extent.end;
  }
  return check_padding(covered, file_.size());
}

Status LayoutReader::check_padding(uint64_t begin, uint64_t end) const {
  for (uint64_t at = begin; at < end; ++at) {
    if (file_[at] != 0) {
      return file_error("padding", at, fmt::format("byte 0x{:02x} outside every section is not zero", file_[at]));
    }
  }
  return Status::ok();
}

}  // namespace

Expected<FileLayout> read_file_layout(std::span<const uint8_t> file) { return LayoutReader(file).read(); }

}  // namespace stowage::bytecode
