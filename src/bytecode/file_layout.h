// The container level of a bytecode file: header, checksums and section table,
// checked before any section is read. Private to src/bytecode.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "stowage/support/error.h"
#include "stowage/bytecode/format.h"

namespace stowage::bytecode {

struct Section {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entry = 0;  // where its section table entry lies in the file
};

struct FileLayout {
  uint64_t features = 0;  // the header's required feature bits
  uint16_t minor = 0;     // the header's minor version
  std::array<std::optional<Section>, kMaxSections> sections;

  // Present for every required kind once read_file_layout succeeded.
  const std::optional<Section>& section(SectionKind kind) const {
    return sections[static_cast<uint32_t>(kind) - kFirstSectionKind];
  }
};

// Sections every file has; debug, the two constant sections, the memory layout, the
// memory plan and the origins are optional.
inline bool is_required(SectionKind kind) {
  return kind != SectionKind::kDebug && kind != SectionKind::kTensorConstants && kind != SectionKind::kConstantData &&
         kind != SectionKind::kMemoryLayout && kind != SectionKind::kMemoryPlan && kind != SectionKind::kOrigins;
}

// Checks the header (magic, version, sizes, both checksums, reserved bytes,
// feature bits) and the section table (kinds, flags, alignment, bounds, overlap,
// required sections, zero padding) of `file`.
Expected<FileLayout> read_file_layout(std::span<const uint8_t> file);

}  // namespace stowage::bytecode
