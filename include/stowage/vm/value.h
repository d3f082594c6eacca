// The objects a VM register holds, and the values that cross the embedding API.
//
// Storage and tensors are reference counted (std::shared_ptr): a tensor keeps its
// storage alive, `kill` drops a register's reference at once, and a result handed
// to the caller keeps its storage alive for as long as the caller holds it.
#pragma once

#include <dlpack/dlpack.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "stowage/backend/opencl.h"
#include "stowage/support/dtype.h"
#include "stowage/bytecode/executable.h"

namespace stowage::vm {

// Bytes of one memory scope: a snapshot, as VirtualMachine::profile reports it.
struct ScopeUsage {
  std::string scope;
  bool onchip = false;
  bool emulated = false;     // on-chip memory emulated by a buffer with capacity enforced
  uint64_t capacity = 0;     // 0 = unlimited
  uint64_t in_use = 0;
  uint64_t peak = 0;
  uint64_t allocations = 0;  // device allocations made in this scope
};

// The live bytes of one memory scope, shared by the storages of that scope so that
// a storage's destruction returns its bytes (on-chip capacity is enforced with it).
// A storage may be destroyed on any thread (a caller dropping a result while another
// thread invokes the VM), so the counts are atomic.
struct ScopeCounter {
  std::string scope;
  bool onchip = false;
  bool emulated = false;
  uint64_t capacity = 0;  // 0 = unlimited
  std::atomic<uint64_t> in_use{0};
  std::atomic<uint64_t> peak{0};
  std::atomic<uint64_t> allocations{0};

  void add(uint64_t nbytes) {
    const uint64_t now = in_use.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    uint64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void release(uint64_t nbytes) { in_use.fetch_sub(nbytes, std::memory_order_relaxed); }
  // Starts a new peak from what is in use now, and counts allocations from 0.
  void restart() {
    allocations.store(0, std::memory_order_relaxed);
    peak.store(in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  ScopeUsage snapshot() const {
    return ScopeUsage{scope, onchip, emulated, capacity, in_use.load(std::memory_order_relaxed),
                      peak.load(std::memory_order_relaxed), allocations.load(std::memory_order_relaxed)};
  }
};

// A buffer's bytes in coarse-grained shared virtual memory: `pointer` came from
// clSVMAlloc on `context`, and the storage's cl_mem uses it (CL_MEM_USE_HOST_PTR).
struct SvmAllocation {
  void* pointer = nullptr;
  std::shared_ptr<opencl::Context> context;
};

class StorageObject {
 public:
  // A buffer of `nbytes`, or (with `image` set) an RGBA image2d of `image` pixels
  // whose bytes count as `nbytes`. With `svm`, a buffer whose bytes are that SVM
  // allocation: kernels take pointers into it, and it is freed after the commands
  // queued before the storage goes.
  StorageObject(std::shared_ptr<ScopeCounter> usage, uint64_t nbytes, opencl::MemHandle mem,
                std::optional<ImageExtent> image = std::nullopt, SvmAllocation svm = {});
  ~StorageObject();
  StorageObject(const StorageObject&) = delete;
  StorageObject& operator=(const StorageObject&) = delete;

  const std::string& scope() const { return usage_->scope; }
  uint64_t nbytes() const { return nbytes_; }
  cl_mem mem() const { return mem_.get(); }
  bool is_image() const { return image_.has_value(); }
  const ImageExtent& image() const { return *image_; }
  // The SVM pointer to byte 0, or null for a storage that is a plain cl_mem.
  void* svm_pointer() const { return svm_.pointer; }

  // Bytes [offset, offset + nbytes) of this buffer as a kernel argument: the buffer
  // itself when that is all of it, else a sub-buffer made on first use and kept
  // here, so that sub-buffers are released before their buffer and newest first
  // (NVIDIA's driver faults otherwise). On failure returns none and sets `status`;
  // `created` says whether a sub-buffer was made. Safe from several threads.
  opencl::MemHandle range(uint64_t offset, uint64_t nbytes, cl_int& status, bool& created);

 private:
  struct SubBuffer {
    uint64_t offset;
    uint64_t nbytes;
    opencl::MemHandle mem;
  };
  std::shared_ptr<ScopeCounter> usage_;
  uint64_t nbytes_;
  opencl::MemHandle mem_;
  std::optional<ImageExtent> image_;
  SvmAllocation svm_;
  std::mutex sub_buffers_mutex_;
  std::vector<SubBuffer> sub_buffers_;  // in order of creation; declared after mem_: released before it
};

// A tensor: either a view into device storage at a byte offset, or host memory
// lent by the caller (inputs).
class TensorObject {
 public:
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  uint64_t nbytes = 0;

  // Device tensors.
  std::shared_ptr<StorageObject> storage;
  uint64_t offset = 0;
  opencl::MemHandle view;  // sub-buffer [offset, offset + nbytes), for kernel arguments; none in SVM
  std::shared_ptr<opencl::Context> context;
  // Tensors in an image storage: the rectangle of pixels they cover, `image_region`
  // pixels from `image_offset` (its top-left pixel).
  ImageExtent image_region;
  ImageOffset image_offset;

  bool in_image() const { return storage != nullptr && storage->is_image(); }
  // A contiguous range of a buffer: what a buffer kernel parameter can take as is.
  bool in_buffer() const { return storage != nullptr && !storage->is_image() && tables == nullptr; }

  // Discontiguous tensors: `storage` holds the blocks, block b at byte
  // (*block_offsets)[b]; `tables` holds the pointer tables, the root at `table_root`.
  std::shared_ptr<StorageObject> tables;
  uint64_t table_root = 0;
  uint32_t table_entry_bytes = 0;
  uint64_t block_bytes = 0;
  std::shared_ptr<const std::vector<uint64_t>> block_offsets;
  bool is_discontiguous() const { return tables != nullptr; }

  // Host tensors: `host_data` stays valid while `host_owner` is alive.
  void* host_data = nullptr;
  std::shared_ptr<void> host_owner;

  bool on_host() const { return storage == nullptr; }
};

// A tensor result or argument as the embedding application sees it: a device
// tensor (a result of invoke, or made by VirtualMachine::upload) shares ownership
// of its device memory, which stays valid after later invokes and after its VM is
// destroyed; a host tensor lends host memory (an argument to invoke).
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorObject> object) : object_(std::move(object)) {}

  const std::vector<int64_t>& shape() const { return object_->shape; }
  DType dtype() const { return object_->dtype; }
  uint64_t nbytes() const { return object_->nbytes; }
  bool on_host() const { return object_->on_host(); }
  // The memory scope of a device tensor ("global", "global.vtcm", ...); "host" otherwise.
  std::string scope() const;

  // The OpenCL device's index ("opencl:N" gives N); -1 for host tensors.
  int device_index() const;

  // Copies the tensor's bytes into `dst` (exactly nbytes()), waiting for the device.
  void copy_to_host(std::span<std::byte> dst) const;
  template <typename T>
  std::vector<T> to_vector() const {
    std::vector<T> out(nbytes() / sizeof(T));
    copy_to_host(std::as_writable_bytes(std::span(out)));
    return out;
  }
  // A host copy as a DLPack tensor (kDLCPU); the caller calls its deleter.
  DLManagedTensor* to_dlpack() const;
  // When a device export may copy: never, only for what is not a range of a buffer
  // (a tensor in an image or made of blocks), or always (DLPack's copy=True).
  enum class DeviceCopy : uint8_t { kNever, kIfNeeded, kAlways };
  // The device tensor as a DLPack tensor (kDLOpenCL, device_index()): `data` is its
  // buffer's cl_mem and `byte_offset` its offset there, or those of a buffer of its
  // own holding a device copy (see DeviceCopy; kNever throws kInvalidInput where a
  // copy is needed). The export shares ownership of the memory until the deleter
  // runs, and waits for the work enqueued before it, so the consumer reads final values.
  DLManagedTensor* to_dlpack_device(DeviceCopy copy) const;

  const std::shared_ptr<TensorObject>& object() const { return object_; }

 private:
  std::shared_ptr<TensorObject> object_;
};

// Wraps host memory described by a DLPack tensor as a host tensor. The DLTensor
// must be on kDLCPU, compact and row-major. `owner` keeps the memory alive.
Expected<Tensor> tensor_from_dlpack(const DLTensor& tensor, std::shared_ptr<void> owner);
// Takes ownership of `managed` (its deleter runs when the tensor is released).
Expected<Tensor> tensor_from_dlpack(DLManagedTensor* managed);
// A host tensor owning a copy of `bytes`.
Tensor host_tensor(std::vector<int64_t> shape, DType dtype, std::span<const std::byte> bytes);

std::optional<DType> dtype_from_dlpack(DLDataType type);
DLDataType dtype_to_dlpack(DType dtype);

// A register's content, and what invoke returns: for a function whose result is a
// tuple (ValueDesc kind kTuple, `return (a, b)` in the IR) a kTuple whose `fields`
// hold one kTensor per field, in order, each owning its storage like a single result.
struct Value {
  enum class Kind : uint8_t { kNone, kInt, kFloat, kShape, kStorage, kTensor, kTuple };
  Kind kind = Kind::kNone;
  int64_t int_value = 0;
  double float_value = 0.0;
  const std::vector<int64_t>* shape = nullptr;  // kShape: points into the executable's constants
  std::shared_ptr<StorageObject> storage;
  std::shared_ptr<TensorObject> tensor;
  std::vector<Value> fields;  // kTuple

  static Value tuple(std::vector<Value> values) {
    Value out;
    out.kind = Kind::kTuple;
    out.fields = std::move(values);
    return out;
  }

  static Value integer(int64_t v) {
    Value out;
    out.kind = Kind::kInt;
    out.int_value = v;
    return out;
  }
  static Value real(double v) {
    Value out;
    out.kind = Kind::kFloat;
    out.float_value = v;
    return out;
  }
  static Value from(const Tensor& t) {
    Value out;
    out.kind = Kind::kTensor;
    out.tensor = t.object();
    return out;
  }
  Tensor as_tensor() const { return Tensor(tensor); }
  const char* kind_name() const;
};

}  // namespace stowage::vm
