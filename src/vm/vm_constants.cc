// Tensor constants (weights): their storages are made and filled once, when the VM
// is created; load_tensor_constant hands out the view made then.
#include <fmt/format.h>

#include <cstring>

#include "vm_impl.h"

namespace stowage::vm {

std::shared_ptr<StorageObject> VirtualMachine::Impl::upload_constant_storage(const ConstantStorage& storage) {
  auto found = scope_index.find(storage.scope);
  if (found == scope_index.end()) {
    throw_runtime(fmt::format("constant storage in scope '{}', which is not among the requirements", storage.scope));
  }
  const std::shared_ptr<ScopeCounter>& usage = scope_usage[found->second];
  if (usage->capacity != 0 && storage.nbytes > usage->capacity - std::min<uint64_t>(usage->capacity, usage->in_use.load())) {
    throw_runtime(fmt::format("scope '{}': constants of {} bytes exceed the capacity of {} bytes ({} in use)",
                              storage.scope, storage.nbytes, usage->capacity, usage->in_use.load()));
  }
  cl_command_queue queue = context->queue();
  cl_int status = CL_SUCCESS;
  if (storage.kind == ScopeKind::kBuffer) {
    // Constant tensors are views at offsets in the storage, as activations are.
    const uint64_t nbytes = std::max<uint64_t>(storage.nbytes, 1);
    auto made = new_storage_buffer(usage, nbytes, nbytes);
    // Not blocking: the bytes belong to the executable, which this VM holds.
    for (const DataSegment& segment : storage.segments) {
      status = clEnqueueWriteBuffer(queue, made->mem(), CL_FALSE, segment.offset, segment.bytes.size(),
                                    segment.bytes.data(), 0, nullptr, nullptr);
      if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteBuffer (constants)");
      context->transfers().note_upload(segment.bytes.size());
    }
    return made;
  }
  cl_image_format format{CL_RGBA, storage.pixel_dtype == DType::kFloat32 ? static_cast<cl_channel_type>(CL_FLOAT)
                                                                          : static_cast<cl_channel_type>(CL_HALF_FLOAT)};
  cl_image_desc desc{};
  desc.image_type = CL_MEM_OBJECT_IMAGE2D;
  desc.image_width = storage.image.width;
  desc.image_height = storage.image.height;
  cl_mem mem = clCreateImage(context->context(), CL_MEM_READ_WRITE, &format, &desc, nullptr, &status);
  if (status != CL_SUCCESS) throw_cl(status, "clCreateImage (constants)");
  ++device_allocations;
  device_bytes_allocated += storage.nbytes;
  ++usage->allocations;
  auto made = std::make_shared<StorageObject>(usage, storage.nbytes, opencl::MemHandle(mem), storage.image);
  // An image is written whole: one segment covering it is used where it lies, else
  // the pixels are put together (zeros where no segment is) and written blocking.
  const size_t origin[3] = {0, 0, 0};
  const size_t region[3] = {storage.image.width, storage.image.height, 1};
  const bool whole = storage.segments.size() == 1 && storage.segments[0].offset == 0 &&
                     storage.segments[0].bytes.size() == storage.nbytes;
  std::vector<uint8_t> pixels;
  if (!whole) {
    pixels.assign(storage.nbytes, 0);
    for (const DataSegment& segment : storage.segments) {
      std::memcpy(pixels.data() + segment.offset, segment.bytes.data(), segment.bytes.size());
    }
  }
  status = clEnqueueWriteImage(queue, mem, whole ? CL_FALSE : CL_TRUE, origin, region, 0, 0,
                               whole ? storage.segments[0].bytes.data() : pixels.data(), 0, nullptr, nullptr);
  if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteImage (constants)");
  context->transfers().note_upload(storage.nbytes);
  return made;
}

void VirtualMachine::Impl::upload_constants() {
  for (const ConstantStorage& storage : exe->constant_storages) {
    constant_storages.push_back(upload_constant_storage(storage));
    constant_bytes += storage.nbytes;
  }
  for (const TensorConstant& c : exe->tensor_constants) {
    const std::shared_ptr<StorageObject>& storage = constant_storages[c.storage];
    auto tensor = std::make_shared<TensorObject>();
    tensor->shape = c.shape;
    tensor->dtype = c.dtype;
    tensor->nbytes = *checked_nbytes(c.shape, c.dtype);  // the loader checked it
    tensor->storage = storage;
    tensor->offset = c.offset;
    tensor->context = context;
    if (storage->is_image()) {
      const ScopeRequirement& req = exe->requirements.scopes[scope_index.find(storage->scope())->second];
      tensor->image_region = *image_extent(c.shape, req.layout);  // the loader checked it
    } else if (tensor->nbytes != 0 && storage->svm_pointer() == nullptr) {  // SVM: kernels take pointers
      cl_int status = CL_SUCCESS;
      bool created = false;
      tensor->view = storage->range(c.offset, tensor->nbytes, status, created);
      if (status != CL_SUCCESS) throw_cl(status, fmt::format("clCreateSubBuffer (constant '{}')", c.name));
      if (created) ++sub_buffers_created;
    }
    constants.push_back(std::move(tensor));
  }
}

}  // namespace stowage::vm
