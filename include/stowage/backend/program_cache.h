// OpenCL programs built once per context, with binaries cached on disk so that a
// second start of a process does not recompile.
//
// The disk cache lives in $STOWAGE_CACHE_DIR, else $XDG_CACHE_HOME/stowage/kernels,
// else $HOME/.cache/stowage/kernels; STOWAGE_CACHE_DIR=off turns it off. Directories
// it creates get mode 0700, and it is used only when its directory belongs to the
// user and no one else may write to it. A file is named by its key: the SHA-256 of
// everything that determines the binary (the unit's source, which is
// self-contained because units may not include files, the build options, the
// device's name, vendor and version, its platform's name and version, the
// driver's version). A file holds
//   8 bytes   magic "STWKBIN" 0x01
//   32 bytes  the key
//   32 bytes  the SHA-256 of the binary
//   8 bytes   the binary's size (little-endian u64)
//   the binary
// and is used only when all of it checks out and the driver accepts the binary;
// anything else is rebuilt from source and replaced (written to a fresh temporary
// file and renamed into place, never through a symbolic link).
//
// A build error is one line (the driver's first diagnostic); STOWAGE_BUILD_LOG=FILE
// writes the driver's whole log of a failed build to FILE.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "stowage/backend/opencl.h"
#include "stowage/bytecode/executable.h"

namespace stowage::opencl {

struct ProgramCacheStats {
  uint64_t built_from_source = 0;
  uint64_t loaded_from_disk = 0;
  uint64_t refused_from_disk = 0;  // cache files found but not used (damaged, another key, rejected)
};

class ProgramCache {
 public:
  explicit ProgramCache(std::shared_ptr<Context> context);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // The built program for `unit`; built (or loaded from disk) on first use.
  Expected<cl_program> program(const KernelUnit& unit);
  const ProgramCacheStats& stats() const { return stats_; }

  static constexpr const char* kBuildOptions = "-cl-std=CL1.2 -cl-kernel-arg-info";
  static constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;  // a cache file larger is not read

 private:
  Expected<cl_program> build(const KernelUnit& unit, const std::string& key);
  std::optional<cl_program> load(const std::string& key, const std::string& file);
  std::shared_ptr<Context> context_;
  std::map<std::string, cl_program> programs_;  // by key
  ProgramCacheStats stats_;
};

// The key of `unit`'s binary on `device`: 64 hexadecimal digits of SHA-256.
std::string program_cache_key(const KernelUnit& unit, const DeviceInfo& device);

// The directory of the on-disk cache, or "" when it is off or cannot be found.
std::string kernel_cache_dir();

}  // namespace stowage::opencl
