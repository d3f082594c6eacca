// Reading and writing whole files without trusting them: a read takes only a
// regular file (a FIFO would block, /dev/zero would never end, a directory reads
// as nothing) and never more than a stated number of bytes; a write goes to a
// fresh temporary file that is renamed over the target, so readers see the old
// file or the new one, never a part, and no symbolic link is followed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stowage/support/error.h"

namespace stowage {

enum class Symlinks {
  kFollow,  // a link to a regular file reads that file
  kRefuse,  // a link is refused (a private cache whose files are never links)
};

// The bytes of `path`, a regular file of at most `max_bytes` bytes. `what` names
// the file's role for messages ("text IR file", ".npy file"). Every error is of
// kind kIo and names the role and the path:
//   cannot read text IR file 'dir': it is a directory, not a regular file
//   cannot read .npy file 'x.npy': 5368709120 bytes exceed the limit of 4294967296
Expected<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what,
                                        Symlinks symlinks = Symlinks::kFollow);

// Writes `bytes` to `path` through a temporary file in the same directory
// (created exclusively with mkstemp, mode 0600), then renames it over `path`.
// A symbolic link at `path` is replaced, not followed. Errors are of kind kIo.
Status write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what);

}  // namespace stowage
