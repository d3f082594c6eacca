// Target descriptions: the memory scopes a device offers, read from JSON. Shipped
// ones live in src/bytecode/targets/ (embedded in the bytecode library); users pass a path.
//
//   {
//     "name": "opencl",
//     "table_entry_bytes": 4,
//     "max_image_width": 16384, "max_image_height": 16384,
//     "scopes": [
//       {"name": "global", "kind": "buffer", "alignment": 128},
//       {"name": "global.onchip", "aliases": ["global.vtcm"], "kind": "buffer",
//        "alignment": 128, "capacity": 262144, "onchip": true, "fallback": "global"}
//     ],
//     "kernels": {"conv": {"CONV_TILE_M": 64}, "launch": {"SPLIT_K_GROUPS": 512}}
//   }
//
// "kernels" (optional) holds the operator library's defaults for this target: per
// kernel family, integer constants the kernels are built with, and under "launch"
// the library's launch policy (docs/operators.md, "Tuning knobs"). The compiler
// and the runtime do not read them; the importer does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"

namespace stowage {

struct ScopeDesc {
  std::string name;
  std::vector<std::string> aliases;  // other names accepted for this scope
  ScopeKind kind = ScopeKind::kBuffer;
  uint64_t alignment = 1;  // bytes; tensor offsets in this scope must be multiples
  uint64_t capacity = 0;   // bytes for buffers, 0 = unlimited
  bool onchip = false;
  std::string fallback;    // where the planner spills what does not fit
  // Image scopes: how [A, B, C, D, 4] maps to (height, width); one of
  // "activation", "weight", "nhwc".
  std::string layout;

  bool answers_to(std::string_view scope) const;
  // `layout` as the enum the executable records (kNone for buffer scopes).
  ImageLayout image_layout() const;
};

struct TargetDesc {
  std::string name;
  std::vector<ScopeDesc> scopes;
  uint32_t table_entry_bytes = 4;
  uint64_t max_image_width = 16384;
  uint64_t max_image_height = 16384;
  // family -> constant -> value ("kernels" above).
  std::map<std::string, std::map<std::string, int64_t>> kernel_tuning;

  // The scope named `scope` or one of its aliases; nullptr if none.
  const ScopeDesc* find_scope(std::string_view scope) const;

  // Parses a description; `origin` names the text in error messages.
  static Expected<TargetDesc> from_json(std::string_view text, std::string_view origin);
  // A shipped target by name ("opencl", ...) or a JSON file by path.
  static Expected<TargetDesc> load(std::string_view name_or_path);
  // Names of the shipped targets.
  static std::vector<std::string> builtin_names();
};

}  // namespace stowage
