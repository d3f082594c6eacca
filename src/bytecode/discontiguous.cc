#include "stowage/bytecode/discontiguous.h"

#include <algorithm>

namespace stowage {

uint32_t DiscontiguousGeometry::level_of(uint64_t t) const {
  auto it = std::upper_bound(level_start.begin(), level_start.end(), t);
  return static_cast<uint32_t>(it - level_start.begin() - 1);
}

std::optional<DiscontiguousGeometry> discontiguous_geometry(std::span<const int64_t> shape, DType dtype) {
  if (shape.size() < 2) return std::nullopt;
  for (int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
  }
  DiscontiguousGeometry g;
  g.levels = static_cast<uint32_t>(shape.size() - 1);
  g.block_elements = static_cast<uint64_t>(shape.back());
  auto block_bytes = checked_mul(g.block_elements, dtype_bytes(dtype));
  if (!block_bytes) return std::nullopt;
  g.block_bytes = *block_bytes;
  uint64_t tables_at_level = 1;  // tables of the level being counted
  uint64_t total = 0;
  for (uint32_t k = 0; k < g.levels; ++k) {
    g.level_start.push_back(total);
    auto sum = checked_add(total, tables_at_level);
    auto next = checked_mul(tables_at_level, static_cast<uint64_t>(shape[k]));
    if (!sum || !next) return std::nullopt;
    total = *sum;
    tables_at_level = *next;
  }
  g.level_start.push_back(total);
  g.num_tables = total;
  g.num_blocks = tables_at_level;  // entries of the last level
  return g;
}

std::vector<uint64_t> table_entries(const DiscontiguousGeometry& g, std::span<const int64_t> shape, uint64_t t,
                                    std::span<const int64_t> table_offsets, std::span<const int64_t> data_offsets) {
  uint32_t k = g.level_of(t);
  uint64_t j = t - g.level_start[k];
  uint64_t n = static_cast<uint64_t>(shape[k]);
  std::vector<uint64_t> out(n);
  bool last = k + 1 == g.levels;
  for (uint64_t e = 0; e < n; ++e) {
    uint64_t child = j * n + e;
    out[e] = last ? static_cast<uint64_t>(data_offsets[child])
                  : static_cast<uint64_t>(table_offsets[g.level_start[k + 1] + child]);
  }
  return out;
}

}  // namespace stowage
