// What the packing tests compare the packer with: an exhaustive search that shares
// nothing with the packer's canonical search, and a small deterministic generator.
#ifndef STOWAGE_TESTS_PLANNING_EXHAUSTIVE_PACKING_H
#define STOWAGE_TESTS_PLANNING_EXHAUSTIVE_PACKING_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "stowage/ir/packing.h"

namespace stowage::ir::exhaustive {

// A 64-bit LCG: next(bound) is in [0, bound).
class SmallRandom {
 public:
  explicit SmallRandom(uint64_t seed) : state_(seed) {}
  uint64_t operator()(uint64_t bound) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return (state_ >> 33) % bound;
  }

 private:
  uint64_t state_;
};

// 2 + next(more_items) items of 1-5 bytes, born in [0, 6), alive 1-4 steps, a
// quarter of them aligned to 2: small enough for the exhaustive search.
inline std::vector<PackItem> small_random_items(SmallRandom& next, uint64_t more_items) {
  std::vector<PackItem> items;
  const uint64_t n = 2 + next(more_items);
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t lower = static_cast<int64_t>(next(6));
    items.push_back({"b" + std::to_string(i), lower, lower + 1 + static_cast<int64_t>(next(4)), 1 + next(5),
                     next(4) == 0 ? 2u : 1u});
  }
  return items;
}

// Alive at a common moment, both with bytes.
inline bool alive_together(const PackItem& a, const PackItem& b) {
  return a.size > 0 && b.size > 0 && a.lower < b.upper && b.lower < a.upper && a.lower < a.upper &&
         b.lower < b.upper;
}

// Every aligned offset of every item, items in birth order.
inline bool fits_exhaustively(std::vector<PackItem> items, uint64_t capacity) {
  std::sort(items.begin(), items.end(), [](const PackItem& a, const PackItem& b) { return a.lower < b.lower; });
  std::vector<uint64_t> offsets(items.size());
  auto place = [&](auto& self, size_t k) -> bool {
    if (k == items.size()) return true;
    for (uint64_t at = 0; at + items[k].size <= capacity; at += items[k].alignment) {
      bool free = true;
      for (size_t j = 0; j < k && free; ++j)
        free = !(alive_together(items[k], items[j]) && at < offsets[j] + items[j].size &&
                 offsets[j] < at + items[k].size);
      if (!free) continue;
      offsets[k] = at;
      if (self(self, k + 1)) return true;
    }
    return false;
  };
  return place(place, 0);
}

// The least height that fits, from `from` up (the lower bound, or more).
inline uint64_t exhaustive_optimum(const std::vector<PackItem>& items, uint64_t from) {
  uint64_t height = from;
  while (!fits_exhaustively(items, height)) ++height;
  return height;
}

}  // namespace stowage::ir::exhaustive

#endif
