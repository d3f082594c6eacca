// Sub-problems the exact search has settled (see SubproblemMemo in
// packing_internal.h). Entries live in two flat pools; a hash of the item set
// leads to the entries with that set, which are then compared exactly.
#include <algorithm>

#include "packing_internal.h"

namespace stowage::ir::packing {
namespace {

uint64_t hash_items(std::span<const uint32_t> items) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ items.size();
  for (uint32_t item : items) {
    h ^= item + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
  }
  return h ^ (h >> 31);
}

}  // namespace

SubproblemMemo::Known SubproblemMemo::find(std::span<const uint32_t> items, std::span<const uint64_t> lowest,
                                           uint64_t capacity, std::vector<uint64_t>& offsets) const {
  const auto bucket = by_items_.find(hash_items(items));
  if (bucket == by_items_.end()) return Known::kNothing;
  for (uint32_t e : bucket->second) {
    const Entry& entry = entries_[e];
    if (entry.count != items.size() ||
        !std::equal(items.begin(), items.end(), item_pool_.begin() + static_cast<std::ptrdiff_t>(entry.items)))
      continue;
    const uint64_t* values = value_pool_.data() + entry.values;
    if (!entry.solved) {
      // No packing with every item at or above `values` within entry.capacity:
      // none either with items starting higher, or with less room.
      if (capacity > entry.capacity) continue;
      bool higher = true;
      for (size_t k = 0; k < items.size() && higher; ++k) higher = lowest[k] >= values[k];
      if (higher) return Known::kInfeasible;
    } else {
      // A packing found before still holds if every item may still go where it went.
      if (entry.capacity > capacity) continue;
      bool usable = true;
      for (size_t k = 0; k < items.size() && usable; ++k) usable = values[k] >= lowest[k];
      if (!usable) continue;
      offsets.assign(values, values + items.size());
      return Known::kSolved;
    }
  }
  return Known::kNothing;
}

void SubproblemMemo::add(std::span<const uint32_t> items, std::span<const uint64_t> values, uint64_t capacity,
                         bool solved) {
  if (item_pool_.size() + items.size() > max_values_) clear();  // full: start again
  if (items.size() > max_values_) return;
  std::vector<uint32_t>& bucket = by_items_[hash_items(items)];
  if (bucket.size() >= kMaxPerItemSet) return;
  bucket.push_back(static_cast<uint32_t>(entries_.size()));
  entries_.push_back(
      Entry{item_pool_.size(), value_pool_.size(), static_cast<uint32_t>(items.size()), capacity, solved});
  item_pool_.insert(item_pool_.end(), items.begin(), items.end());
  value_pool_.insert(value_pool_.end(), values.begin(), values.end());
}

void SubproblemMemo::clear() {
  by_items_.clear();
  entries_.clear();
  item_pool_.clear();
  value_pool_.clear();
}

}  // namespace stowage::ir::packing
