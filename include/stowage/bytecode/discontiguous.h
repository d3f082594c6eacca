// The geometry of a discontiguous tensor, shared by the verifier, the planner, the
// bytecode validator and the VM so that they agree on which table holds what.
//
// A tensor of shape [d0, d1, ..., dn] (n >= 1) is stored as d0*...*d(n-1) blocks of
// dn elements, each block contiguous and anywhere in the data storage. It is found
// through n levels of tables in the table storage, listed breadth-first:
//   level 0: 1 table of d0 entries (the root);
//   level k: d0*...*d(k-1) tables of dk entries each.
// Entry e of table j of level k (0-based within the level) holds
//   - for k < n-1: the byte offset, in the table storage, of table j*dk + e of level k+1;
//   - for k = n-1: the byte offset, in the data storage, of block j*dk + e.
// Blocks are numbered row-major, so block b holds elements [b*dn, (b+1)*dn) of the
// tensor's row-major order. Entries are little-endian unsigned integers of the
// target's table entry width (4 or 8 bytes). docs/discontiguous.md has examples.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "stowage/support/dtype.h"

namespace stowage {

struct DiscontiguousGeometry {
  uint32_t levels = 0;          // indirection levels: rank - 1
  uint64_t num_tables = 0;      // over all levels
  uint64_t num_blocks = 0;
  uint64_t block_elements = 0;  // the last extent
  uint64_t block_bytes = 0;
  // First table (breadth-first index) of each level, plus num_tables at the end.
  std::vector<uint64_t> level_start;

  // The level of table `t`, and the number of entries it holds.
  uint32_t level_of(uint64_t t) const;
  uint64_t entries_of(std::span<const int64_t> shape, uint64_t t) const { return uint64_t(shape[level_of(t)]); }
};

// nullopt when the rank is below 2, an extent is negative, or a count overflows.
std::optional<DiscontiguousGeometry> discontiguous_geometry(std::span<const int64_t> shape, DType dtype);

// Table `t`'s entries: table offsets of its children or data offsets of its blocks.
// Counts must match the geometry (checked by the callers).
std::vector<uint64_t> table_entries(const DiscontiguousGeometry& g, std::span<const int64_t> shape, uint64_t t,
                                    std::span<const int64_t> table_offsets, std::span<const int64_t> data_offsets);

inline bool valid_table_entry_bytes(uint64_t bytes) { return bytes == 4 || bytes == 8; }

}  // namespace stowage
