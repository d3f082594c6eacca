#include "mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stowage::bytecode {

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error(ErrorKind::kIo, fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Error(ErrorKind::kIo, fmt::format("cannot read '{}': {}", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* what = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file";
    return Error(ErrorKind::kIo, fmt::format("cannot read '{}': it is {}", path, what));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxFileBytes) {
    ::close(fd);
    return Error(ErrorKind::kIo,
                 fmt::format("cannot read '{}': {} bytes exceed the limit of {} bytes", path, size, kMaxFileBytes));
  }
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Error(ErrorKind::kIo, fmt::format("cannot map '{}': {}", path, std::strerror(err)));
    }
    data = static_cast<const uint8_t*>(mapped);
  }
  ::close(fd);  // the mapping stays valid
  return std::shared_ptr<const MappedFile>(new MappedFile(data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace stowage::bytecode
