// Storage, tensor views and copies.
#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "stowage/bytecode/storage_rules.h"
#include "vm_impl.h"

namespace stowage::vm {
namespace {

const TensorObject& tensor_operand(const std::vector<Value>& regs, uint64_t reg, const char* role) {
  const Value& v = regs[reg];
  if (v.kind != Value::Kind::kTensor) {
    throw_runtime(fmt::format("{} (register {}) holds {}, not a Tensor", role, reg, v.kind_name()));
  }
  return *v.tensor;
}

}  // namespace

void VirtualMachine::Impl::alloc_storage(SiteState& site, const Instruction& ins, std::vector<Value>& regs) {
  using O = operands::AllocStorage;
  const std::vector<int64_t>& size = exe->constants[ins.ops[O::kSize]].shape;
  const std::string& scope = exe->strings[ins.ops[O::kScope]];
  auto found = scope_index.find(scope);
  if (found == scope_index.end()) throw_runtime(fmt::format("scope '{}' is not among the executable's requirements", scope));
  const ScopeRequirement& req = exe->requirements.scopes[found->second];
  if (req.kind == ScopeKind::kImage2d) {
    alloc_image(site, ins, regs, found->second);
    return;
  }
  if (size.size() != 1 || size[0] <= 0) {
    throw_runtime(fmt::format("storage size of a buffer scope must be [nbytes] with nbytes > 0"));
  }
  uint64_t nbytes = static_cast<uint64_t>(size[0]);
  Value out;
  out.kind = Value::Kind::kStorage;
  // Reuse this site's storage when nobody else holds it any more.
  if (site.storage && site.storage.use_count() == 1 && site.storage->nbytes() == nbytes) {
    out.storage = site.storage;
    regs[ins.ops[O::kDst]] = std::move(out);
    return;
  }
  if (site.storage.use_count() == 1) site.storage.reset();  // return its bytes before the capacity check
  ScopeCounter& usage = *scope_usage[found->second];
  auto exceeds = [&] { return usage.capacity != 0 && (nbytes > usage.capacity || usage.in_use > usage.capacity - nbytes); };
  if (exceeds()) {
    // Idle storages cached by other call sites give their bytes back first.
    for (auto& fsites : sites) {
      for (auto& other : fsites) {
        if (other.storage && other.storage.use_count() == 1 && other.storage->scope() == scope) other.storage.reset();
      }
    }
  }
  if (exceeds()) {
    throw_runtime(fmt::format("scope '{}'{}: allocating {} bytes exceeds the capacity of {} bytes ({} in use)", scope,
                              usage.emulated ? " (emulated on-chip)" : "", nbytes, usage.capacity, usage.in_use.load()));
  }
  cl_int status = CL_SUCCESS;
  const uint64_t guard_at = (nbytes + 3) / 4 * 4;
  const uint64_t allocated = check_bounds ? guard_at + kGuardBytes : nbytes;
  site.storage = new_storage_buffer(scope_usage[found->second], nbytes, allocated);
  const cl_mem mem = site.storage->mem();
  if (check_bounds) {
    status = clEnqueueFillBuffer(context->queue(), mem, &kGuardPattern, sizeof kGuardPattern, guard_at, kGuardBytes,
                                 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueFillBuffer (guard zone)");
    guarded.push_back({site.storage, fmt::format("a storage of {} bytes in scope '{}'", nbytes, scope)});
  }
  out.storage = site.storage;
  regs[ins.ops[O::kDst]] = std::move(out);
}

void VirtualMachine::Impl::alloc_image(SiteState& site, const Instruction& ins, std::vector<Value>& regs,
                                       size_t scope_index) {
  using O = operands::AllocStorage;
  const std::vector<int64_t>& size = exe->constants[ins.ops[O::kSize]].shape;
  auto dtype = static_cast<DType>(ins.ops[O::kDType]);
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0) throw_runtime("image storage size must be [height, width] > 0");
  if (Status s = is_image_pixel_type(dtype); !s) throw_runtime(s.error().message());
  ImageExtent extent{static_cast<uint64_t>(size[0]), static_cast<uint64_t>(size[1])};
  uint64_t nbytes = extent.height * extent.width * 4 * dtype_bytes(dtype);
  Value out;
  out.kind = Value::Kind::kStorage;
  if (site.storage && site.storage.use_count() == 1 && site.storage->image().height == extent.height &&
      site.storage->image().width == extent.width && site.storage->nbytes() == nbytes) {
    out.storage = site.storage;
    regs[ins.ops[O::kDst]] = std::move(out);
    return;
  }
  cl_image_format format{CL_RGBA, dtype == DType::kFloat32 ? static_cast<cl_channel_type>(CL_FLOAT)
                                                           : static_cast<cl_channel_type>(CL_HALF_FLOAT)};
  cl_image_desc desc{};
  desc.image_type = CL_MEM_OBJECT_IMAGE2D;
  desc.image_width = extent.width;
  desc.image_height = extent.height;
  cl_int status = CL_SUCCESS;
  cl_mem mem = clCreateImage(context->context(), CL_MEM_READ_WRITE, &format, &desc, nullptr, &status);
  if (status != CL_SUCCESS) throw_cl(status, "clCreateImage");
  ++device_allocations;
  device_bytes_allocated += nbytes;
  ++scope_usage[scope_index]->allocations;
  site.storage = std::make_shared<StorageObject>(scope_usage[scope_index], nbytes, opencl::MemHandle(mem), extent);
  out.storage = site.storage;
  regs[ins.ops[O::kDst]] = std::move(out);
}

void VirtualMachine::Impl::alloc_tensor(SiteState& site, const Instruction& ins, std::vector<Value>& regs) {
  using O = operands::AllocTensor;
  const Value& sv = regs[ins.ops[O::kStorage]];
  if (sv.kind != Value::Kind::kStorage) {
    throw_runtime(fmt::format("register {} holds {}, not a Storage", ins.ops[O::kStorage], sv.kind_name()));
  }
  const std::shared_ptr<StorageObject>& storage = sv.storage;
  uint64_t offset = ins.ops[O::kOffset];
  auto dtype = static_cast<DType>(ins.ops[O::kDType]);
  const std::vector<int64_t>& shape = exe->constants[ins.ops[O::kShape]].shape;
  auto nbytes = checked_nbytes(shape, dtype);
  if (storage->is_image()) {
    alloc_image_tensor(storage, shape, dtype, nbytes, offset, ins, regs);
    return;
  }
  if (!nbytes) throw_runtime(fmt::format("tensor ({}) of {}: its size overflows 64 bits", fmt::join(shape, ", "),
                                         dtype_name(dtype)));
  if (Status s = tensor_fits_buffer(*nbytes, offset, storage->nbytes()); !s) {
    throw_runtime(fmt::format("tensor ({}): {}", fmt::join(shape, ", "), s.error().message()));
  }
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = shape;
  tensor->dtype = dtype;
  tensor->nbytes = *nbytes;
  tensor->storage = storage;
  tensor->offset = offset;
  tensor->context = context;
  tensor->view = buffer_range(*storage, offset, *nbytes);
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  regs[ins.ops[O::kDst]] = std::move(out);
}

std::shared_ptr<StorageObject> VirtualMachine::Impl::new_storage_buffer(const std::shared_ptr<ScopeCounter>& usage,
                                                                        uint64_t nbytes, uint64_t allocated) {
  cl_int status = CL_SUCCESS;
  SvmAllocation svm = use_svm ? svm_buffer(allocated) : SvmAllocation{};
  cl_mem mem = nullptr;
  if (svm.pointer != nullptr) {
    // The cl_mem over the SVM bytes serves copies and reads; kernels take pointers.
    mem = clCreateBuffer(context->context(), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, allocated, svm.pointer, &status);
    if (status != CL_SUCCESS) clSVMFree(context->context(), svm.pointer);
  } else {
    mem = clCreateBuffer(context->context(), CL_MEM_READ_WRITE, allocated, nullptr, &status);
  }
  if (status != CL_SUCCESS) throw_cl(status, "clCreateBuffer");
  ++device_allocations;
  if (svm.pointer != nullptr) ++svm_allocations;
  device_bytes_allocated += nbytes;
  ++usage->allocations;
  return std::make_shared<StorageObject>(usage, nbytes, opencl::MemHandle(mem), std::nullopt, std::move(svm));
}

// An SVM allocation of `nbytes` for a buffer storage, or none (the caller then
// makes a plain buffer): a device may offer SVM and still refuse a size.
SvmAllocation VirtualMachine::Impl::svm_buffer(uint64_t nbytes) {
  if (nbytes > context->info().max_alloc_bytes || nbytes > std::numeric_limits<size_t>::max()) return {};
  void* pointer = clSVMAlloc(context->context(), CL_MEM_READ_WRITE, static_cast<size_t>(nbytes), 0);
  if (pointer == nullptr) return {};
  return SvmAllocation{pointer, context};
}

// The cl_mem kernels receive for bytes [offset, offset + nbytes) of `storage` (the
// storage keeps the sub-buffers it hands out). None for zero bytes (kernels never
// receive an empty tensor as a buffer) and for SVM storages (kernels take pointers).
opencl::MemHandle VirtualMachine::Impl::buffer_range(StorageObject& storage, uint64_t offset, uint64_t nbytes) {
  if (nbytes == 0 || storage.svm_pointer() != nullptr) return {};
  cl_int status = CL_SUCCESS;
  bool created = false;
  opencl::MemHandle range = storage.range(offset, nbytes, status, created);
  if (status != CL_SUCCESS) throw_cl(status, "clCreateSubBuffer");
  if (created) ++sub_buffers_created;
  return range;
}

void VirtualMachine::Impl::view(SiteState& site, const Instruction& ins, std::vector<Value>& regs) {
  using O = operands::View;
  const TensorObject& base = tensor_operand(regs, ins.ops[O::kTensor], "the viewed tensor");
  if (base.in_image()) {
    view_image(ins, base, regs);
    return;
  }
  if (!base.in_buffer()) {
    throw_runtime(fmt::format("register {} holds a tensor {}; only a range of a buffer can be viewed",
                              ins.ops[O::kTensor], base.on_host() ? "on the host" : "made of blocks"));
  }
  const uint64_t offset = ins.ops[O::kOffset];
  const auto dtype = static_cast<DType>(ins.ops[O::kDType]);
  const std::vector<int64_t>& shape = exe->constants[ins.ops[O::kShape]].shape;
  const uint64_t nbytes = *checked_nbytes(shape, dtype);  // the loader checked it
  if (nbytes > base.nbytes || offset > base.nbytes - nbytes) {
    throw_runtime(fmt::format("a view of {} bytes at offset {} does not fit the tensor's {} bytes", nbytes, offset,
                              base.nbytes));
  }
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = shape;
  tensor->dtype = dtype;
  tensor->nbytes = nbytes;
  tensor->storage = base.storage;
  tensor->offset = base.offset + offset;
  tensor->context = context;
  tensor->view = buffer_range(*base.storage, tensor->offset, nbytes);
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  regs[ins.ops[O::kDst]] = std::move(out);
}

// A view of a tensor in an image: whole rows of its rectangle (its bytes are its
// pixels row by row), from row offset / row bytes, as wide as the tensor.
void VirtualMachine::Impl::view_image(const Instruction& ins, const TensorObject& base, std::vector<Value>& regs) {
  using O = operands::View;
  const uint64_t offset = ins.ops[O::kOffset];
  const auto dtype = static_cast<DType>(ins.ops[O::kDType]);
  const std::vector<int64_t>& shape = exe->constants[ins.ops[O::kShape]].shape;
  const ScopeRequirement& req = exe->requirements.scopes[scope_index.find(base.storage->scope())->second];
  const std::optional<ImageExtent> band = image_extent(shape, req.layout);
  const ImageExtent& whole = base.image_region;
  const uint64_t row_bytes = whole.width * 4 * dtype_bytes(base.dtype);  // a row of the image: it fits
  const bool whole_rows = row_bytes == 0 ? offset == 0 : offset % row_bytes == 0;
  if (dtype != base.dtype || !band || band->width != whole.width || !whole_rows) {
    throw_runtime(fmt::format("a view ({}) of {} at byte offset {} is not whole rows of the image tensor ({}) of {} "
                              "({} pixels wide, rows of {} bytes)",
                              fmt::join(shape, ", "), dtype_name(dtype), offset, fmt::join(base.shape, ", "),
                              dtype_name(base.dtype), whole.width, row_bytes));
  }
  const uint64_t first_row = row_bytes == 0 ? 0 : offset / row_bytes;
  if (first_row > whole.height || band->height > whole.height - first_row) {
    throw_runtime(fmt::format("a view of rows [{}, {}) does not fit the image tensor's {} rows", first_row,
                              first_row + band->height, whole.height));
  }
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = shape;
  tensor->dtype = dtype;
  tensor->nbytes = *checked_nbytes(shape, dtype);  // the loader checked it
  tensor->storage = base.storage;
  tensor->context = context;
  tensor->image_region = *band;
  tensor->image_offset = ImageOffset{base.image_offset.x, base.image_offset.y + first_row};
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  regs[ins.ops[O::kDst]] = std::move(out);
}

void VirtualMachine::Impl::alloc_image_tensor(const std::shared_ptr<StorageObject>& storage,
                                              const std::vector<int64_t>& shape, DType dtype,
                                              std::optional<uint64_t> nbytes, uint64_t offset, const Instruction& ins,
                                              std::vector<Value>& regs) {
  const ScopeRequirement& req = exe->requirements.scopes[scope_index.find(storage->scope())->second];
  auto extent = image_extent(shape, req.layout);
  const ImageExtent& image = storage->image();
  if (!nbytes || !extent) {
    throw_runtime(fmt::format("tensor ({}) is not an image tensor (last extent 4, rank at most 5, size within 64 bits)",
                              fmt::join(shape, ", ")));
  }
  // The offset is the tensor's top-left pixel, y << 32 | x.
  const ImageOffset at = unpack_image_offset(offset);
  if (Status s = image_offset_in_range(at); !s) {
    throw_runtime(fmt::format("tensor ({}): {} (offset {})", fmt::join(shape, ", "), s.error().message(), offset));
  }
  if (Status s = tensor_fits_image(*extent, at, image); !s) {
    throw_runtime(fmt::format("tensor ({}) {}", fmt::join(shape, ", "), s.error().message()));
  }
  if (*nbytes != 0 && storage->nbytes() / (image.height * image.width * 4) != dtype_bytes(dtype)) {
    throw_runtime(fmt::format("a {} tensor cannot live in an image of other pixels", dtype_name(dtype)));
  }
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = shape;
  tensor->dtype = dtype;
  tensor->nbytes = *nbytes;
  tensor->storage = storage;
  tensor->context = context;
  tensor->image_region = *extent;
  tensor->image_offset = at;
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  regs[ins.ops[operands::AllocTensor::kDst]] = std::move(out);
}

void VirtualMachine::Impl::copy_tensor(const Instruction& ins, std::vector<Value>& regs) {
  using O = operands::CopyTensor;
  const TensorObject& src = tensor_operand(regs, ins.ops[O::kSrc], "source");
  const TensorObject& dst = tensor_operand(regs, ins.ops[O::kDst], "destination");
  if (src.dtype != dst.dtype || src.shape != dst.shape) {
    throw_runtime(fmt::format("source Tensor[({}), {}] and destination Tensor[({}), {}] differ", fmt::join(src.shape, ", "),
                              dtype_name(src.dtype), fmt::join(dst.shape, ", "), dtype_name(dst.dtype)));
  }
  for (const TensorObject* t : {&src, &dst}) {
    if (!t->on_host() && t->context != context) throw_runtime("a tensor of another VM's device cannot be copied here");
  }
  if (src.nbytes == 0) return;
  if (src.is_discontiguous() || dst.is_discontiguous()) {
    copy_discontiguous(src, dst);
    return;
  }
  cl_command_queue queue = context->queue();
  cl_int status = CL_SUCCESS;
  if (src.in_image() || dst.in_image()) {
    copy_with_image(src, dst);
    return;
  }
  if (src.on_host() && dst.on_host()) {
    std::memmove(dst.host_data, src.host_data, src.nbytes);
  } else if (src.on_host()) {
    // Blocking: the caller's host memory need not outlive this instruction.
    status = clEnqueueWriteBuffer(queue, dst.storage->mem(), CL_TRUE, dst.offset, src.nbytes, src.host_data, 0, nullptr,
                                  nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteBuffer");
    context->transfers().note_upload(src.nbytes);
  } else if (dst.on_host()) {
    status = clEnqueueReadBuffer(queue, src.storage->mem(), CL_TRUE, src.offset, src.nbytes, dst.host_data, 0, nullptr,
                                 nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueReadBuffer");
    context->transfers().note_download(src.nbytes);
  } else {
    status = clEnqueueCopyBuffer(queue, src.storage->mem(), dst.storage->mem(), src.offset, dst.offset, src.nbytes, 0,
                                 nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyBuffer");
  }
}

// Copies where either side is an image: the tensor's row-major bytes are the
// image's pixels row by row (each layout is a reshape to [height, width * 4]),
// so every case is one 2D copy command.
void VirtualMachine::Impl::copy_with_image(const TensorObject& src, const TensorObject& dst) {
  cl_command_queue queue = context->queue();
  // Each image tensor's rectangle starts at its image offset.
  const size_t src_origin[3] = {src.image_offset.x, src.image_offset.y, 0};
  const size_t dst_origin[3] = {dst.image_offset.x, dst.image_offset.y, 0};
  const ImageExtent& extent = src.in_image() ? src.image_region : dst.image_region;
  const size_t region[3] = {extent.width, extent.height, 1};
  cl_int status = CL_SUCCESS;
  if (src.in_image() && dst.in_image()) {
    if (src.image_region.width != dst.image_region.width || src.image_region.height != dst.image_region.height) {
      throw_runtime("image tensors of different extents cannot be copied into each other");
    }
    status = clEnqueueCopyImage(queue, src.storage->mem(), dst.storage->mem(), src_origin, dst_origin, region, 0,
                                nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyImage");
  } else if (src.in_image()) {
    if (dst.on_host()) {
      status = clEnqueueReadImage(queue, src.storage->mem(), CL_TRUE, src_origin, region, 0, 0, dst.host_data, 0,
                                  nullptr, nullptr);
      if (status != CL_SUCCESS) throw_cl(status, "clEnqueueReadImage");
      context->transfers().note_download(src.nbytes);
    } else {
      status = clEnqueueCopyImageToBuffer(queue, src.storage->mem(), dst.storage->mem(), src_origin, region,
                                          dst.offset, 0, nullptr, nullptr);
      if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyImageToBuffer");
    }
  } else if (src.on_host()) {
    status = clEnqueueWriteImage(queue, dst.storage->mem(), CL_TRUE, dst_origin, region, 0, 0, src.host_data, 0,
                                 nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteImage");
    context->transfers().note_upload(src.nbytes);
  } else {
    status = clEnqueueCopyBufferToImage(queue, src.storage->mem(), dst.storage->mem(), src.offset, dst_origin, region,
                                        0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyBufferToImage");
  }
}

void VirtualMachine::Impl::check_guards(const std::string& kernel) {
  cl_int status = clFinish(context->queue());
  if (status != CL_SUCCESS) throw_cl(status, "clFinish");
  std::vector<uint32_t> zone(kGuardBytes / sizeof(uint32_t));
  std::erase_if(guarded, [](const Guarded& g) { return g.storage.expired(); });
  for (const Guarded& g : guarded) {
    std::shared_ptr<StorageObject> storage = g.storage.lock();
    const uint64_t guard_at = (storage->nbytes() + 3) / 4 * 4;
    status = clEnqueueReadBuffer(context->queue(), storage->mem(), CL_TRUE, guard_at, kGuardBytes, zone.data(), 0,
                                 nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueReadBuffer (guard zone)");
    for (size_t i = 0; i < zone.size(); ++i) {
      if (zone[i] != kGuardPattern) {
        throw_runtime(fmt::format("kernel '{}' wrote past the end of {}: byte {} of the guard zone behind it changed",
                                  kernel, g.made_at, i * sizeof(uint32_t)));
      }
    }
  }
}

}  // namespace stowage::vm
