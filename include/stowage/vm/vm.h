// The Stowage virtual machine: runs a validated Executable on one OpenCL device.
//
//   auto exe = stowage::read_bytecode_file("add.stw");          // validates everything
//   auto vm = stowage::vm::VirtualMachine::create(shared_exe, {.device = "opencl:0"});
//   stowage::vm::Value out = (*vm)->invoke("main", {x, y, z});  // DLPack tensors in,
//   DLManagedTensor* host = out.as_tensor().to_dlpack();        // a host copy out
//
// A function that returns several values (`return (a, b)` in the IR; its result's
// ValueDesc has kind kTuple and one tensor field each) gives a Value of kind kTuple:
//
//   stowage::vm::Value outs = (*vm)->invoke("main", {x});
//   for (const stowage::vm::Value& field : outs.fields) use(field.as_tensor());
//
// Tensors live on the device. A host tensor passed to invoke is uploaded once into
// a buffer of its own for that parameter (reused by the next invoke once nothing
// holds it); a device tensor of this VM is passed as it is. Results are device
// tensors that own their storage: they stay valid and unchanged after later
// invokes, can be passed to another invoke with no copy, and are copied to the
// host only when read (Tensor::copy_to_host, to_dlpack).
//
// One Executable may be shared by many VMs on many threads. One VM may also be
// invoked from several threads at once (as one inference session is): its public
// calls are serialised, each invoke running whole before the next starts, and a
// result may be read or dropped on any thread. For invokes that overlap, make one VM
// per thread over the shared Executable. Work is enqueued on an in-order queue and synchronised when a
// result is read. Storage allocated by an `alloc_storage` instruction is kept by
// that call site and reused by the next execution once nothing else refers to it,
// so invoking a function again makes no new device allocation.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/backend/opencl.h"
#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"
#include "stowage/vm/value.h"

namespace stowage::vm {

struct VmOptions {
  std::string device;    // see opencl::select_device; "" = default
  bool profile = false;  // time every instruction (waits for the device after each)
  // Record each kernel launch's run on the device (OpenCL profiling events), without
  // waiting between instructions: what the device spends per kernel, and how long it
  // sits idle between launches.
  bool kernel_times = false;
  // Give every buffer storage the function allocates a guard zone past its end,
  // filled with a pattern, and check the zones after each kernel: a kernel that
  // writes past its storage is an error naming it. Slow (waits for the device
  // after each kernel); for finding kernels that index wrongly.
  bool check_bounds = false;
  // Where the device offers coarse-grained buffer SVM (OpenCL 2.0+), buffer storages
  // are SVM allocations and a kernel takes a pointer to its tensor's first byte
  // instead of a sub-buffer. NVIDIA's OpenCL makes every launch that uses a
  // sub-buffer overlapping another one wait for the device, and planned storages
  // are made of overlapping tensors (docs/vm_overhead.md). Off: sub-buffers always.
  bool svm = true;
};

struct InstructionProfile {
  std::string function;
  uint32_t index = 0;
  Opcode op = Opcode::kRet;
  std::string detail;  // e.g. the kernel's name
  std::vector<NodeOrigin> nodes;  // the model nodes it computes, where the executable carries them
  uint64_t count = 0;
  double total_us = 0;
  // kernel_times: launches whose device times were read, and their time on the device.
  uint64_t device_count = 0;
  double device_us = 0;
};

struct Profile {
  std::vector<InstructionProfile> instructions;  // filled when profiling
  uint64_t device_allocations = 0;      // clCreateBuffer / clCreateImage calls
  uint64_t device_bytes_allocated = 0;
  uint64_t sub_buffers_created = 0;     // tensor views
  uint64_t svm_allocations = 0;         // of device_allocations, those in shared virtual memory
  uint64_t kernel_launches = 0;
  uint64_t programs_built = 0;          // compiled from source
  uint64_t programs_loaded = 0;         // loaded from the on-disk cache
  // Transfers between the host and this VM's device (each a write or read command),
  // and their bytes: argument uploads, constants, host copies of tensors.
  uint64_t host_to_device = 0;
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host = 0;
  uint64_t device_to_host_bytes = 0;
  uint64_t constant_bytes = 0;          // the tensor constants' storages, made once per VM
  std::vector<ScopeUsage> scopes;       // bytes per scope: in use now and peak
  // kernel_times: the device's time in kernels, and the time from the first kernel's
  // start to the last one's end (busy plus idle between launches).
  double device_busy_us = 0;
  double device_span_us = 0;
};

// kernel_times: one kernel launch's run on the device, as the OpenCL profiling
// events give it (the device's clock, in nanoseconds).
struct LaunchRecord {
  uint32_t function = 0;  // index into the executable's functions
  uint32_t index = 0;     // the call_kernel instruction
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

class VirtualMachine {
 public:
  // Picks the device, checks the executable's requirements against it (naming what
  // is missing) and builds its kernel programs.
  static Expected<std::unique_ptr<VirtualMachine>> create(std::shared_ptr<const Executable> executable,
                                                          const VmOptions& options = {});
  ~VirtualMachine();
  VirtualMachine(const VirtualMachine&) = delete;
  VirtualMachine& operator=(const VirtualMachine&) = delete;

  // Runs `function` to completion of its enqueueing and returns its result: a
  // tensor (or scalar), or for a tuple result a kTuple Value whose fields are the
  // tensors in order. Throws StowageError naming the function, instruction and
  // OpenCL status on failure.
  Value invoke(std::string_view function, std::vector<Value> args);

  // A device tensor holding a copy of `host` (a host tensor, e.g. from
  // tensor_from_dlpack), in a buffer of its own; a device tensor of this VM is
  // returned as it is. Waits until the copy is done, so `host` may change after.
  Tensor upload(const Tensor& host);

  Profile profile() const;
  // kernel_times: every launch since creation or reset_profile, in launch order (at
  // most kMaxRecordedLaunches; `dropped` counts those past it). For traces.
  std::vector<LaunchRecord> launches(uint64_t* dropped = nullptr) const;
  static constexpr size_t kMaxRecordedLaunches = size_t{1} << 20;
  void reset_profile();
  void set_profiling(bool on);
  const opencl::DeviceInfo& device() const;
  const Executable& executable() const;
  // Waits for all enqueued work.
  void synchronize();

 private:
  struct Impl;
  explicit VirtualMachine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stowage::vm
