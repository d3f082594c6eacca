// The greedy start of the packer: items one at a time, largest first, each in
// a gap left by the items already placed that overlap it in time.
#include <algorithm>
#include <array>
#include <future>
#include <thread>
#include <limits>

#include "packing_internal.h"

namespace stowage::ir::packing {
namespace {

// What the greedy passes share: items in order of birth, and per item the
// range of that order that may overlap it in time (born before it dies, and
// not so early that even the longest lifetime ends before it is born), with
// deaths as ranks so that the tree below holds 32-bit numbers.
struct TimeIndex {
  explicit TimeIndex(const Instance& in) {
    const uint32_t n = in.count();
    by_lower.resize(n);
    for (uint32_t i = 0; i < n; ++i) by_lower[i] = i;
    std::stable_sort(by_lower.begin(), by_lower.end(),
                     [&](uint32_t a, uint32_t b) { return in.lower[a] < in.lower[b]; });
    position.resize(n);
    std::vector<int64_t> sorted_lower(n), uppers(in.upper);
    for (uint32_t p = 0; p < n; ++p) {
      position[by_lower[p]] = p;
      sorted_lower[p] = in.lower[by_lower[p]];
    }
    std::sort(uppers.begin(), uppers.end());
    int64_t longest = 0;
    for (uint32_t i = 0; i < n; ++i) longest = std::max<int64_t>(longest, static_cast<int64_t>(in.lifetime(i)));
    death.resize(n);
    alive_after.resize(n);
    first.resize(n);
    end.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      // Ranks from 1: a placed item j overlaps i when death[j] > alive_after[i].
      const auto rank_of_death = std::lower_bound(uppers.begin(), uppers.end(), in.upper[i]);
      death[i] = static_cast<uint32_t>(rank_of_death - uppers.begin()) + 1;
      const auto dead_by_birth = std::upper_bound(uppers.begin(), uppers.end(), in.lower[i]);
      alive_after[i] = static_cast<uint32_t>(dead_by_birth - uppers.begin());
      end[i] = static_cast<uint32_t>(std::lower_bound(sorted_lower.begin(), sorted_lower.end(), in.upper[i]) -
                                     sorted_lower.begin());
      const int64_t earliest =
          in.lower[i] - longest < in.lower[i] ? in.lower[i] - longest : std::numeric_limits<int64_t>::min();
      first[i] = static_cast<uint32_t>(std::upper_bound(sorted_lower.begin(), sorted_lower.begin() + end[i], earliest) -
                                       sorted_lower.begin());
    }
  }
  std::vector<uint32_t> by_lower, position;
  std::vector<uint32_t> death, alive_after;  // ranks of deaths
  std::vector<uint32_t> first, end;          // per item: the range of by_lower that may overlap it
};

// Finds the placed items that overlap a given item in time in
// O(log n + k log(n / k)) for k answers: a max tree over the birth order
// holding each placed item's death rank (0 while unplaced).
class PlacedIndex {
 public:
  explicit PlacedIndex(const TimeIndex& time) : time_(time) {
    const uint32_t n = static_cast<uint32_t>(time.by_lower.size());
    while (leaves_ < n) leaves_ *= 2;
    tree_.assign(2 * leaves_, 0);
  }

  void insert(uint32_t item) {
    uint32_t node = leaves_ + time_.position[item];
    tree_[node] = time_.death[item];
    for (node /= 2; node >= 1; node /= 2) tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }

  // Calls visit(j) for every placed j alive at some moment that `item` is.
  template <typename Visit>
  void for_each_overlapping(uint32_t item, Visit&& visit) const {
    const uint32_t after = time_.alive_after[item], first = time_.first[item], end = time_.end[item];
    if (first >= end) return;
    // A short range: scan its leaves, in memory order.
    if (end - first <= kScanLimit) {
      const uint32_t* leaf = tree_.data() + leaves_;
      for (uint32_t p = first; p < end; ++p)
        if (leaf[p] > after) visit(time_.by_lower[p]);
      return;
    }
    // Depth first, left child on top: at most two pending nodes per level.
    uint32_t stack[2 * kMaxLevels];
    int top = 0;
    stack[top++] = 1;
    while (top > 0) {
      const uint32_t node = stack[--top];
      if (tree_[node] <= after) continue;
      const int level = 31 - __builtin_clz(node);
      const uint32_t width = leaves_ >> level;
      const uint32_t begin = (node - (1u << level)) * width;
      if (begin >= end || begin + width <= first) continue;
      if (width == 1) {
        visit(time_.by_lower[begin]);
        continue;
      }
      stack[top++] = 2 * node + 1;
      stack[top++] = 2 * node;
    }
  }

 private:
  static constexpr int kMaxLevels = 34;  // leaves_ <= 2^32
  // Up to this many leaves, a plain scan beats the tree's walk.
  static constexpr uint32_t kScanLimit = 2048;
  const TimeIndex& time_;
  uint32_t leaves_ = 1;
  std::vector<uint32_t> tree_;
};

// Groups from this many items pack their greedy passes on two threads.
constexpr uint32_t kParallelGreedyItems = 16384;

struct Occupied {
  uint64_t begin, end;
  // Gaps are found walking up from 0: the order of ranges that begin together does not matter.
  bool operator<(const Occupied& o) const { return begin < o.begin; }
};

// The offset for `size` bytes aligned to `alignment` among occupied ranges.
uint64_t choose_offset(std::vector<Occupied>& occupied, uint64_t size, uint64_t alignment, bool best_fit) {
  std::sort(occupied.begin(), occupied.end());
  uint64_t cursor = 0;  // everything below is occupied or already considered
  uint64_t best_offset = 0, best_slack = std::numeric_limits<uint64_t>::max();
  for (const Occupied& range : occupied) {
    if (range.begin > cursor) {
      const uint64_t start = align_up(cursor, alignment);
      if (start <= range.begin && range.begin - start >= size) {
        if (!best_fit) return start;
        const uint64_t slack = range.begin - start - size;
        if (slack < best_slack) {
          best_slack = slack;
          best_offset = start;
        }
      }
    }
    cursor = std::max(cursor, range.end);
  }
  if (best_slack != std::numeric_limits<uint64_t>::max()) return best_offset;
  return align_up(cursor, alignment);
}

// Items in the given order, each at an aligned gap among the already placed
// items it overlaps in time; `best_fit` picks the tightest gap that holds it,
// otherwise the lowest.
Placement place_greedily(const Instance& in, const TimeIndex& time, std::span<const uint32_t> order, bool best_fit) {
  Placement result;
  result.offsets.assign(in.count(), 0);
  PlacedIndex placed(time);
  std::vector<Occupied> occupied;
  for (uint32_t item : order) {
    occupied.clear();
    placed.for_each_overlapping(item, [&](uint32_t other) {
      occupied.push_back({result.offsets[other], result.offsets[other] + in.size[other]});
    });
    const uint64_t offset = choose_offset(occupied, in.size[item], in.align[item], best_fit);
    result.offsets[item] = offset;
    result.height = std::max(result.height, offset + in.size[item]);
    placed.insert(item);
  }
  return result;
}

}  // namespace

Placement best_greedy_placement(const Instance& in, StepCounter& steps) {
  const uint32_t n = in.count();
  std::vector<uint32_t> by_size(n);
  for (uint32_t i = 0; i < n; ++i) by_size[i] = i;
  std::sort(by_size.begin(), by_size.end(), [&](uint32_t a, uint32_t b) {
    if (in.size[a] != in.size[b]) return in.size[a] > in.size[b];
    if (in.lifetime(a) != in.lifetime(b)) return in.lifetime(a) > in.lifetime(b);
    return a < b;
  });
  // Items of the most crowded moments first: they decide the height.
  const std::vector<uint64_t> crowd = item_crowding(in);
  std::vector<uint32_t> by_crowding = by_size;
  std::stable_sort(by_crowding.begin(), by_crowding.end(),
                   [&](uint32_t a, uint32_t b) { return crowd[a] > crowd[b]; });

  const TimeIndex time(in);
  // The passes are independent: on a large group, the crowding ones run on a
  // second thread. The best is chosen in the same order either way.
  auto crowding_passes = [&] {
    std::array<Placement, 2> placements;
    for (bool best_fit : {false, true}) placements[best_fit] = place_greedily(in, time, by_crowding, best_fit);
    return placements;
  };
  std::future<std::array<Placement, 2>> others;
  const bool parallel = n >= kParallelGreedyItems && std::thread::hardware_concurrency() > 1;
  if (parallel) others = std::async(std::launch::async, crowding_passes);
  Placement best = place_greedily(in, time, by_size, /*best_fit=*/true);
  std::array<Placement, 2> crowding = parallel ? others.get() : crowding_passes();
  steps.charge(3 * uint64_t{n});
  for (Placement& other : crowding)
    if (other.height < best.height) best = std::move(other);
  return best;
}

}  // namespace stowage::ir::packing
