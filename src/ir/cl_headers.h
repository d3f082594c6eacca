// The OpenCL C headers shipped with Stowage (include/stowage/opencl/*.cl.h), which
// kernel units include as `#include <stowage/NAME>`. The kernel reader hands them
// to libclang as virtual files; the code generator writes them into the units'
// sources, so a bytecode file stays self-contained and the runtime needs no files.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "stowage/bytecode/kernel_source.h"

namespace stowage::ir {

struct ClHeader {
  std::string_view name;  // file name, e.g. "discontiguous.cl.h"
  std::string_view text;
};

std::span<const ClHeader> shipped_cl_headers();

// The directory libclang sees the headers in: `<stowage/NAME>` resolves under it.
inline constexpr std::string_view kVirtualIncludeDir = "/stowage-virtual-include";

// The macro the headers read the target's table entry width from.
std::string table_entry_define(uint32_t table_entry_bytes);

// The first place where `source` could make a preprocessor read a file
// (stowage/bytecode/kernel_source.h), other than a line `#include <stowage/NAME>`
// (or "stowage/NAME") of a shipped header; nullopt when there is none.
std::optional<FileAccess> first_foreign_file_access(std::string_view source);

// "<stowage/discontiguous.cl.h>", and any other shipped header, for messages.
std::string shipped_header_names();

// `source` with each line `#include <stowage/NAME>` (or "stowage/NAME") of a shipped
// header replaced by the header's text, preceded by the entry-width macro and
// followed by a #line directive so that later lines keep their numbers. What it
// leaves is self-contained when first_foreign_file_access found nothing.
std::string expand_shipped_includes(std::string_view source, uint32_t table_entry_bytes);

}  // namespace stowage::ir
