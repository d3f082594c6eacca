#include "memory_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

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

Expected<FunctionLayout> memory_layout(const ir::Function& f) {
  FunctionLayout layout;
  layout.function = f.name;
  layout.steps = f.bindings.size();
  // Where each storage and tensor is, by name: (scope index, storage index[, tensor index]).
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> storages;
  std::map<std::string, std::pair<std::pair<size_t, size_t>, size_t>, std::less<>> tensors;

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
      auto where = b.vars.empty() ? storages.end() : storages.find(b.vars[0]);
      if (where == storages.end()) return layout_error(f, b, "its storage is not an alloc_storage of the function");
      auto nbytes = checked_nbytes(b.shape, b.dtype);
      if (!nbytes) return layout_error(f, b, "the tensor size overflows 64 bits");
      auto [scope_index, storage_index] = where->second;
      ScopeLayout& scope = layout.scopes[scope_index];
      auto total = checked_add(scope.tensor_bytes, *nbytes);
      if (!total) return layout_error(f, b, "the scope's tensor bytes overflow 64 bits");
      scope.tensor_bytes = *total;
      auto& placed = scope.storages[storage_index].tensors;
      tensors[b.result] = {where->second, placed.size()};
      placed.push_back(TensorPlacement{b.result, static_cast<uint64_t>(b.offset), *nbytes, i, layout.steps});
    } else if (b.op == ir::Op::kKillObject && !b.vars.empty()) {
      if (auto t = tensors.find(b.vars[0]); t != tensors.end()) {
        auto [scope_index, storage_index] = t->second.first;
        layout.scopes[scope_index].storages[storage_index].tensors[t->second.second].end = i;
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
