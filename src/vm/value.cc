#include "stowage/vm/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace stowage::vm {

// DLPack 0.8 names the bool type code 6 (kDLBool); older headers lack the name.
constexpr uint8_t kDLBoolCode = 6;

StorageObject::StorageObject(std::shared_ptr<ScopeCounter> usage, uint64_t nbytes, opencl::MemHandle mem,
                             std::optional<ImageExtent> image, SvmAllocation svm)
    : usage_(std::move(usage)), nbytes_(nbytes), mem_(std::move(mem)), image_(image), svm_(std::move(svm)) {
  usage_->add(nbytes_);
}

StorageObject::~StorageObject() {
  usage_->release(nbytes_);
  // Newest first: NVIDIA's OpenCL (driver 580) faults when a sub-buffer is released
  // before a later one that overlaps it, once kernels have used both. Tensors hold
  // their storage, so these are the last references.
  while (!sub_buffers_.empty()) sub_buffers_.pop_back();
  if (svm_.pointer == nullptr) return;
  mem_.reset();
  // clSVMFree would not wait for kernels still using the bytes; a free queued
  // behind them does. Should queueing fail, wait, then free.
  void* pointers[] = {svm_.pointer};
  if (clEnqueueSVMFree(svm_.context->queue(), 1, pointers, nullptr, nullptr, 0, nullptr, nullptr) != CL_SUCCESS) {
    clFinish(svm_.context->queue());
    clSVMFree(svm_.context->context(), svm_.pointer);
  }
}

opencl::MemHandle StorageObject::range(uint64_t offset, uint64_t nbytes, cl_int& status, bool& created) {
  status = CL_SUCCESS;
  created = false;
  if (offset == 0 && nbytes == nbytes_) return mem_;
  std::lock_guard lock(sub_buffers_mutex_);
  for (const SubBuffer& sub : sub_buffers_) {
    if (sub.offset == offset && sub.nbytes == nbytes) return sub.mem;
  }
  cl_buffer_region region{offset, nbytes};
  cl_mem sub = clCreateSubBuffer(mem_.get(), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &status);
  if (status != CL_SUCCESS) return {};
  created = true;
  sub_buffers_.push_back(SubBuffer{offset, nbytes, opencl::MemHandle(sub)});
  return sub_buffers_.back().mem;
}

std::string Tensor::scope() const { return on_host() ? "host" : object_->storage->scope(); }

int Tensor::device_index() const {
  if (on_host()) return -1;
  const std::string& spec = object_->context->info().spec;  // "opencl:N"
  auto colon = spec.rfind(':');
  if (colon == std::string::npos) return 0;
  int index = 0;
  for (char c : spec.substr(colon + 1)) {
    if (c < '0' || c > '9' || index > 1000000) return 0;
    index = index * 10 + (c - '0');
  }
  return index;
}

void Tensor::copy_to_host(std::span<std::byte> dst) const {
  if (dst.size() != object_->nbytes) {
    throw StowageError(ErrorKind::kInvalidInput,
                       fmt::format("copy_to_host: destination has {} bytes, the tensor {}", dst.size(), object_->nbytes));
  }
  if (object_->nbytes == 0) return;
  if (on_host()) {
    std::memcpy(dst.data(), object_->host_data, dst.size());
    return;
  }
  // A blocking read on the in-order queue waits for everything enqueued before it.
  object_->context->transfers().note_download(object_->nbytes);
  if (object_->is_discontiguous()) {
    const std::vector<uint64_t>& blocks = *object_->block_offsets;
    uint64_t size = object_->block_bytes;
    for (size_t b = 0; b < blocks.size(); ++b) {
      cl_bool blocking = b + 1 == blocks.size() ? CL_TRUE : CL_FALSE;
      cl_int status = clEnqueueReadBuffer(object_->context->queue(), object_->storage->mem(), blocking, blocks[b],
                                          size, dst.data() + b * size, 0, nullptr, nullptr);
      if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clEnqueueReadBuffer"));
    }
    return;
  }
  if (object_->in_image()) {
    const size_t origin[3] = {object_->image_offset.x, object_->image_offset.y, 0};
    const size_t region[3] = {object_->image_region.width, object_->image_region.height, 1};
    cl_int status = clEnqueueReadImage(object_->context->queue(), object_->storage->mem(), CL_TRUE, origin, region, 0,
                                       0, dst.data(), 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clEnqueueReadImage"));
    return;
  }
  cl_int status = clEnqueueReadBuffer(object_->context->queue(), object_->storage->mem(), CL_TRUE, object_->offset,
                                      dst.size(), dst.data(), 0, nullptr, nullptr);
  if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clEnqueueReadBuffer"));
}

namespace {

struct HostCopy {
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  DLManagedTensor managed{};
};

}  // namespace

DLManagedTensor* Tensor::to_dlpack() const {
  auto* copy = new HostCopy();
  copy->shape = object_->shape;
  copy->bytes.resize(object_->nbytes);
  try {
    copy_to_host(copy->bytes);
  } catch (...) {
    delete copy;
    throw;
  }
  DLTensor& t = copy->managed.dl_tensor;
  t.data = copy->bytes.empty() ? nullptr : copy->bytes.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(copy->shape.size());
  t.dtype = dtype_to_dlpack(object_->dtype);
  t.shape = copy->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  copy->managed.manager_ctx = copy;
  copy->managed.deleter = [](DLManagedTensor* self) { delete static_cast<HostCopy*>(self->manager_ctx); };
  return &copy->managed;
}

namespace {

// What a device export holds: the tensor (so its storage lives) and its shape.
struct DeviceExport {
  std::shared_ptr<TensorObject> tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
};

// A buffer tensor of its own holding a device copy of `src`.
std::shared_ptr<TensorObject> buffer_copy(const TensorObject& src) {
  const opencl::Context& ctx = *src.context;
  cl_int status = CL_SUCCESS;
  const uint64_t nbytes = std::max<uint64_t>(src.nbytes, 1);
  cl_mem mem = clCreateBuffer(ctx.context(), CL_MEM_READ_WRITE, nbytes, nullptr, &status);
  if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clCreateBuffer"));
  auto usage = std::make_shared<ScopeCounter>();
  usage->scope = "global";
  auto out = std::make_shared<TensorObject>();
  out->shape = src.shape;
  out->dtype = src.dtype;
  out->nbytes = src.nbytes;
  out->storage = std::make_shared<StorageObject>(usage, nbytes, opencl::MemHandle(mem));
  out->context = src.context;
  if (src.nbytes == 0) return out;
  if (src.in_image()) {
    const size_t origin[3] = {src.image_offset.x, src.image_offset.y, 0};
    const size_t region[3] = {src.image_region.width, src.image_region.height, 1};
    status = clEnqueueCopyImageToBuffer(ctx.queue(), src.storage->mem(), mem, origin, region, 0, 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clEnqueueCopyImageToBuffer"));
    return out;
  }
  if (!src.is_discontiguous()) {
    status = clEnqueueCopyBuffer(ctx.queue(), src.storage->mem(), mem, src.offset, 0, src.nbytes, 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clEnqueueCopyBuffer"));
    return out;
  }
  const std::vector<uint64_t>& blocks = *src.block_offsets;
  for (size_t b = 0; b < blocks.size(); ++b) {
    status = clEnqueueCopyBuffer(ctx.queue(), src.storage->mem(), mem, blocks[b], b * src.block_bytes, src.block_bytes,
                                 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clEnqueueCopyBuffer"));
  }
  return out;
}

}  // namespace

DLManagedTensor* Tensor::to_dlpack_device(DeviceCopy copy) const {
  if (on_host()) {
    throw StowageError(ErrorKind::kInvalidInput, "to_dlpack_device: a host tensor has no device memory to export");
  }
  std::shared_ptr<TensorObject> exported = object_;
  if (copy == DeviceCopy::kAlways) {
    exported = buffer_copy(*object_);
  } else if (!object_->in_buffer()) {
    if (copy == DeviceCopy::kNever) {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("a tensor in {} is not a range of a buffer: exporting it needs a copy",
                                     object_->in_image() ? "an image" : "blocks"));
    }
    exported = buffer_copy(*object_);
  }
  cl_int status = clFinish(exported->context->queue());
  if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, "clFinish"));
  auto* holder = new DeviceExport();
  holder->tensor = exported;
  holder->shape = exported->shape;
  DLTensor& t = holder->managed.dl_tensor;
  t.data = exported->storage->mem();
  t.device = DLDevice{kDLOpenCL, device_index()};
  t.ndim = static_cast<int32_t>(holder->shape.size());
  t.dtype = dtype_to_dlpack(exported->dtype);
  t.shape = holder->shape.data();
  t.strides = nullptr;
  t.byte_offset = exported->offset;
  holder->managed.manager_ctx = holder;
  holder->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DeviceExport*>(self->manager_ctx); };
  return &holder->managed;
}

std::optional<DType> dtype_from_dlpack(DLDataType type) {
  if (type.lanes != 1) return std::nullopt;
  switch (type.code) {
    case kDLInt:
      switch (type.bits) {
        case 8: return DType::kInt8;
        case 16: return DType::kInt16;
        case 32: return DType::kInt32;
        case 64: return DType::kInt64;
      }
      break;
    case kDLUInt:
      switch (type.bits) {
        case 8: return DType::kUInt8;
        case 16: return DType::kUInt16;
        case 32: return DType::kUInt32;
        case 64: return DType::kUInt64;
      }
      break;
    case kDLFloat:
      switch (type.bits) {
        case 16: return DType::kFloat16;
        case 32: return DType::kFloat32;
        case 64: return DType::kFloat64;
      }
      break;
    case kDLBoolCode:
      if (type.bits == 8) return DType::kBool;
      break;
  }
  return std::nullopt;
}

DLDataType dtype_to_dlpack(DType dtype) {
  uint8_t bits = static_cast<uint8_t>(dtype_bytes(dtype) * 8);
  uint8_t code = kDLInt;
  if (dtype == DType::kBool) {
    code = kDLBoolCode;
  } else if (dtype_is_float(dtype)) {
    code = kDLFloat;
  } else if (!dtype_is_signed_int(dtype)) {
    code = kDLUInt;
  }
  return DLDataType{code, bits, 1};
}

Expected<Tensor> tensor_from_dlpack(const DLTensor& t, std::shared_ptr<void> owner) {
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    return Error(ErrorKind::kInvalidInput,
                 fmt::format("DLPack tensor is on device type {}; only host (kDLCPU) tensors are accepted",
                             static_cast<int>(t.device.device_type)));
  }
  auto dtype = dtype_from_dlpack(t.dtype);
  if (!dtype) {
    return Error(ErrorKind::kInvalidInput, fmt::format("DLPack dtype (code {}, bits {}, lanes {}) is not supported",
                                                       t.dtype.code, t.dtype.bits, t.dtype.lanes));
  }
  if (t.ndim < 0 || t.ndim > 16) return Error(ErrorKind::kInvalidInput, fmt::format("DLPack ndim {} out of range", t.ndim));
  auto obj = std::make_shared<TensorObject>();
  obj->shape.assign(t.shape, t.shape + t.ndim);
  obj->dtype = *dtype;
  auto nbytes = checked_nbytes(obj->shape, *dtype);
  if (!nbytes) return Error(ErrorKind::kInvalidInput, "DLPack tensor shape is negative or its size overflows");
  obj->nbytes = *nbytes;
  if (t.strides != nullptr) {
    int64_t expected = 1;
    for (int32_t i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected) {
        return Error(ErrorKind::kInvalidInput, "DLPack tensor is not compact row-major; make it contiguous first");
      }
      expected *= t.shape[i];
    }
  }
  obj->host_data = static_cast<char*>(t.data) + t.byte_offset;
  obj->host_owner = std::move(owner);
  return Tensor(std::move(obj));
}

Expected<Tensor> tensor_from_dlpack(DLManagedTensor* managed) {
  std::shared_ptr<void> owner(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  return tensor_from_dlpack(managed->dl_tensor, std::move(owner));
}

Tensor host_tensor(std::vector<int64_t> shape, DType dtype, std::span<const std::byte> bytes) {
  auto buffer = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
  auto obj = std::make_shared<TensorObject>();
  obj->shape = std::move(shape);
  obj->dtype = dtype;
  obj->nbytes = buffer->size();
  obj->host_data = buffer->data();
  obj->host_owner = std::move(buffer);
  return Tensor(std::move(obj));
}

const char* Value::kind_name() const {
  switch (kind) {
    case Kind::kNone: return "nothing";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kShape: return "Shape";
    case Kind::kStorage: return "Storage";
    case Kind::kTensor: return "Tensor";
    case Kind::kTuple: return "Tuple";
  }
  return "?";
}

}  // namespace stowage::vm
