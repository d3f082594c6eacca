// What memory planners without offset packing would need, for comparison in
// the memory report: every tensor its own storage, and whole-storage reuse as
// TVM Relax's static_plan_block_memory does it.
#include <algorithm>
#include <limits>
#include <map>

#include "stowage/ir/lifetimes.h"
#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<uint64_t>::max() : product;
}

// Relax's search window: a free storage serves a request when its size lies
// within a factor of 16 of the request.
constexpr uint64_t kMatchRange = 16;

}  // namespace

uint64_t naive_total(std::span<const PackItem> items) {
  uint64_t total = 0;
  for (const PackItem& item : items) total = saturating_add(total, item.size);
  return total;
}

// The model, in time order (deaths before births at the same moment):
//  - a birth takes the smallest free storage of size in [size, 16 * size];
//    failing that, the largest free one in [size / 16, size), grown to size;
//    failing that, a new storage of exactly size bytes;
//  - a death returns the item's storage to the free pool.
// Free storages of equal size are taken in the order they were freed. One pool
// serves all items (Relax keeps one per dtype; items here carry none).
// Items of size 0 or never alive take no storage.
uint64_t reuse_only_total(std::span<const PackItem> items) {
  // Deaths come first at one moment: a storage freed at t serves an item born at t.
  const std::vector<LifetimeEvent> events = lifetime_events(lifetimes_of(items));
  std::vector<uint64_t> storage_size;
  std::vector<uint32_t> storage_of(items.size());
  std::multimap<uint64_t, uint32_t> free_pool;
  for (const LifetimeEvent& e : events) {
    if (!e.starts) {
      const uint32_t storage = storage_of[e.index];
      free_pool.emplace(storage_size[storage], storage);
      continue;
    }
    const uint64_t size = items[e.index].size;
    auto larger = free_pool.lower_bound(size);
    if (larger != free_pool.end() && larger->first <= saturating_mul(size, kMatchRange)) {
      storage_of[e.index] = larger->second;
      free_pool.erase(larger);
      continue;
    }
    if (larger != free_pool.begin()) {
      auto smaller = std::prev(larger);
      if (smaller->first >= size / kMatchRange) {
        storage_of[e.index] = smaller->second;
        storage_size[smaller->second] = size;
        free_pool.erase(smaller);
        continue;
      }
    }
    storage_of[e.index] = static_cast<uint32_t>(storage_size.size());
    storage_size.push_back(size);
  }
  uint64_t total = 0;
  for (uint64_t size : storage_size) total = saturating_add(total, size);
  return total;
}

}  // namespace stowage::ir
