#include "stowage/ir/memory_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "stowage/bytecode/discontiguous.h"
#include "stowage/ir/lifetimes.h"

namespace stowage::ir {
namespace {

Error layout_error(const Function& f, const Binding& b, std::string_view what) {
  return Error(ErrorKind::kInvalidInput,
               fmt::format("memory layout of '{}': binding '{}' ({}): {}", f.name, b.result, op_name(b.op), what));
}

// Bytes of a storage: [nbytes] for buffers, [height, width] RGBA pixels for textures.
std::optional<uint64_t> storage_bytes(const Binding& b) {
  if (b.shape.size() == 1) return b.shape[0] < 0 ? std::nullopt : std::optional<uint64_t>(b.shape[0]);
  std::vector<int64_t> pixels = b.shape;
  pixels.push_back(4);
  return checked_nbytes(pixels, b.dtype);
}

uint64_t lower_bound(const LayoutScope& scope) {
  std::vector<Lifetime> lifetimes;
  for (const LayoutStorage& s : scope.storages) {
    for (const LayoutTensor& t : s.tensors) {
      lifetimes.push_back({static_cast<int64_t>(t.start), static_cast<int64_t>(t.end), t.nbytes});
    }
  }
  return peak_live_bytes(lifetimes);
}

}  // namespace

Expected<FunctionLayout> memory_layout(const Function& f, uint32_t table_entry_bytes) {
  FunctionLayout layout;
  layout.function = f.name;
  layout.steps = f.bindings.size();
  // Where each storage is, by name: (scope index, storage index); where each
  // tensor's pieces are (one, or a discontiguous tensor's tables and blocks).
  using Where = std::pair<size_t, size_t>;
  std::map<std::string, Where, std::less<>> storages;
  std::map<std::string, std::vector<std::pair<Where, size_t>>, std::less<>> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> totals;  // per scope: storage bytes, tensor bytes (overflow checks)

  // Records `nbytes` at `offset` of `storage` for the binding `b`, named `name`.
  auto place = [&](const Binding& b, size_t i, const std::string& storage, const std::string& name, uint64_t offset,
                   uint64_t nbytes) -> Status {
    auto where = storages.find(storage);
    if (where == storages.end()) return layout_error(f, b, "its storage is not an alloc_storage of the function");
    auto [scope_index, storage_index] = where->second;
    auto total = checked_add(totals[scope_index].second, nbytes);
    if (!total) return layout_error(f, b, "the scope's tensor bytes overflow 64 bits");
    totals[scope_index].second = *total;
    auto& placed = layout.scopes[scope_index].storages[storage_index].tensors;
    tensors[b.result].push_back({where->second, placed.size()});
    placed.push_back(LayoutTensor{name, offset, nbytes, i, layout.steps});
    return Status::ok();
  };

  for (size_t i = 0; i < f.bindings.size(); ++i) {
    const Binding& b = f.bindings[i];
    if (b.op == Op::kAllocStorage) {
      auto nbytes = storage_bytes(b);
      if (!nbytes) return layout_error(f, b, "the storage size overflows 64 bits");
      auto scope = std::find_if(layout.scopes.begin(), layout.scopes.end(),
                                [&](const LayoutScope& s) { return s.scope == b.scope; });
      if (scope == layout.scopes.end()) {
        layout.scopes.push_back(LayoutScope{b.scope, {}, 0});
        totals.emplace_back(0, 0);
        scope = layout.scopes.end() - 1;
      }
      const size_t index = static_cast<size_t>(scope - layout.scopes.begin());
      auto total = checked_add(totals[index].first, *nbytes);
      if (!total) return layout_error(f, b, "the scope's total size overflows 64 bits");
      totals[index].first = *total;
      storages[b.result] = {index, scope->storages.size()};
      scope->storages.push_back(LayoutStorage{b.result, *nbytes, i, layout.steps, {}});
    } else if (b.op == Op::kAllocTensor) {
      auto nbytes = checked_nbytes(b.shape, b.dtype);
      if (!nbytes) return layout_error(f, b, "the tensor size overflows 64 bits");
      if (b.vars.empty()) return layout_error(f, b, "its storage is not an alloc_storage of the function");
      STOWAGE_TRY(place(b, i, b.vars[0], b.result, static_cast<uint64_t>(b.offset), *nbytes));
    } else if (b.op == Op::kAllocDiscontiguousTensor && b.vars.size() == 2) {
      // Tables and blocks are pieces of their own, named after the tensor.
      auto geometry = discontiguous_geometry(b.shape, b.dtype);
      if (!geometry || b.table_offsets.size() != geometry->num_tables ||
          b.data_offsets.size() != geometry->num_blocks) {
        return layout_error(f, b, "its offsets do not match its shape");
      }
      for (size_t t = 0; t < b.table_offsets.size(); ++t) {
        auto bytes = checked_mul(geometry->entries_of(b.shape, t), table_entry_bytes);
        if (!bytes) return layout_error(f, b, "a table's size overflows 64 bits");
        STOWAGE_TRY(place(b, i, b.vars[0], fmt::format("{} table {}", b.result, t),
                          static_cast<uint64_t>(b.table_offsets[t]), *bytes));
      }
      for (size_t k = 0; k < b.data_offsets.size(); ++k) {
        STOWAGE_TRY(place(b, i, b.vars[1], fmt::format("{} block {}", b.result, k),
                          static_cast<uint64_t>(b.data_offsets[k]), geometry->block_bytes));
      }
    } else if (b.op == Op::kKillObject && !b.vars.empty()) {
      if (auto t = tensors.find(b.vars[0]); t != tensors.end()) {
        for (const auto& [where, index] : t->second) {
          layout.scopes[where.first].storages[where.second].tensors[index].end = i;
        }
      } else if (auto s = storages.find(b.vars[0]); s != storages.end()) {
        layout.scopes[s->second.first].storages[s->second.second].end = i;
      }
    }
  }
  for (LayoutScope& scope : layout.scopes) scope.lower_bound = lower_bound(scope);
  return layout;
}

}  // namespace stowage::ir
