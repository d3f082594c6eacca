// Internal pieces of the offset packer (see packing.cc for the algorithm).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "stowage/ir/packing.h"

namespace stowage::ir::packing {

// One connected group of items in time: no item outside it is alive while one
// of its items is, so it can be packed on its own. Items are numbered 0..n-1
// here; `item` maps them back to the caller's indices.
struct Instance {
  std::vector<uint32_t> item;
  std::vector<int64_t> lower, upper;
  std::vector<uint64_t> size, align;

  // Sections are the maximal sets of items alive at one moment (the maximal
  // cliques of the interval graph), in time order. Item i belongs to sections
  // [first_section[i], end_section[i]); two items are alive at a common moment
  // exactly when they share a section.
  std::vector<uint32_t> first_section, end_section;
  std::vector<uint64_t> section_total;  // bytes of all items of the section
  uint64_t lower_bound = 0;             // the largest section total

  uint64_t lifetime(uint32_t i) const {
    return static_cast<uint64_t>(upper[i]) - static_cast<uint64_t>(lower[i]);
  }
  uint32_t count() const { return static_cast<uint32_t>(size.size()); }
  uint32_t section_count() const { return static_cast<uint32_t>(section_total.size()); }
};

// Builds instances for the given items (all with size > 0 and lower < upper),
// one per connected group in time, in order of their first moment.
std::vector<Instance> split_into_instances(std::span<const PackItem> items,
                                           std::span<const uint32_t> packed);

// Fills the section fields of `instance` from its times and sizes.
void compute_sections(Instance& instance);

// For each item, the largest section total among its sections: how crowded
// the most crowded moment of its life is.
std::vector<uint64_t> item_crowding(const Instance& instance);

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
  // Callers guarantee the sum of all sizes plus alignments fits in 64 bits,
  // so the rounding cannot overflow.
  uint64_t rest = value % alignment;
  return rest == 0 ? value : value + (alignment - rest);
}

// Counts steps and watches the clock. The clock is read every 1024 steps.
// Slices give part of what is left (steps and time) to a sub-task.
class StepCounter {
 public:
  using Clock = std::chrono::steady_clock;
  StepCounter(uint64_t limit, Clock::time_point deadline) : limit_(limit), deadline_(deadline) {}

  // Takes `count` steps; false when the steps or the time are spent.
  bool take(uint64_t count = 1) {
    if (used_ >= limit_ || time_up_) return false;
    const uint64_t before = used_;
    used_ = limit_ - used_ < count ? limit_ : used_ + count;  // never counted past the budget
    if ((used_ >> 10) != (before >> 10) && Clock::now() >= deadline_) time_up_ = true;
    return true;
  }
  // Counts work already done (the greedy start), past the budget if need be.
  void charge(uint64_t steps) { used_ = std::numeric_limits<uint64_t>::max() - used_ < steps ? used_ : used_ + steps; }
  uint64_t used() const { return used_; }
  uint64_t left() const { return used_ >= limit_ ? 0 : limit_ - used_; }
  bool time_up() const { return time_up_; }
  bool exhausted() const { return time_up_ || used_ >= limit_; }

  // A sub-budget: at most `steps` more, and `share` of the time left.
  StepCounter slice(uint64_t steps, double share = 1) const {
    StepCounter s(*this);
    s.limit_ = used_ + std::min(steps, left());
    if (share < 1) {
      const Clock::time_point now = Clock::now();
      if (now < deadline_)
        s.deadline_ = now + std::chrono::duration_cast<Clock::duration>((deadline_ - now) * share);
    }
    return s;
  }
  // Takes back the progress of a slice made from this counter. A slice that
  // ran out of its share of the time leaves this counter's time running.
  void absorb(const StepCounter& slice) {
    used_ = slice.used_;
    time_up_ = time_up_ || (slice.time_up_ && slice.deadline_ >= deadline_);
  }

 private:
  uint64_t used_ = 0;
  uint64_t limit_;
  Clock::time_point deadline_;
  bool time_up_ = false;
};

struct Placement {
  std::vector<uint64_t> offsets;  // per instance item
  uint64_t height = 0;
};

uint64_t height_of(const Instance& instance, std::span<const uint64_t> offsets);

// The greedy start: items in a few orders, each at an aligned gap among the
// already placed items it overlaps in time (the tightest that holds it, or the
// lowest), the best placement kept. Always completes; charges one step per
// item and order.
Placement best_greedy_placement(const Instance& instance, StepCounter& steps);

enum class SearchOutcome {
  kFound,       // `offsets` holds a packing within the capacity
  kInfeasible,  // proven: no packing within the capacity exists
  kStopped,     // the step budget or the time ran out first
};

// Sub-problems of the exact search that it has settled, kept so that they are
// settled at once when they come back (after a backtrack elsewhere, or under
// another ranking). A sub-problem is a set of unplaced items that no other
// unplaced item is alive with, each with the lowest offset it may take (just
// above the placed items alive with it), and a capacity. Whether it has a
// packing depends on nothing else, so
//  - with no packing, neither has the same set with every item starting as
//    high or higher, within as much room or less (dominance);
//  - a packing found stays one while every item may still go where it went.
// The memory is bounded: past `max_values` stored numbers, it starts again.
class SubproblemMemo {
 public:
  enum class Known { kNothing, kInfeasible, kSolved };
  explicit SubproblemMemo(size_t max_values) : max_values_(max_values) {}

  // `items` sorted, `lowest` per item. kSolved fills `offsets`, per item.
  Known find(std::span<const uint32_t> items, std::span<const uint64_t> lowest, uint64_t capacity,
             std::vector<uint64_t>& offsets) const;
  // Solved: `values` are offsets and `capacity` their height. Else: the lowest
  // offsets of a sub-problem shown to have no packing within `capacity`.
  void add(std::span<const uint32_t> items, std::span<const uint64_t> values, uint64_t capacity, bool solved);
  void clear();

 private:
  struct Entry {
    size_t items, values;  // where its numbers begin in the pools
    uint32_t count;
    uint64_t capacity;
    bool solved;
  };
  static constexpr size_t kMaxPerItemSet = 32;
  size_t max_values_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_items_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> item_pool_;
  std::vector<uint64_t> value_pool_;
};

// Exact search for packings of one instance (see packing_search.cc); what it
// precomputes is shared by all the capacities asked for.
class ExactSearch {
 public:
  // Which branchings the runs use (see packing_search.cc): both by default;
  // one alone (niche branching with both section rules, or with the rule of
  // the fewest branches only) for tests that check each is complete.
  enum class RunKinds { kAll, kCanonicalOnly, kNicheOnly, kNicheFewestOnly };
  explicit ExactSearch(const Instance& instance, RunKinds kinds = RunKinds::kAll);
  ~ExactSearch();
  // Looks for a packing of height <= capacity, within the step budget.
  SearchOutcome within(uint64_t capacity, StepCounter& steps, std::vector<uint64_t>& offsets);

  struct Shared;

 private:
  std::unique_ptr<Shared> shared_;
  RunKinds kinds_;
};

// Whether the exact search takes on the instance. Larger ones keep their
// greedy placement: the search's cost per step and its memory (the lists of
// overlapping items and of section members) grow with the instance.
bool searchable(const Instance& instance);
inline constexpr uint32_t kMaxSearchItems = 4096;
inline constexpr uint64_t kMaxSearchEntries = uint64_t{1} << 23;  // per list kind

}  // namespace stowage::ir::packing
