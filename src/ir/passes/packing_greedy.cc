// The greedy start of the packer: items one at a time, largest first, each in
// a gap left by the items already placed that overlap it in time.
#include <algorithm>
#include <limits>

#include "packing_internal.h"

namespace stowage::ir::packing {
namespace {

// Finds the placed items that overlap a given item in time in
// O(log n + k log(n / k)) for k answers: items sorted by birth, and a max tree
// over that order holding each placed item's death.
class PlacedIndex {
 public:
  explicit PlacedIndex(const Instance& in) : in_(in) {
    const uint32_t n = in.count();
    by_lower_.resize(n);
    for (uint32_t i = 0; i < n; ++i) by_lower_[i] = i;
    std::stable_sort(by_lower_.begin(), by_lower_.end(),
                     [&](uint32_t a, uint32_t b) { return in.lower[a] < in.lower[b]; });
    position_.resize(n);
    sorted_lower_.resize(n);
    for (uint32_t p = 0; p < n; ++p) {
      position_[by_lower_[p]] = p;
      sorted_lower_[p] = in.lower[by_lower_[p]];
    }
    leaves_ = 1;
    while (leaves_ < n) leaves_ *= 2;
    tree_.assign(2 * leaves_, kEmpty);
  }

  void insert(uint32_t item) {
    uint32_t node = leaves_ + position_[item];
    tree_[node] = in_.upper[item];
    for (node /= 2; node >= 1; node /= 2) tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }

  // Calls visit(j) for every placed j alive at some moment that `item` is.
  template <typename Visit>
  void for_each_overlapping(uint32_t item, Visit&& visit) {
    const int64_t lower = in_.lower[item];
    // Only items born before `item` dies can overlap it.
    const uint32_t born_before =
        static_cast<uint32_t>(std::lower_bound(sorted_lower_.begin(), sorted_lower_.end(), in_.upper[item]) -
                              sorted_lower_.begin());
    if (born_before == 0) return;
    stack_.clear();
    stack_.push_back({1, 0, leaves_});
    while (!stack_.empty()) {
      Node node = stack_.back();
      stack_.pop_back();
      if (node.begin >= born_before || tree_[node.index] <= lower) continue;
      if (node.end - node.begin == 1) {
        visit(by_lower_[node.begin]);
        continue;
      }
      const uint32_t mid = node.begin + (node.end - node.begin) / 2;
      stack_.push_back({2 * node.index + 1, mid, node.end});
      stack_.push_back({2 * node.index, node.begin, mid});
    }
  }

 private:
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();
  struct Node {
    uint32_t index, begin, end;
  };
  const Instance& in_;
  std::vector<uint32_t> by_lower_, position_;
  std::vector<int64_t> sorted_lower_;
  uint32_t leaves_ = 1;
  std::vector<int64_t> tree_;
  std::vector<Node> stack_;
};

struct Occupied {
  uint64_t begin, end;
  bool operator<(const Occupied& o) const { return begin != o.begin ? begin < o.begin : end < o.end; }
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

}  // namespace

Placement place_greedily(const Instance& in, std::span<const uint32_t> order, bool best_fit) {
  Placement result;
  result.offsets.assign(in.count(), 0);
  PlacedIndex placed(in);
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

  Placement best = place_greedily(in, by_size, /*best_fit=*/true);
  steps.charge(n);
  for (bool best_fit : {false, true}) {
    Placement other = place_greedily(in, by_crowding, best_fit);
    steps.charge(n);
    if (other.height < best.height) best = std::move(other);
  }
  return best;
}

}  // namespace stowage::ir::packing
