// Writing and reading bytecode files (layout: format.h, docs/bytecode.md).
//
// The reader validates the whole file before it returns anything: structure,
// checksums, limits, every index and operand kind, and the static storage bounds
// of the code. An Executable it returns can be run without further checks of its
// indices; every failure is one Error of kind kInvalidInput whose message names
// the section and byte offset at fault.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"

namespace stowage {

// Serialises `exe`. Does not validate: read_bytecode of the result tells whether
// the executable is valid (write_bytecode_file does that check itself).
std::vector<uint8_t> write_bytecode(const Executable& exe);

// Validates `bytes` as a whole and rebuilds the executable it holds.
Expected<Executable> read_bytecode(std::span<const uint8_t> bytes);

// Validates `bytes` as read_bytecode does, keeping nothing.
Status validate_bytecode(std::span<const uint8_t> bytes);

// Reads and validates a file: kIo when it cannot be read (missing, not a regular
// file, larger than 2^40 bytes), else as read_bytecode. The file is mapped, and the
// executable's constant data are views of the mapping, which it keeps alive: a
// large weight section is not copied into a second buffer.
Expected<Executable> read_bytecode_file(const std::string& path);

// Writes `exe` to `path` after checking that read_bytecode accepts it, so no tool
// leaves behind a file the runtime would refuse (kInvalidInput, with the reader's
// message). kIo when the file cannot be written.
Status write_bytecode_file(const Executable& exe, const std::string& path);

}  // namespace stowage
