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

// Who may read a written file.
enum class WrittenFile {
  kPrivate,  // mode 0600: caches and logs of this user
  kOutput,   // what a tool writes for its user (bytecode, .npy, reports): mode 0666
             // less the process's umask, as any new file, and synced to disk before
             // the rename, so that a full disk fails the write rather than the file
};

// Writes `bytes` to `path` through a temporary file in the same directory
// (created exclusively with mkstemp), then renames it over `path`: a write that
// fails part-way leaves the file that was there whole and no temporary file.
// A symbolic link at `path` is replaced, not followed. Errors are of kind kIo.
Status write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what,
                             WrittenFile access = WrittenFile::kPrivate);

}  // namespace stowage
