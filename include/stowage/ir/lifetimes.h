// Lifetimes of things that hold bytes for a while (tensors, packing items,
// pieces of a memory layout): the one place where the planner, the packing
// checker, the baselines and the memory layout sweep over time.
//
// A lifetime is the half-open interval [lower, upper) of moments (binding
// indices): something that dies at t and something born at t never meet.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stowage/ir/packing.h"

namespace stowage::ir {

struct Lifetime {
  int64_t lower = 0;  // first moment alive
  int64_t upper = 0;  // first moment no longer alive; lower >= upper: never alive
  uint64_t size = 0;  // bytes held while alive
};

// Whether it holds any byte at any moment.
inline bool takes_space(const Lifetime& l) { return l.size > 0 && l.lower < l.upper; }

// Whether two intervals share a moment.
inline bool alive_together(int64_t lower_a, int64_t upper_a, int64_t lower_b, int64_t upper_b) {
  return lower_a < upper_b && lower_b < upper_a;
}

struct LifetimeEvent {
  int64_t time = 0;
  uint32_t index = 0;  // of the lifetime
  bool starts = false;
  // Time order; at one moment deaths before births ([lower, upper)), then by index.
  bool operator<(const LifetimeEvent& o) const {
    if (time != o.time) return time < o.time;
    if (starts != o.starts) return !starts;
    return index < o.index;
  }
};

// The births and deaths of the lifetimes that take space, sorted. Indices are
// positions in `lifetimes` (at most 2^32 - 1 of them).
std::vector<LifetimeEvent> lifetime_events(std::span<const Lifetime> lifetimes);

// The lower bound of any placement of these lifetimes in one address space:
// the largest total of sizes alive at one moment (saturating at 2^64 - 1).
// Lifetimes that take no space count nowhere.
uint64_t peak_live_bytes(std::span<const Lifetime> lifetimes);

// The lifetimes of packing items, in their order.
std::vector<Lifetime> lifetimes_of(std::span<const PackItem> items);

}  // namespace stowage::ir
