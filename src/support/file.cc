#include "stowage/support/file.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace stowage {
namespace {

// strerror's text, without its thread-safety caveats.
std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

std::string file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

Expected<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what,
                                        Symlinks symlinks) {
  auto fail = [&](std::string_view reason) {
    return Error(ErrorKind::kIo, fmt::format("cannot read {} '{}': {}", what, path, reason));
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (symlinks == Symlinks::kRefuse) flags |= O_NOFOLLOW;
  FileDescriptor fd(::open(path.c_str(), flags));
  if (fd.get() < 0) {
    if (errno == ELOOP && symlinks == Symlinks::kRefuse) return fail("it is a symbolic link");
    return fail(errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail(fmt::format("it is {}, not a regular file", file_type_name(st.st_mode)));
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return fail(fmt::format("{} bytes exceed the limit of {}", static_cast<uint64_t>(st.st_size), max_bytes));
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  // The size may change while reading: read at most one byte past the limit to tell.
  char buffer[1 << 16];
  for (;;) {
    uint64_t room = max_bytes - bytes.size() + 1;
    size_t want = room < sizeof(buffer) ? static_cast<size_t>(room) : sizeof(buffer);
    ssize_t got = ::read(fd.get(), buffer, want);
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail(errno_text(errno));
    }
    if (got == 0) break;
    if (static_cast<uint64_t>(got) > max_bytes - bytes.size()) {
      return fail(fmt::format("it grew past the limit of {} bytes while being read", max_bytes));
    }
    bytes.append(buffer, static_cast<size_t>(got));
  }
  return bytes;
}

namespace {

// The process's umask, read without changing it (umask(2) would set it for every
// thread meanwhile); 022 where /proc does not say.
mode_t current_umask() {
  std::FILE* status = std::fopen("/proc/self/status", "re");
  mode_t mask = 022;
  if (status == nullptr) return mask;
  char line[256];
  while (std::fgets(line, sizeof line, status) != nullptr) {
    unsigned value = 0;
    if (std::sscanf(line, "Umask: %o", &value) == 1) {
      mask = static_cast<mode_t>(value & 0777);
      break;
    }
  }
  std::fclose(status);
  return mask;
}

}  // namespace

Status write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what,
                             WrittenFile access) {
  auto fail = [&](std::string_view reason) {
    return Error(ErrorKind::kIo, fmt::format("cannot write {} '{}': {}", what, path, reason));
  };
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  std::string temp = ((dir.empty() ? std::filesystem::path(".") : dir) / (target.filename().string() + ".XXXXXX"))
                         .string();
  // mkstemp creates the file with O_CREAT | O_EXCL (never through a link) and mode 0600.
  FileDescriptor fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (fd.get() < 0) return fail(fmt::format("cannot create a temporary file: {}", errno_text(errno)));
  auto discard = [&](std::string_view reason) {
    ::unlink(temp.c_str());
    return fail(reason);
  };
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return discard(errno_text(errno));
    }
    written += static_cast<size_t>(n);
  }
  if (access == WrittenFile::kOutput) {
    if (::fchmod(fd.get(), 0666 & ~current_umask()) != 0) return discard(errno_text(errno));
    if (::fsync(fd.get()) != 0) return discard(errno_text(errno));
  }
  if (::close(fd.release()) != 0) return discard(errno_text(errno));
  // rename replaces a link at `path` itself; it never writes through it.
  if (::rename(temp.c_str(), path.c_str()) != 0) return discard(errno_text(errno));
  return Status::ok();
}

}  // namespace stowage
