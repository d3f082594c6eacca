// Finds where an OpenCL C source could make the device compiler read a file of the
// machine it runs on. A kernel unit in a bytecode file must be self-contained: the
// compiler inlines Stowage's shipped headers, the loader refuses any unit in which
// this scan finds anything, and so does the runtime before it builds a program.
//
// The scan follows the C preprocessor's first translation phases (trigraphs, line
// splices, comments, string and character literals, digraphs) and reports:
//   - the directives #include, #include_next, #import and #embed, however spelled
//     (`#  include`, `%:include`, `??=include`, `#/* */include`, split by `\` newline);
//   - the identifiers __has_include, __has_include_next and __has_embed (and any
//     identifier that starts with them);
//   - the _Pragma operator, and `dependency` in a #pragma line (`#pragma GCC
//     dependency "FILE"` looks the file up);
//   - a macro that pastes tokens (`##`), directly or through the macros it uses,
//     named in an #if or #elif line: pasting can spell __has_include.
// It is deliberately stricter than needed: a unit it refuses may be harmless, but a
// unit it accepts cannot name a file to the preprocessor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stowage {

struct FileAccess {
  uint64_t offset = 0;  // byte offset in the source: the directive's '#' or the identifier
  std::string form;     // "#include", "__has_include", "_Pragma", "#pragma dependency", "## in #if"
};

// Every place in `source` that could name a file, in source order.
std::vector<FileAccess> find_file_accesses(std::string_view source);

}  // namespace stowage
