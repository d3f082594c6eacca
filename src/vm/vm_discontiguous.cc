// Discontiguous tensors in the VM: alloc_discontiguous_tensor writes the pointer
// tables, copy_tensor moves blocks to and from contiguous tensors.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "stowage/bytecode/discontiguous.h"
#include "vm_impl.h"

namespace stowage::vm {
namespace {

const StorageObject& buffer_storage(const std::vector<Value>& regs, uint64_t reg, const char* role) {
  const Value& v = regs[reg];
  if (v.kind != Value::Kind::kStorage) {
    throw_runtime(fmt::format("{} storage (register {}) holds {}, not a Storage", role, reg, v.kind_name()));
  }
  if (v.storage->is_image()) throw_runtime(fmt::format("{} storage (register {}) is an image", role, reg));
  return *v.storage;
}

// Everything that depends only on the instruction's constants, computed on its
// first execution: the tables' bytes, merged into runs of adjacent tables.
void prepare_site(SiteState& site, const Executable& exe, const Instruction& ins) {
  using O = operands::AllocDiscontiguous;
  const std::vector<int64_t>& shape = exe.constants[ins.ops[O::kShape]].shape;
  const std::vector<int64_t>& tables = exe.constants[ins.ops[O::kTableOffsets]].shape;
  const std::vector<int64_t>& blocks = exe.constants[ins.ops[O::kDataOffsets]].shape;
  auto dtype = static_cast<DType>(ins.ops[O::kDType]);
  auto entry = static_cast<uint32_t>(ins.ops[O::kEntryBytes]);
  // The validator checked the counts against the geometry and each offset's width.
  DiscontiguousGeometry g = *discontiguous_geometry(shape, dtype);
  std::vector<uint64_t> order(tables.size());
  for (uint64_t t = 0; t < order.size(); ++t) order[t] = t;
  std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return tables[a] < tables[b]; });
  for (uint64_t t : order) {
    std::vector<uint64_t> entries = table_entries(g, shape, t, tables, blocks);
    auto offset = static_cast<uint64_t>(tables[t]);
    uint64_t bytes = entries.size() * entry;
    if (bytes == 0) continue;
    if (!site.table_runs.empty() && site.table_runs.back().first + site.table_runs.back().second == offset) {
      site.table_runs.back().second += bytes;
    } else {
      site.table_runs.emplace_back(offset, bytes);
    }
    for (uint64_t value : entries) {
      for (uint32_t k = 0; k < entry; ++k) site.table_bytes.push_back(static_cast<std::byte>(value >> (8 * k)));
    }
    site.tables_end = std::max(site.tables_end, offset + bytes);
  }
  auto offsets = std::make_shared<std::vector<uint64_t>>(blocks.begin(), blocks.end());
  for (uint64_t b : *offsets) site.blocks_end = std::max(site.blocks_end, b + g.block_bytes);
  site.block_offsets = std::move(offsets);
}

}  // namespace

void VirtualMachine::Impl::alloc_discontiguous(SiteState& site, const Instruction& ins, std::vector<Value>& regs) {
  using O = operands::AllocDiscontiguous;
  const StorageObject& table_storage = buffer_storage(regs, ins.ops[O::kTableStorage], "table");
  const StorageObject& data_storage = buffer_storage(regs, ins.ops[O::kDataStorage], "data");
  if (!site.block_offsets) prepare_site(site, *exe, ins);
  if (site.tables_end > table_storage.nbytes()) {
    throw_runtime(fmt::format("tables reach byte {}, past their storage of {} bytes", site.tables_end,
                              table_storage.nbytes()));
  }
  if (site.blocks_end > data_storage.nbytes()) {
    throw_runtime(fmt::format("blocks reach byte {}, past their storage of {} bytes", site.blocks_end,
                              data_storage.nbytes()));
  }
  // Not blocking: the bytes belong to the site, which outlives the queue's work.
  const std::byte* bytes = site.table_bytes.data();
  for (const auto& [offset, size] : site.table_runs) {
    cl_int status = clEnqueueWriteBuffer(context->queue(), table_storage.mem(), CL_FALSE, offset, size, bytes, 0,
                                         nullptr, nullptr);
    if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteBuffer (tables)");
    context->transfers().note_upload(size);
    bytes += size;
  }
  const std::vector<int64_t>& shape = exe->constants[ins.ops[O::kShape]].shape;
  auto dtype = static_cast<DType>(ins.ops[O::kDType]);
  auto tensor = std::make_shared<TensorObject>();
  tensor->shape = shape;
  tensor->dtype = dtype;
  tensor->nbytes = *checked_nbytes(shape, dtype);
  tensor->storage = regs[ins.ops[O::kDataStorage]].storage;
  tensor->tables = regs[ins.ops[O::kTableStorage]].storage;
  tensor->table_root = static_cast<uint64_t>(exe->constants[ins.ops[O::kTableOffsets]].shape.at(0));
  tensor->table_entry_bytes = static_cast<uint32_t>(ins.ops[O::kEntryBytes]);
  tensor->block_bytes = shape.back() * dtype_bytes(dtype);
  tensor->block_offsets = site.block_offsets;
  tensor->context = context;
  Value out;
  out.kind = Value::Kind::kTensor;
  out.tensor = std::move(tensor);
  regs[ins.ops[O::kDst]] = std::move(out);
}

namespace {

// Where block b of a tensor lies: in its storage (device) or its host memory.
uint64_t block_position(const TensorObject& t, uint64_t block, uint64_t block_bytes) {
  if (t.is_discontiguous()) return (*t.block_offsets)[block];
  return t.offset + block * block_bytes;
}

}  // namespace

// Block by block, merging blocks that are adjacent on both sides into one command.
void VirtualMachine::Impl::copy_discontiguous(const TensorObject& src, const TensorObject& dst) {
  if (src.in_image() || dst.in_image()) {
    throw_runtime("copy_tensor between a discontiguous tensor and an image tensor is not supported");
  }
  const TensorObject& d = src.is_discontiguous() ? src : dst;
  uint64_t block_bytes = d.block_bytes;
  uint64_t blocks = d.block_offsets->size();
  if (block_bytes == 0 || blocks == 0) return;
  cl_command_queue queue = context->queue();
  uint64_t b = 0;
  while (b < blocks) {
    uint64_t from = block_position(src, b, block_bytes);
    uint64_t to = block_position(dst, b, block_bytes);
    uint64_t run = 1;
    while (b + run < blocks && block_position(src, b + run, block_bytes) == from + run * block_bytes &&
           block_position(dst, b + run, block_bytes) == to + run * block_bytes) {
      ++run;
    }
    uint64_t size = run * block_bytes;
    // Host memory need not outlive the instruction: the last command blocks, and the
    // in-order queue finishes the earlier ones before it.
    cl_bool blocking = b + run == blocks ? CL_TRUE : CL_FALSE;
    cl_int status = CL_SUCCESS;
    if (src.on_host()) {
      status = clEnqueueWriteBuffer(queue, dst.storage->mem(), blocking, to, size,
                                    static_cast<const std::byte*>(src.host_data) + from, 0, nullptr, nullptr);
      if (status != CL_SUCCESS) throw_cl(status, "clEnqueueWriteBuffer");
      context->transfers().note_upload(size);
    } else if (dst.on_host()) {
      status = clEnqueueReadBuffer(queue, src.storage->mem(), blocking, from, size,
                                   static_cast<std::byte*>(dst.host_data) + to, 0, nullptr, nullptr);
      if (status != CL_SUCCESS) throw_cl(status, "clEnqueueReadBuffer");
      context->transfers().note_download(size);
    } else {
      status = clEnqueueCopyBuffer(queue, src.storage->mem(), dst.storage->mem(), from, to, size, 0, nullptr, nullptr);
      if (status != CL_SUCCESS) throw_cl(status, "clEnqueueCopyBuffer");
    }
    b += run;
  }
}

}  // namespace stowage::vm
