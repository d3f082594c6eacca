// The OpenCL backend: device discovery and choice, one context and in-order queue
// per device handle, readable status names, and RAII for cl_mem.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 200
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif
#include <CL/cl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"

namespace stowage::opencl {

// "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR" for codes OpenCL 1.2 does not name.
const char* status_name(cl_int status);

// An error for a failed OpenCL call: "OpenCL error CL_INVALID_VALUE (-30) from clCreateBuffer".
Error cl_error(cl_int status, std::string_view call);

// What the runtime needs to know of a device.
struct DeviceInfo {
  std::string spec;      // "opencl:N", the index across all platforms
  std::string name;
  std::string vendor;
  std::string platform;
  std::string platform_version;  // CL_PLATFORM_VERSION
  std::string version;   // CL_DEVICE_VERSION
  std::string driver;    // CL_DRIVER_VERSION
  cl_device_type type = 0;
  bool image_support = false;
  uint64_t max_image2d_width = 0;
  uint64_t max_image2d_height = 0;
  uint64_t base_addr_align_bytes = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN is in bits
  uint64_t global_mem_bytes = 0;
  uint64_t max_alloc_bytes = 0;
  uint64_t local_mem_bytes = 0;
  uint64_t max_work_group_size = 0;             // CL_DEVICE_MAX_WORK_GROUP_SIZE
  std::vector<uint64_t> max_work_item_sizes;    // CL_DEVICE_MAX_WORK_ITEM_SIZES, per dimension
  uint32_t address_bits = 0;                    // CL_DEVICE_ADDRESS_BITS: the device's size_t
  bool fp16 = false;
  bool fp64 = false;
  // Coarse-grained buffer SVM (OpenCL 2.0+): kernels can take a pointer into an
  // allocation, so a tensor at an offset needs no sub-buffer.
  bool svm_coarse_grain = false;
  // Images over buffers (cl_khr_image2d_from_buffer, optional in OpenCL 3.0): an
  // image2d made over a buffer's bytes, rows CL_DEVICE_IMAGE_PITCH_ALIGNMENT pixels
  // apart at the least. 0 where the device offers none: then an image cannot be a
  // view of planned buffer bytes, and texture tensors are packed as rectangles in
  // image storages of their own (docs/planning.md, "Texture scopes").
  uint32_t image_pitch_alignment = 0;  // pixels
  // CL_DEVICE_MAX_READ_WRITE_IMAGE_ARGS (OpenCL 2.0+): 0 where a kernel may not both
  // read and write one image.
  uint32_t read_write_image_args = 0;

  std::string summary() const;       // one line: spec, name, platform, driver
  std::string capabilities() const;  // one line: images, SVM, float types, local memory
};

// Every OpenCL device of every platform, numbered as "opencl:N". Enumerated once
// per process (on first use, from any thread); later calls return the same list.
std::vector<DeviceInfo> list_devices();

// How kernels receive tensor views inside a buffer storage.
enum class BufferViews {
  kSvmWhereOffered,  // SVM pointers where the device has coarse-grained SVM, else sub-buffers
  kSubBuffers,       // always sub-buffers (VmOptions::svm off)
};

// Why `device` cannot run an executable with `requirements`; empty when it can.
// Sub-buffers need offsets aligned to the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN;
// SVM pointers need no more than the target's alignment.
std::string unmet_requirements(const DeviceInfo& device, const Requirements& requirements,
                               BufferViews views = BufferViews::kSvmWhereOffered);

// Picks a device. `spec` is "" (use STOWAGE_DEVICE if set, else the first device
// that meets `requirements`, preferring GPUs), "opencl:N", "gpu", "cpu", or a
// case-insensitive substring of the device or platform name.
Expected<DeviceInfo> select_device(std::string_view spec, const Requirements& requirements,
                                   BufferViews views = BufferViews::kSvmWhereOffered);

// Bytes moved between the host and the device through one context, counted by
// whoever enqueues the transfer: the VM (argument uploads, constants, copies) and
// tensors read back to the host. Tests assert on them ("no host copy").
struct TransferCounters {
  std::atomic<uint64_t> host_to_device{0};
  std::atomic<uint64_t> host_to_device_bytes{0};
  std::atomic<uint64_t> device_to_host{0};
  std::atomic<uint64_t> device_to_host_bytes{0};

  void note_upload(uint64_t bytes) {
    host_to_device.fetch_add(1, std::memory_order_relaxed);
    host_to_device_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  void note_download(uint64_t bytes) {
    device_to_host.fetch_add(1, std::memory_order_relaxed);
    device_to_host_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  void reset() {
    host_to_device = 0;
    host_to_device_bytes = 0;
    device_to_host = 0;
    device_to_host_bytes = 0;
  }
};

// A context and an in-order queue on one device. With `profiling_queue`, the queue
// records when each command ran on the device (CL_QUEUE_PROFILING_ENABLE).
class Context {
 public:
  static Expected<std::shared_ptr<Context>> create(const DeviceInfo& device, bool profiling_queue = false);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }
  cl_device_id device() const { return device_; }
  const DeviceInfo& info() const { return info_; }
  TransferCounters& transfers() const { return transfers_; }

 private:
  Context() = default;
  mutable TransferCounters transfers_;
  DeviceInfo info_;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
};

// Owns one reference to a cl_mem.
class MemHandle {
 public:
  MemHandle() = default;
  explicit MemHandle(cl_mem mem) : mem_(mem) {}  // adopts the reference
  ~MemHandle() { reset(); }
  MemHandle(const MemHandle& other) : mem_(other.mem_) {
    if (mem_) clRetainMemObject(mem_);
  }
  MemHandle& operator=(const MemHandle& other) {
    if (this != &other) {
      if (other.mem_) clRetainMemObject(other.mem_);
      reset();
      mem_ = other.mem_;
    }
    return *this;
  }
  MemHandle(MemHandle&& other) noexcept : mem_(other.mem_) { other.mem_ = nullptr; }
  MemHandle& operator=(MemHandle&& other) noexcept {
    if (this != &other) {
      reset();
      mem_ = other.mem_;
      other.mem_ = nullptr;
    }
    return *this;
  }
  void reset() {
    if (mem_) clReleaseMemObject(mem_);
    mem_ = nullptr;
  }
  cl_mem get() const { return mem_; }
  explicit operator bool() const { return mem_ != nullptr; }

 private:
  cl_mem mem_ = nullptr;
};

}  // namespace stowage::opencl
