// The VM's private state: per-call-site caches, frames, and the instruction
// handlers (vm.cc dispatches; vm_memory.cc and vm_kernels.cc hold the handlers).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stowage/backend/program_cache.h"
#include "stowage/vm/vm.h"

namespace stowage::vm {

// The last value bound to one kernel argument, so unchanged arguments are not set again.
struct BoundArg {
  bool set = false;
  cl_mem mem = nullptr;
  const void* svm = nullptr;  // set as an SVM pointer instead of `mem`
  std::weak_ptr<StorageObject> owner;  // buffers and images: who keeps `mem` alive
  uint64_t scalar_bits = 0;
  bool null = false;  // a buffer parameter given a null pointer (kNullRegister)
};

// What one instruction keeps between executions.
struct SiteState {
  // alloc_storage: the storage made here, reused once nothing else holds it.
  std::shared_ptr<StorageObject> storage;
  // alloc_discontiguous_tensor: the tables' bytes (constant, so writes of them can
  // stay in flight), the runs to write, the block offsets and the furthest ends.
  std::shared_ptr<const std::vector<uint64_t>> block_offsets;
  std::vector<std::byte> table_bytes;
  std::vector<std::pair<uint64_t, uint64_t>> table_runs;  // (offset in storage, bytes), back to back in table_bytes
  uint64_t tables_end = 0;
  uint64_t blocks_end = 0;
  // call_kernel: this site's kernel object, its bound arguments, its sizes.
  cl_kernel kernel = nullptr;
  std::vector<BoundArg> bound;
  cl_uint dims = 0;
  std::array<size_t, 3> global{};
  std::array<size_t, 3> local{};
  bool has_local = false;
  // Where it is: for launch records.
  uint32_t function = 0;
  uint32_t index = 0;
  // Profiling.
  uint64_t count = 0;
  double total_us = 0;
  uint64_t device_count = 0;  // kernel_times
  double device_us = 0;
};

// check_bounds: bytes past each buffer storage's end, and what they hold.
inline constexpr uint64_t kGuardBytes = 4096;
inline constexpr uint32_t kGuardPattern = 0xA5C3E1F7u;
// kernel_times: events held before they are read (each read waits for the device).
inline constexpr size_t kMaxPendingLaunches = 65536;

// A function's register file, kept between invocations. The registers that hold
// the same constant in every invocation are loaded once, when the VM is made, and
// their instructions skipped: a network's launches take some twenty constant
// scalars and weights each, which an invocation would otherwise load again (1,500
// loads in EfficientNet-B0's). Such a register is written once, by load_const or
// load_tensor_constant, and never killed or returned (ret moves its value out).
struct Frame {
  std::vector<Value> regs;
  std::vector<bool> preloaded;      // per instruction: its value is in regs already
  std::vector<uint32_t> transient;  // the other registers, emptied after each invocation
  bool active = false;              // a recursive call takes a fresh register file
};

struct VirtualMachine::Impl {
  // Held by every public call that reads or changes the state below: invokes from
  // several threads run one at a time (kernel objects, bound arguments and cached
  // storages are per VM, and clSetKernelArg is not thread-safe on one kernel).
  std::mutex mutex;
  std::shared_ptr<const Executable> exe;
  std::shared_ptr<opencl::Context> context;
  std::unique_ptr<opencl::ProgramCache> programs;
  std::vector<cl_program> unit_programs;           // by unit index
  std::vector<std::vector<SiteState>> sites;       // [function][instruction]
  std::vector<std::shared_ptr<ScopeCounter>> scope_usage;  // by requirement index
  std::map<std::string, size_t, std::less<>> scope_index;
  std::vector<bool> kernel_checked;                // clGetKernelArgInfo compared, per kernel
  // invoke: per function and parameter, the buffer a host argument was last
  // uploaded into, reused once nothing else holds it.
  std::vector<std::vector<std::shared_ptr<StorageObject>>> argument_storage;
  // Where uploaded arguments count their bytes: the requirements' "global" scope,
  // or an entry of its own when the program allocates nothing there.
  std::shared_ptr<ScopeCounter> argument_usage;
  // The executable's tensor constants on this device, made and filled at creation.
  std::vector<std::shared_ptr<StorageObject>> constant_storages;
  std::vector<std::shared_ptr<TensorObject>> constants;
  uint64_t constant_bytes = 0;
  bool profiling = false;
  bool check_bounds = false;
  bool use_svm = false;  // VmOptions::svm where the device has coarse-grained buffer SVM
  uint64_t svm_allocations = 0;
  // kernel_times: launches whose profiling events are not read yet, and what was read.
  struct PendingLaunch {
    cl_event event;
    SiteState* site;  // sites are sized once, at creation
  };
  bool kernel_times = false;
  std::vector<PendingLaunch> pending_launches;
  uint64_t first_start_ns = UINT64_MAX;
  uint64_t last_end_ns = 0;
  double device_busy_us = 0;
  std::vector<LaunchRecord> launch_records;  // kernel_times, bounded by kMaxRecordedLaunches
  uint64_t launch_records_dropped = 0;
  // check_bounds: the buffer storages made with a guard zone, and where.
  struct Guarded {
    std::weak_ptr<StorageObject> storage;
    std::string made_at;
  };
  std::vector<Guarded> guarded;
  uint64_t device_allocations = 0;
  uint64_t device_bytes_allocated = 0;
  uint64_t sub_buffers_created = 0;
  uint64_t kernel_launches = 0;
  uint32_t depth = 0;
  // By function; last, so that its constant registers go before the rest.
  std::vector<Frame> frames;

  ~Impl();
  Value run(uint32_t function, std::vector<Value>& args);
  // The device tensor parameter `index` of `function` receives for `arg`.
  Value device_argument(uint32_t function, size_t index, const Value& arg);
  // Makes the constant storages, enqueues their bytes and makes each constant's view.
  void upload_constants();
  // Finds each function's constant registers and loads them into its frame.
  void plan_frames();
  std::shared_ptr<StorageObject> upload_constant_storage(const ConstantStorage& storage);
  // A buffer storage of `nbytes` (`allocated` with a guard zone) in `usage`'s scope:
  // in SVM where the VM uses it, so that kernels take pointers to its tensors at
  // any offset, else a plain buffer whose tensors are sub-buffers.
  std::shared_ptr<StorageObject> new_storage_buffer(const std::shared_ptr<ScopeCounter>& usage, uint64_t nbytes,
                                                    uint64_t allocated);
  // A tensor filling `storage` from offset 0, with the shape and dtype of `like`.
  std::shared_ptr<TensorObject> whole_buffer_tensor(const std::shared_ptr<StorageObject>& storage,
                                                    const TensorObject& like);
  // Copies `src` (host or device) into the buffer tensor `dst` and waits for it.
  void copy_into_buffer(const TensorObject& src, const TensorObject& dst);
  void execute(uint32_t function, uint32_t pc, const Instruction& ins, std::vector<Value>& regs, Value& result,
               bool& returned);

  // Handlers; each throws StowageError with a message that the dispatcher prefixes
  // with the function and instruction.
  void alloc_storage(SiteState& site, const Instruction& ins, std::vector<Value>& regs);
  void alloc_tensor(SiteState& site, const Instruction& ins, std::vector<Value>& regs);
  void alloc_image(SiteState& site, const Instruction& ins, std::vector<Value>& regs, size_t scope_index);
  void alloc_image_tensor(const std::shared_ptr<StorageObject>& storage, const std::vector<int64_t>& shape,
                          DType dtype, std::optional<uint64_t> nbytes, uint64_t offset, const Instruction& ins,
                          std::vector<Value>& regs);
  void alloc_discontiguous(SiteState& site, const Instruction& ins, std::vector<Value>& regs);
  void view(SiteState& site, const Instruction& ins, std::vector<Value>& regs);
  void view_image(const Instruction& ins, const TensorObject& base, std::vector<Value>& regs);
  SvmAllocation svm_buffer(uint64_t nbytes);
  opencl::MemHandle buffer_range(StorageObject& storage, uint64_t offset, uint64_t nbytes);
  void copy_tensor(const Instruction& ins, std::vector<Value>& regs);
  void copy_discontiguous(const TensorObject& src, const TensorObject& dst);
  void copy_with_image(const TensorObject& src, const TensorObject& dst);
  void call_kernel(SiteState& site, const Instruction& ins, std::vector<Value>& regs);
  // check_bounds: the guard zone of every live guarded storage is intact.
  void check_guards(const std::string& kernel);
  void check_kernel_arg_info(uint32_t kernel_index, cl_kernel kernel);
  // kernel_times: waits for the pending launches and adds their device times to their sites.
  void read_kernel_times();
};

[[noreturn]] void throw_runtime(const std::string& message);
[[noreturn]] void throw_cl(cl_int status, std::string_view call);

}  // namespace stowage::vm
