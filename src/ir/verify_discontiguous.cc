// Verifier rules for discontiguous tensors: counts of tables and blocks, where each
// table and block lies, and how kernels receive them.
#include <fmt/format.h>

#include <algorithm>

#include "function_verifier.h"
#include "stowage/ir/printer.h"
#include "stowage/bytecode/discontiguous.h"

namespace stowage::ir::verify {
namespace {

// One table or block of the tensor being checked.
struct Piece {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string name;  // "table 0", "block 3"
};

// Pieces sorted by begin; the first two that overlap, if any.
Status find_overlap_within(std::vector<Piece> pieces, const std::string& tensor, const std::string& storage) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  const Piece* reach = nullptr;  // the piece reaching furthest so far
  for (const Piece& p : pieces) {
    if (p.begin == p.end) continue;
    if (reach != nullptr && p.begin < reach->end) {
      return broken_rule("{} (bytes [{}, {})) and {} (bytes [{}, {})) of tensor '{}' overlap in storage '{}'",
                         reach->name, reach->begin, reach->end, p.name, p.begin, p.end, tensor, storage);
    }
    if (reach == nullptr || p.end > reach->end) reach = &p;
  }
  return Status::ok();
}

// Rank, extents and size, common to both ops.
Status check_discontiguous_shape(const std::vector<int64_t>& shape_list, DType dtype) {
  std::string shape = print_shape_list(shape_list);
  if (shape_list.size() < 2) {
    return broken_rule("a discontiguous tensor has rank 2 or more (its last extent is the block), got shape {}",
                       shape);
  }
  for (int64_t extent : shape_list) {
    if (extent < 0) return broken_rule("shape {} has a negative extent", shape);
  }
  if (!discontiguous_geometry(shape_list, dtype) || !checked_nbytes(shape_list, dtype)) {
    return broken_rule("shape {} of {} is larger than 2^64 bytes", shape, dtype_name(dtype));
  }
  return Status::ok();
}

}  // namespace

Status FunctionVerifier::check_alloc_discontiguous(const Binding& b) {
  for (size_t i = 0; i < 2; ++i) {
    const VarInfo& var = vars_.at(b.vars[i]);
    if (var.type.kind != Type::Kind::kStorage) {
      return broken_rule("{} storage '{}' is {}, not a Storage", i == 0 ? "table" : "data", b.vars[i],
                         print_type(var.type));
    }
    if (var.scope != nullptr && var.scope->kind != ScopeKind::kBuffer) {
      return broken_rule("{} storage '{}' is in image scope '{}'; discontiguous tensors need buffer scopes",
                         i == 0 ? "table" : "data", b.vars[i], var.scope->name);
    }
  }
  STOWAGE_TRY(check_discontiguous_counts(b));
  STOWAGE_TRY(check_discontiguous_ranges(b, true));
  STOWAGE_TRY(check_discontiguous_ranges(b, false));
  // Tables and blocks may share one storage; then they must not overlap either.
  if (b.vars[0] == b.vars[1] && vars_.at(b.vars[0]).storage) {
    std::vector<Piece> pieces;
    auto geometry = *discontiguous_geometry(b.shape, b.dtype);
    for (const Placement& p : result_info_.placements) {
      pieces.push_back({p.begin, p.end, ""});
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      pieces[i].name = i < geometry.num_tables ? fmt::format("table {}", i)
                                               : fmt::format("block {}", i - geometry.num_tables);
    }
    STOWAGE_TRY(find_overlap_within(std::move(pieces), b.result, b.vars[0]));
  }
  result_info_.scope = vars_.at(b.vars[1]).scope;
  result_info_.discontiguous = DiscontiguousInfo{target_.table_entry_bytes, static_cast<uint64_t>(b.shape.back())};
  return Status::ok();
}

Status FunctionVerifier::check_discontiguous_counts(const Binding& b) {
  STOWAGE_TRY(check_discontiguous_shape(b.shape, b.dtype));
  std::string shape = print_shape_list(b.shape);
  auto geometry = discontiguous_geometry(b.shape, b.dtype);
  if (b.table_offsets.size() != geometry->num_tables) {
    return broken_rule("shape {} needs {} table{} ({} level{} of indirection, breadth-first), but {} table offset{} "
                       "{} given",
                       shape, geometry->num_tables, geometry->num_tables == 1 ? "" : "s", geometry->levels,
                       geometry->levels == 1 ? "" : "s", b.table_offsets.size(),
                       b.table_offsets.size() == 1 ? "" : "s", b.table_offsets.size() == 1 ? "is" : "are");
  }
  if (b.data_offsets.size() != geometry->num_blocks) {
    return broken_rule("shape {} has {} block{} of {} bytes, but {} data offset{} {} given", shape,
                       geometry->num_blocks, geometry->num_blocks == 1 ? "" : "s", geometry->block_bytes,
                       b.data_offsets.size(), b.data_offsets.size() == 1 ? "" : "s",
                       b.data_offsets.size() == 1 ? "is" : "are");
  }
  return Status::ok();
}

// Tables (`tables`) or blocks: offsets, alignment, entry width, inside their storage,
// disjoint from each other and from the tensors live there.
Status FunctionVerifier::check_discontiguous_ranges(const Binding& b, bool tables) {
  const DiscontiguousGeometry geometry = *discontiguous_geometry(b.shape, b.dtype);
  const std::vector<int64_t>& offsets = tables ? b.table_offsets : b.data_offsets;
  const std::string& storage_name = b.vars[tables ? 0 : 1];
  const char* what = tables ? "table" : "block";
  const uint64_t entry = target_.table_entry_bytes;
  const uint64_t align = tables ? entry : dtype_bytes(b.dtype);
  const uint64_t max_entry = entry >= 8 ? UINT64_MAX : (uint64_t{1} << (8 * entry)) - 1;
  std::vector<Piece> pieces;
  pieces.reserve(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) {
    int64_t offset = offsets[i];
    if (offset < 0) return broken_rule("{} {} of tensor '{}' has the negative offset {}", what, i, b.result, offset);
    auto begin = static_cast<uint64_t>(offset);
    if (begin % align != 0) {
      return broken_rule("{} {} of tensor '{}' is at offset {}, not a multiple of {} ({})", what, i, b.result, begin,
                         align, tables ? "the target's table entry size" : "the size of its elements");
    }
    if (begin > max_entry) {
      return broken_rule("{} {} of tensor '{}' is at offset {}, which does not fit a {}-byte table entry", what, i,
                         b.result, begin, entry);
    }
    uint64_t size = tables ? geometry.entries_of(b.shape, i) * entry : geometry.block_bytes;
    pieces.push_back({begin, begin + size, fmt::format("{} {}", what, i)});  // no wrap: begin < 2^63, size < 2^64/2
  }
  const VarInfo& storage_var = vars_.at(storage_name);
  if (!storage_var.storage) return Status::ok();  // a parameter or call result: sizes unknown here
  const StorageInfo& storage = *storage_var.storage;
  for (const Piece& p : pieces) {
    if (p.end > storage.bytes || p.end < p.begin) {
      return broken_rule("{} of tensor '{}' (bytes [{}, {})) does not fit in storage '{}' of {} bytes", p.name,
                         b.result, p.begin, p.end, storage_name, storage.bytes);
    }
  }
  STOWAGE_TRY(find_overlap_within(pieces, b.result, storage_name));
  for (const Piece& p : pieces) {
    if (p.begin == p.end) continue;
    STOWAGE_TRY(check_live_overlap(fmt::format("{} of tensor '{}'", p.name, b.result), storage_name, storage,
                                   p.begin, p.end));
  }
  for (const Piece& p : pieces) result_info_.placements.push_back({storage_name, p.begin, p.end, p.begin == p.end});
  return Status::ok();
}

Status FunctionVerifier::check_empty_discontiguous(const Binding& b) {
  STOWAGE_TRY_ASSIGN(const ScopeDesc* scope, find_scope(b.scope));
  STOWAGE_TRY_ASSIGN(const ScopeDesc* table_scope, find_scope(b.table_scope));
  for (const ScopeDesc* s : {scope, table_scope}) {
    if (s->kind != ScopeKind::kBuffer) {
      return broken_rule("scope '{}' holds images; discontiguous tensors need buffer scopes", s->name);
    }
  }
  STOWAGE_TRY(check_discontiguous_shape(b.shape, b.dtype));
  result_info_.scope = scope;
  result_info_.discontiguous = DiscontiguousInfo{target_.table_entry_bytes, static_cast<uint64_t>(b.shape.back())};
  return Status::ok();
}

}  // namespace stowage::ir::verify
