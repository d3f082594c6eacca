#include "memory_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "stowage/bytecode/discontiguous.h"

namespace stowage::python {
namespace {

Error layout_error(const ir::Function& f, const ir::Binding& b, std::string_view what) {
  return Error(ErrorKind::kInvalidInput,
               fmt::format("memory layout of '{}': binding '{}' ({}): {}", f.name, b.result, ir::op_name(b.op), what));
}

// Bytes of a storage: [nbytes] for buffers, [height, width] RGBA pixels for textures.
std::optional<uint64_t> storage_bytes(const ir::Binding& b) {
  if (b.shape.size() == 1) return b.shape[0] < 0 ? std::nullopt : std::optional<uint64_t>(b.shape[0]);
  std::vector<int64_t> pixels = b.shape;
  pixels.push_back(4);
  return checked_nbytes(pixels, b.dtype);
}

// The most bytes alive at one moment among `tensors` (half-open [start, end)).
uint64_t peak_live(const std::vector<const TensorPlacement*>& tensors) {
  // Bytes starting (+1) and ending (-1) at each time; at equal times ends sort first.
  std::map<std::pair<uint64_t, int>, uint64_t> bytes;
  for (const TensorPlacement* t : tensors) {
    if (t->start >= t->end) continue;
    bytes[{t->start, 1}] += t->nbytes;
    bytes[{t->end, -1}] += t->nbytes;
  }
  uint64_t live = 0;
  uint64_t peak = 0;
  for (const auto& [event, amount] : bytes) {
    live = event.second > 0 ? live + amount : live - amount;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

Expected<FunctionLayout> memory_layout(const ir::Function& f, uint32_t table_entry_bytes) {
  FunctionLayout layout;
  layout.function = f.name;
  layout.steps = f.bindings.size();
  // Where each storage is, by name: (scope index, storage index); where each
  // tensor's pieces are (one, or a discontiguous tensor's tables and blocks).
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> storages;
  std::map<std::string, std::vector<std::pair<std::pair<size_t, size_t>, size_t>>, std::less<>> tensors;

  // Records `nbytes` at `offset` of `storage` for the binding `b`, named `name`.
  auto place = [&](const ir::Binding& b, size_t i, const std::string& storage, const std::string& name,
                   uint64_t offset, uint64_t nbytes) -> Status {
    auto where = storages.find(storage);
    if (where == storages.end()) return layout_error(f, b, "its storage is not an alloc_storage of the function");
    auto [scope_index, storage_index] = where->second;
    ScopeLayout& scope = layout.scopes[scope_index];
    auto total = checked_add(scope.tensor_bytes, nbytes);
    if (!total) return layout_error(f, b, "the scope's tensor bytes overflow 64 bits");
    scope.tensor_bytes = *total;
    auto& placed = scope.storages[storage_index].tensors;
    tensors[b.result].push_back({where->second, placed.size()});
    placed.push_back(TensorPlacement{name, offset, nbytes, i, layout.steps});
    return Status::ok();
  };

  for (size_t i = 0; i < f.bindings.size(); ++i) {
    const ir::Binding& b = f.bindings[i];
    if (b.op == ir::Op::kAllocStorage) {
      auto nbytes = storage_bytes(b);
      if (!nbytes) return layout_error(f, b, "the storage size overflows 64 bits");
      auto scope = std::find_if(layout.scopes.begin(), layout.scopes.end(),
                                [&](const ScopeLayout& s) { return s.scope == b.scope; });
      if (scope == layout.scopes.end()) {
        layout.scopes.push_back(ScopeLayout{b.scope, {}, 0, 0, 0});
        scope = layout.scopes.end() - 1;
      }
      auto total = checked_add(scope->storage_bytes, *nbytes);
      if (!total) return layout_error(f, b, "the scope's total size overflows 64 bits");
      scope->storage_bytes = *total;
      storages[b.result] = {static_cast<size_t>(scope - layout.scopes.begin()), scope->storages.size()};
      scope->storages.push_back(StoragePlacement{b.result, *nbytes, i, layout.steps, {}});
    } else if (b.op == ir::Op::kAllocTensor) {
      auto nbytes = checked_nbytes(b.shape, b.dtype);
      if (!nbytes) return layout_error(f, b, "the tensor size overflows 64 bits");
      if (b.vars.empty()) return layout_error(f, b, "its storage is not an alloc_storage of the function");
      if (Status s = place(b, i, b.vars[0], b.result, static_cast<uint64_t>(b.offset), *nbytes); !s) return s.error();
    } else if (b.op == ir::Op::kAllocDiscontiguousTensor && b.vars.size() == 2) {
      // Tables and blocks are pieces of their own, named after the tensor.
      auto geometry = discontiguous_geometry(b.shape, b.dtype);
      if (!geometry || b.table_offsets.size() != geometry->num_tables ||
          b.data_offsets.size() != geometry->num_blocks) {
        return layout_error(f, b, "its offsets do not match its shape");
      }
      for (size_t t = 0; t < b.table_offsets.size(); ++t) {
        uint64_t bytes = geometry->entries_of(b.shape, t) * table_entry_bytes;
        std::string name = fmt::format("{} table {}", b.result, t);
        if (Status s = place(b, i, b.vars[0], name, static_cast<uint64_t>(b.table_offsets[t]), bytes); !s) {
          return s.error();
        }
      }
      for (size_t k = 0; k < b.data_offsets.size(); ++k) {
        std::string name = fmt::format("{} block {}", b.result, k);
        if (Status s = place(b, i, b.vars[1], name, static_cast<uint64_t>(b.data_offsets[k]), geometry->block_bytes);
            !s) {
          return s.error();
        }
      }
    } else if (b.op == ir::Op::kKillObject && !b.vars.empty()) {
      if (auto t = tensors.find(b.vars[0]); t != tensors.end()) {
        for (const auto& [where, index] : t->second) {
          layout.scopes[where.first].storages[where.second].tensors[index].end = i;
        }
      } else if (auto s = storages.find(b.vars[0]); s != storages.end()) {
        layout.scopes[s->second.first].storages[s->second.second].end = i;
      }
    }
  }
  for (ScopeLayout& scope : layout.scopes) {
    std::vector<const TensorPlacement*> all;
    for (const StoragePlacement& s : scope.storages) {
      for (const TensorPlacement& t : s.tensors) all.push_back(&t);
    }
    scope.peak_live_bytes = peak_live(all);
  }
  return layout;
}

}  // namespace stowage::python
