// call_kernel: one cl_kernel per call site, arguments set only when they change,
// sizes decoded once, so the VM's cost per launch stays a few branches.
#include <fmt/format.h>

#include <cstring>

#include "stowage/bytecode/format.h"
#include "vm_impl.h"

namespace stowage::vm {
namespace {

// The bytes of a scalar argument as the kernel's parameter type wants them.
size_t scalar_bytes(const KernelParam& param, const Value& v, uint64_t& bits) {
  bits = 0;
  size_t size = dtype_bytes(param.dtype);
  if (dtype_is_float(param.dtype)) {
    double d = v.kind == Value::Kind::kFloat ? v.float_value : static_cast<double>(v.int_value);
    if (param.dtype == DType::kFloat32) {
      float f = static_cast<float>(d);
      std::memcpy(&bits, &f, sizeof(f));
    } else if (param.dtype == DType::kFloat64) {
      std::memcpy(&bits, &d, sizeof(d));
    } else {
      throw_runtime("float16 scalar arguments are not supported");
    }
  } else {
    if (v.kind != Value::Kind::kInt) throw_runtime(fmt::format("a float cannot be passed to integer parameter '{}'", param.name));
    std::memcpy(&bits, &v.int_value, size);  // little-endian: the low bytes
  }
  return size;
}

// Sets argument `i` only when it changed. A parameter's kind is fixed by the
// signature, so buffers and images compare `mem` and scalars `scalar_bits`. A
// handle's value alone does not identify a buffer (a released cl_mem's address is
// reused by the next one made), so a buffer argument also names the storage that
// owns `mem` and is set again once that storage is gone.
bool same_owner(const BoundArg& bound, const std::shared_ptr<StorageObject>& owner) {
  return !bound.owner.expired() && !bound.owner.owner_before(owner) && !owner.owner_before(bound.owner);
}

void set_mem_arg(SiteState& site, const KernelParam& param, size_t i, cl_mem mem,
                 const std::shared_ptr<StorageObject>& owner) {
  BoundArg& bound = site.bound[i];
  if (bound.set && bound.svm == nullptr && bound.mem == mem && same_owner(bound, owner)) return;
  cl_int status = clSetKernelArg(site.kernel, static_cast<cl_uint>(i), sizeof(cl_mem), &mem);
  if (status != CL_SUCCESS) throw_cl(status, fmt::format("clSetKernelArg({}, '{}')", i, param.name));
  bound.set = true;
  bound.mem = mem;
  bound.svm = nullptr;
  bound.owner = owner;
  bound.null = false;
}

// A null pointer as buffer argument `i` (kNullRegister: the launch leaves it unread).
// NVIDIA's driver costs a launch about 1 us for each SVM pointer it is given, and
// nothing for a null one (docs/vm_overhead.md).
void set_null_arg(SiteState& site, const KernelParam& param, size_t i) {
  BoundArg& bound = site.bound[i];
  if (bound.set && bound.null) return;
  cl_int status = clSetKernelArg(site.kernel, static_cast<cl_uint>(i), sizeof(cl_mem), nullptr);
  if (status != CL_SUCCESS) throw_cl(status, fmt::format("clSetKernelArg({}, '{}', null)", i, param.name));
  bound = BoundArg{};
  bound.set = true;
  bound.null = true;
}

// A tensor's bytes from `offset` of `storage` as buffer argument `i`: a pointer
// into an SVM storage, else `view` (its sub-buffer) or, without one, the storage.
void set_buffer_arg(SiteState& site, const KernelParam& param, size_t i,
                    const std::shared_ptr<StorageObject>& storage, uint64_t offset, cl_mem view) {
  if (storage->svm_pointer() == nullptr) {
    set_mem_arg(site, param, i, view != nullptr ? view : storage->mem(), storage);
    return;
  }
  const void* pointer = static_cast<const std::byte*>(storage->svm_pointer()) + offset;
  BoundArg& bound = site.bound[i];
  if (bound.set && bound.svm == pointer && same_owner(bound, storage)) return;
  cl_int status = clSetKernelArgSVMPointer(site.kernel, static_cast<cl_uint>(i), pointer);
  if (status != CL_SUCCESS) throw_cl(status, fmt::format("clSetKernelArgSVMPointer({}, '{}')", i, param.name));
  bound.set = true;
  bound.mem = nullptr;
  bound.svm = pointer;
  bound.owner = storage;
  bound.null = false;
}

void set_scalar_arg(SiteState& site, const KernelParam& param, size_t i, size_t size, uint64_t bits) {
  BoundArg& bound = site.bound[i];
  if (bound.set && bound.scalar_bits == bits) return;
  cl_int status = clSetKernelArg(site.kernel, static_cast<cl_uint>(i), size, &bits);  // little-endian: low bytes
  if (status != CL_SUCCESS) throw_cl(status, fmt::format("clSetKernelArg({}, '{}')", i, param.name));
  bound.set = true;
  bound.scalar_bits = bits;
}

// A discontiguous tensor fills three parameters from `first`: its tables, the byte
// offset of its root table, its data. Its register repeats in all three list slots,
// from `slot` on.
void bind_discontiguous(SiteState& site, const KernelSignature& sig, const Instruction& ins, size_t first,
                        size_t slot, const TensorObject& t) {
  DType entry = t.table_entry_bytes == 8 ? DType::kUInt64 : DType::kUInt32;
  auto fail = [&](std::string_view what) {
    throw_runtime(fmt::format("kernel '{}' argument {}: a discontiguous tensor {}", sig.name, first, what));
  };
  if (first + 2 >= sig.params.size() || slot + 2 >= ins.list.size() || ins.list[slot + 1] != ins.list[slot] ||
      ins.list[slot + 2] != ins.list[slot]) {
    fail("fills three consecutive parameters (tables, root offset, data) with the same register");
  }
  const KernelParam& tables = sig.params[first];
  const KernelParam& root = sig.params[first + 1];
  const KernelParam& data = sig.params[first + 2];
  if (!tables.is_buffer() || tables.dtype != entry || tables.lanes != 1) {
    fail(fmt::format("needs its first parameter '{}' to be a buffer of {}", tables.name, dtype_name(entry)));
  }
  if (root.kind != KernelParamKind::kScalar || root.dtype != entry || root.lanes != 1) {
    fail(fmt::format("needs its second parameter '{}' to be a scalar {}", root.name, dtype_name(entry)));
  }
  if (!data.is_buffer() || data.dtype != t.dtype || data.lanes != 1) {
    fail(fmt::format("needs its third parameter '{}' to be a buffer of {}", data.name, dtype_name(t.dtype)));
  }
  set_mem_arg(site, tables, first, t.tables->mem(), t.tables);
  set_scalar_arg(site, root, first + 1, t.table_entry_bytes, t.table_root);
  set_buffer_arg(site, data, first + 2, t.storage, 0, nullptr);
}

// Image parameter `i` bound to `t`: its offset parameter, if it has one, receives the
// tensor's top-left pixel as (int2)(x, y); without one, the kernel works from the
// image's origin, so only a tensor there can be bound.
void bind_image_offset(SiteState& site, const KernelSignature& sig, size_t i, const TensorObject& t) {
  if (!has_image_offset(sig, i)) {
    if (t.image_offset == ImageOffset{}) return;
    throw_runtime(fmt::format("kernel '{}' parameter {} '{}' has no image offset parameter after it, so it takes only "
                              "tensors at [0, 0]; the tensor ({}) is at [{}, {}] of its image",
                              sig.name, i, sig.params[i].name, fmt::join(t.shape, ", "), t.image_offset.y,
                              t.image_offset.x));
  }
  // x and y are below 2^31 (alloc_tensor checks them): int2 holds them. Little-endian: x first.
  const uint64_t bits = (t.image_offset.y << 32) | t.image_offset.x;
  set_scalar_arg(site, sig.params[i + 1], i + 1, 2 * sizeof(int32_t), bits);
}

// OpenCL images are either read or written within one kernel: no image storage is
// bound to both a read_only and a write_only parameter of one launch.
void check_image_aliasing(const KernelSignature& sig, const Instruction& ins, const std::vector<Value>& regs) {
  size_t slot = 0;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    if (sig.params[i].is_image_offset()) continue;
    const uint32_t reg = ins.list[slot++];
    if (!sig.params[i].is_image() || reg == kNullRegister) continue;
    const Value& v = regs[reg];
    if (v.kind != Value::Kind::kTensor || !v.tensor->in_image()) continue;
    const StorageObject* storage = v.tensor->storage.get();
    for (size_t j = i + 1, other = slot; j < sig.params.size(); ++j) {
      if (sig.params[j].is_image_offset()) continue;
      const uint32_t other_reg = ins.list[other++];
      if (!sig.params[j].is_image() || sig.params[j].writes() == sig.params[i].writes()) continue;
      if (other_reg == kNullRegister) continue;
      const Value& w = regs[other_reg];
      if (w.kind != Value::Kind::kTensor || w.tensor->storage.get() != storage) continue;
      throw_runtime(fmt::format("kernel '{}' parameters {} '{}' and {} '{}': one image storage is bound to a {} and a "
                                "{} parameter; one kernel cannot read and write the same image",
                                sig.name, i, sig.params[i].name, j, sig.params[j].name,
                                kernel_param_kind_name(sig.params[i].kind),
                                kernel_param_kind_name(sig.params[j].kind)));
    }
  }
}

std::string sizes_text(const std::array<size_t, 3>& sizes, cl_uint dims) {
  return fmt::format("[{}]", fmt::join(sizes.begin(), sizes.begin() + dims, ", "));
}

// The launch's sizes against the limits of the format and of the device, so that
// the driver never sees a size it would wrap or refuse with a bare status.
void check_launch_size(const opencl::Context& context, const KernelSignature& sig, const SiteState& site,
                       cl_kernel kernel) {
  const opencl::DeviceInfo& device = context.info();
  std::string grid = sizes_text(site.global, site.dims);
  uint64_t items = 1;
  for (cl_uint d = 0; d < site.dims; ++d) {
    std::optional<uint64_t> product = checked_mul(items, uint64_t{site.global[d]});
    if (!product || *product > bytecode::kMaxLaunchWorkItems) {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("kernel '{}': grid {} has more than {} (2^40) work items", sig.name, grid,
                                     bytecode::kMaxLaunchWorkItems));
    }
    items = *product;
  }
  if (device.address_bits > 0 && device.address_bits < 64 && items > (uint64_t{1} << device.address_bits) - 1) {
    throw StowageError(ErrorKind::kUnsupported,
                       fmt::format("kernel '{}': grid {} has {} work items, more than the {}-bit device counts",
                                   sig.name, grid, items, device.address_bits));
  }
  if (!site.has_local) return;
  std::string local = sizes_text(site.local, site.dims);
  uint64_t group = 1;
  for (cl_uint d = 0; d < site.dims; ++d) {
    group *= site.local[d];  // at most the grid's count, which fits
    if (d < device.max_work_item_sizes.size() && site.local[d] > device.max_work_item_sizes[d]) {
      throw StowageError(ErrorKind::kUnsupported,
                         fmt::format("kernel '{}': local size {} exceeds the device's {} in dimension {} "
                                     "(CL_DEVICE_MAX_WORK_ITEM_SIZES)",
                                     sig.name, local, device.max_work_item_sizes[d], d));
    }
  }
  uint64_t max_group = device.max_work_group_size;
  size_t kernel_max = 0;
  if (clGetKernelWorkGroupInfo(kernel, context.device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof(kernel_max), &kernel_max,
                               nullptr) == CL_SUCCESS &&
      kernel_max > 0 && (max_group == 0 || kernel_max < max_group)) {
    max_group = kernel_max;
  }
  if (max_group > 0 && group > max_group) {
    throw StowageError(ErrorKind::kUnsupported,
                       fmt::format("kernel '{}': local size {} makes work groups of {} items, the device runs this "
                                   "kernel in groups of at most {} (CL_KERNEL_WORK_GROUP_SIZE)",
                                   sig.name, local, group, max_group));
  }
}

}  // namespace

void VirtualMachine::Impl::call_kernel(SiteState& site, const Instruction& ins, std::vector<Value>& regs) {
  using O = operands::CallKernel;
  const uint32_t kernel_index = static_cast<uint32_t>(ins.ops[O::kKernel]);
  const KernelSignature& sig = exe->kernels[kernel_index];
  if (site.kernel == nullptr) {
    cl_int status = CL_SUCCESS;
    cl_kernel kernel = clCreateKernel(unit_programs[sig.unit], sig.name.c_str(), &status);
    if (status != CL_SUCCESS) throw_cl(status, fmt::format("clCreateKernel('{}')", sig.name));
    // The site keeps the kernel only once every check passed, so a launch that was
    // refused is checked again, not run, when the instruction executes again.
    try {
      const std::vector<int64_t>& global = exe->constants[ins.ops[O::kGlobal]].shape;
      site.dims = static_cast<cl_uint>(global.size());
      for (size_t i = 0; i < global.size(); ++i) site.global[i] = static_cast<size_t>(global[i]);
      site.has_local = ins.ops[O::kLocal] != kNoConstant;
      if (site.has_local) {
        const std::vector<int64_t>& local = exe->constants[ins.ops[O::kLocal]].shape;
        for (size_t i = 0; i < local.size(); ++i) site.local[i] = static_cast<size_t>(local[i]);
      }
      check_launch_size(*context, sig, site, kernel);
      if (!kernel_checked[kernel_index]) {
        check_kernel_arg_info(kernel_index, kernel);
        kernel_checked[kernel_index] = true;
      }
    } catch (...) {
      clReleaseKernel(kernel);
      throw;
    }
    site.kernel = kernel;
    site.bound.assign(sig.params.size(), BoundArg{});
  }
  // `slot` walks the register list, which has no entry for image offset parameters:
  // those are set with the image before them.
  bool binds_images = false;
  for (size_t i = 0, slot = 0; i < sig.params.size(); ++i) {
    const KernelParam& param = sig.params[i];
    if (param.is_image_offset()) continue;
    if (ins.list[slot] == kNullRegister) {
      // The validator lets a null register stand only for a buffer parameter.
      if (!param.is_buffer()) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': null is only for a buffer parameter", sig.name, i,
                                  param.name));
      }
      set_null_arg(site, param, i);
      ++slot;
      continue;
    }
    const Value& v = regs[ins.list[slot]];
    if (v.kind == Value::Kind::kTensor && v.tensor->is_discontiguous()) {
      bind_discontiguous(site, sig, ins, i, slot, *v.tensor);
      i += 2;
      slot += 3;
      continue;
    }
    ++slot;
    if (param.is_buffer()) {
      if (v.kind != Value::Kind::kTensor) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': needs a Tensor, register holds {}", sig.name, i,
                                  param.name, v.kind_name()));
      }
      const TensorObject& t = *v.tensor;
      if (t.in_image()) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': a tensor in an image cannot be a buffer argument",
                                  sig.name, i, param.name));
      }
      if (t.on_host()) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': a host tensor cannot be a kernel argument; "
                                  "copy it into device storage with copy_tensor",
                                  sig.name, i, param.name));
      }
      if (t.dtype != param.dtype) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': expects {} elements, the tensor holds {}", sig.name, i,
                                  param.name, dtype_name(param.dtype), dtype_name(t.dtype)));
      }
      set_buffer_arg(site, param, i, t.storage, t.offset, t.view.get());
    } else if (param.is_image()) {
      if (v.kind != Value::Kind::kTensor || !v.tensor->in_image()) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': needs a tensor in an image storage", sig.name, i,
                                  param.name));
      }
      set_mem_arg(site, param, i, v.tensor->storage->mem(), v.tensor->storage);
      bind_image_offset(site, sig, i, *v.tensor);
      binds_images = true;
    } else if (param.kind == KernelParamKind::kScalar) {
      if (v.kind != Value::Kind::kInt && v.kind != Value::Kind::kFloat) {
        throw_runtime(fmt::format("kernel '{}' argument {} '{}': needs a scalar, register holds {}", sig.name, i,
                                  param.name, v.kind_name()));
      }
      if (param.lanes != 1) throw_runtime(fmt::format("kernel '{}': vector scalar arguments are not supported", sig.name));
      uint64_t bits = 0;
      size_t size = scalar_bytes(param, v, bits);
      set_scalar_arg(site, param, i, size, bits);
    } else {
      throw StowageError(ErrorKind::kUnsupported,
                         fmt::format("kernel '{}' argument {} '{}': {} parameters are not supported by this runtime",
                                     sig.name, i, param.name, kernel_param_kind_name(param.kind)));
    }
  }
  if (binds_images) check_image_aliasing(sig, ins, regs);
  cl_event event = nullptr;
  cl_int status = clEnqueueNDRangeKernel(context->queue(), site.kernel, site.dims, nullptr, site.global.data(),
                                         site.has_local ? site.local.data() : nullptr, 0, nullptr,
                                         kernel_times ? &event : nullptr);
  if (status != CL_SUCCESS) throw_cl(status, fmt::format("clEnqueueNDRangeKernel('{}')", sig.name));
  ++kernel_launches;
  if (event != nullptr) {
    pending_launches.push_back({event, &site});
    // Bounded: a long run reads its events now and then (this waits for the device).
    if (pending_launches.size() >= kMaxPendingLaunches) read_kernel_times();
  }
  if (check_bounds) check_guards(sig.name);
}

void VirtualMachine::Impl::read_kernel_times() {
  if (pending_launches.empty()) return;
  std::vector<cl_event> events;
  events.reserve(pending_launches.size());
  for (const auto& p : pending_launches) events.push_back(p.event);
  cl_int status = clWaitForEvents(static_cast<cl_uint>(events.size()), events.data());
  for (const auto& p : pending_launches) {
    cl_ulong start = 0, end = 0;
    if (status == CL_SUCCESS &&
        clGetEventProfilingInfo(p.event, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr) == CL_SUCCESS &&
        clGetEventProfilingInfo(p.event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr) == CL_SUCCESS &&
        end >= start) {
      SiteState& site = *p.site;
      const double us = static_cast<double>(end - start) / 1000.0;
      site.device_count += 1;
      site.device_us += us;
      device_busy_us += us;
      if (launch_records.size() < VirtualMachine::kMaxRecordedLaunches) {
        launch_records.push_back({site.function, site.index, start, end});
      } else {
        ++launch_records_dropped;
      }
      first_start_ns = std::min<uint64_t>(first_start_ns, start);
      last_end_ns = std::max<uint64_t>(last_end_ns, end);
    }
    clReleaseEvent(p.event);
  }
  pending_launches.clear();
  if (status != CL_SUCCESS) throw_cl(status, "clWaitForEvents (kernel times)");
}

// Compares the signature carried in the executable with what the driver compiled,
// where the driver reports argument information.
void VirtualMachine::Impl::check_kernel_arg_info(uint32_t kernel_index, cl_kernel kernel) {
  const KernelSignature& sig = exe->kernels[kernel_index];
  cl_uint num_args = 0;
  if (clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof(num_args), &num_args, nullptr) == CL_SUCCESS &&
      num_args != sig.params.size()) {
    throw StowageError(ErrorKind::kInvalidInput,
                       fmt::format("kernel '{}': the executable declares {} parameters, the compiled kernel has {}",
                                   sig.name, sig.params.size(), num_args));
  }
  for (cl_uint i = 0; i < num_args && i < sig.params.size(); ++i) {
    cl_kernel_arg_address_qualifier address = 0;
    cl_int status = clGetKernelArgInfo(kernel, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(address), &address, nullptr);
    if (status == CL_KERNEL_ARG_INFO_NOT_AVAILABLE) return;
    if (status != CL_SUCCESS) return;  // some drivers do not report it; the signature still guards launches
    const KernelParam& param = sig.params[i];
    cl_kernel_arg_address_qualifier expected = CL_KERNEL_ARG_ADDRESS_PRIVATE;
    switch (param.kind) {
      case KernelParamKind::kGlobalBuffer: expected = CL_KERNEL_ARG_ADDRESS_GLOBAL; break;
      case KernelParamKind::kConstantBuffer: expected = CL_KERNEL_ARG_ADDRESS_CONSTANT; break;
      case KernelParamKind::kLocal: expected = CL_KERNEL_ARG_ADDRESS_LOCAL; break;
      case KernelParamKind::kImage2dRead:
      case KernelParamKind::kImage2dWrite: continue;  // drivers differ on images' address space
      case KernelParamKind::kScalar:
      case KernelParamKind::kImageOffset: expected = CL_KERNEL_ARG_ADDRESS_PRIVATE; break;
    }
    if (address != expected) {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("kernel '{}' parameter {} '{}': the executable declares a {}, the compiled kernel "
                                     "disagrees (address qualifier 0x{:x})",
                                     sig.name, i, param.name, kernel_param_kind_name(param.kind), address));
    }
  }
}

}  // namespace stowage::vm
