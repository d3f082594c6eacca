// Decoding and validation of the code section, once every table it refers to has
// been read and checked. Private to src/bytecode.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"

namespace stowage::bytecode {

// Where one function's code lies in the code section, in words.
struct CodeRange {
  uint32_t first_word = 0;
  uint32_t num_words = 0;
};

// The code section's words and its position in the file, for error offsets.
struct CodeSection {
  std::span<const uint32_t> words;
  uint64_t file_offset = 0;
};

// Decodes the code of every function of `exe` (ranges[i] belongs to
// exe.functions[i]) and validates it against the tables already in `exe`:
// operand indices and kinds, register life, call arities, kernel launch shapes,
// scopes and static storage bounds. Fills exe.functions[i].code.
Status decode_and_validate_code(Executable& exe, const CodeSection& code, std::span<const CodeRange> ranges);

}  // namespace stowage::bytecode
