// Storage, tensor views and copies.
#include <fmt/format.h>

#include <cstring>

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
  if (req.kind != ScopeKind::kBuffer) {
    throw StowageError(ErrorKind::kUnsupported, fmt::format("scope '{}': image storage is not supported by this runtime", scope));
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
  ScopeUsage& usage = *scope_usage[found->second];
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
                              usage.emulated ? " (emulated on-chip)" : "", nbytes, usage.capacity, usage.in_use));
  }
  cl_int status = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context->context(), CL_MEM_READ_WRITE, nbytes, nullptr, &status);
  if (status != CL_SUCCESS) throw_cl(status, "clCreateBuffer");
  ++device_allocations;
  device_bytes_allocated += nbytes;
  ++usage.allocations;
  site.storage = std::make_shared<StorageObject>(scope_usage[found->second], nbytes, opencl::MemHandle(mem));
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
  if (!nbytes || *nbytes > storage->nbytes() || offset > storage->nbytes() - *nbytes) {
    throw_runtime(fmt::format("tensor of {} bytes at offset {} does not fit storage of {} bytes",
                              nbytes ? fmt::to_string(*nbytes) : std::string("overflowing"), offset, storage->nbytes()));
  }
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = shape;
  tensor->dtype = dtype;
  tensor->nbytes = *nbytes;
  tensor->storage = storage;
  tensor->offset = offset;
  tensor->context = context;
  if (*nbytes == 0) {
    // A zero-size tensor has no view; kernels never receive it as a buffer.
  } else if (offset == 0 && *nbytes == storage->nbytes()) {
    clRetainMemObject(storage->mem());
    tensor->view = opencl::MemHandle(storage->mem());
  } else if (site.view && site.view_parent == storage->mem() && site.view_offset == offset &&
             site.view_size == *nbytes) {
    tensor->view = site.view;
  } else {
    cl_buffer_region region{offset, *nbytes};
    cl_int status = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(storage->mem(), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &status);
    if (status != CL_SUCCESS) throw_cl(status, "clCreateSubBuffer");
    ++sub_buffers_created;
    site.view = opencl::MemHandle(sub);
    site.view_parent = storage->mem();
    site.view_offset = offset;
    site.view_size = *nbytes;
    tensor->view = site.view;
  }
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  regs[ins.ops[O::kDst]] = std::move(out);
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
  cl_command_queue queue = context->queue();
  cl_int status = CL_SUCCESS;
  if (src.on_host() && dst.on_host()) {
    std::memmove(dst.host_data, src.host_data, src.nbytes);
  } else if (src.on_host()) {
    // Blocking: the caller's host memory need not outlive this instruction.
    status = clEnqueueWriteBuffer(queue, dst.storage->mem(), CL_TRUE, dst.offset, src.nbytes, src.host_data, 0, nullptr,
                                  nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteBuffer");
  } else if (dst.on_host()) {
    status = clEnqueueReadBuffer(queue, src.storage->mem(), CL_TRUE, src.offset, src.nbytes, dst.host_data, 0, nullptr,
                                 nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueReadBuffer");
  } else {
    status = clEnqueueCopyBuffer(queue, src.storage->mem(), dst.storage->mem(), src.offset, dst.offset, src.nbytes, 0,
                                 nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyBuffer");
  }
}

}  // namespace stowage::vm
