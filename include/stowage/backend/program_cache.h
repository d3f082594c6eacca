// OpenCL programs built once per context, with binaries cached on disk keyed by the
// source, the build options, the device and the driver, so a second start of a
// process does not recompile.
//
// The disk cache lives in $STOWAGE_CACHE_DIR, else $XDG_CACHE_HOME/stowage/kernels,
// else $HOME/.cache/stowage/kernels; STOWAGE_CACHE_DIR=off turns it off. A cache
// file that the driver rejects is rebuilt from source and replaced.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "stowage/backend/opencl.h"
#include "stowage/bytecode/executable.h"

namespace stowage::opencl {

struct ProgramCacheStats {
  uint64_t built_from_source = 0;
  uint64_t loaded_from_disk = 0;
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

 private:
  Expected<cl_program> build(const KernelUnit& unit, uint64_t key);
  std::shared_ptr<Context> context_;
  std::map<uint64_t, cl_program> programs_;
  ProgramCacheStats stats_;
};

// The directory of the on-disk cache, or "" when it is off or cannot be found.
std::string kernel_cache_dir();

}  // namespace stowage::opencl
