// The exact search of the packer: does a packing of height <= capacity exist?
//
// It enumerates canonical packings only: every item rests on the highest item
// below it that overlaps it in time (or on 0), and items are placed in order of
// (offset, rank), so each canonical packing is built once. Any packing can be
// turned into a canonical one no higher by letting items fall, so the search is
// complete. Each node places one of the unplaced items at its lowest feasible
// offset; what prunes the tree (see `feasible` and `solve`):
//  - monotone offsets: an item may only follow one of lower (offset, rank);
//  - dominance: an item whose lowest offset lies at or above the top of another
//    unplaced item's lowest spot would leave a gap that item could fall into;
//  - section bounds: in each section the unplaced items need their sum of
//    bytes above the lowest offset any of them (or any later item) can take;
//  - decomposition: once no unplaced item spans the border between two
//    sections, the two sides are solved as independent problems.
// The same problem is tried under several static rankings of the items, with a
// step limit that doubles each round (restarts tame the heavy tails of
// depth-first search); a search that ends without hitting its limit is a proof.
#include <algorithm>
#include <limits>

#include "packing_internal.h"

namespace stowage::ir::packing {
namespace {

constexpr uint64_t kUnplaced = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kNoItem = std::numeric_limits<uint64_t>::max();

// Compressed lists: row r is data[start[r] .. start[r + 1]).
struct Rows {
  std::vector<uint32_t> start{0};
  std::vector<uint32_t> data;
  std::span<const uint32_t> row(uint32_t r) const {
    return {data.data() + start[r], data.data() + start[r + 1]};
  }
};

// The instance with items renumbered by rank, so that comparing ranks is
// comparing numbers.
struct RankedInstance {
  std::vector<uint32_t> item;  // rank -> instance item
  std::vector<uint64_t> size, align;
  std::vector<uint32_t> first, end;  // sections of each item
  std::vector<uint64_t> section_total;
  Rows overlaps;  // per rank: the ranks alive at a common moment
  Rows members;   // per section: its ranks
};

RankedInstance rank_instance(const Instance& in, std::span<const uint32_t> order) {
  const uint32_t n = in.count(), sections = in.section_count();
  RankedInstance r;
  r.item.assign(order.begin(), order.end());
  std::vector<uint32_t> rank_of(n);
  for (uint32_t k = 0; k < n; ++k) rank_of[order[k]] = k;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = order[k];
    r.size.push_back(in.size[i]);
    r.align.push_back(in.align[i]);
    r.first.push_back(in.first_section[i]);
    r.end.push_back(in.end_section[i]);
  }
  r.section_total = in.section_total;
  // Members of each section, in rank order.
  std::vector<uint32_t> count(sections + 1, 0);
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t s = r.first[k]; s < r.end[k]; ++s) ++count[s + 1];
  r.members.start.resize(sections + 1);
  for (uint32_t s = 0; s < sections; ++s) r.members.start[s + 1] = r.members.start[s] + count[s + 1];
  r.members.data.resize(r.members.start[sections]);
  std::vector<uint32_t> fill(r.members.start.begin(), r.members.start.end() - 1);
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t s = r.first[k]; s < r.end[k]; ++s) r.members.data[fill[s]++] = k;
  // Two items overlap in time exactly when their section ranges intersect.
  for (uint32_t k = 0; k < n; ++k) {
    for (uint32_t other = 0; other < n; ++other) {
      if (other != k && r.first[other] < r.end[k] && r.first[k] < r.end[other])
        r.overlaps.data.push_back(other);
    }
    r.overlaps.start.push_back(static_cast<uint32_t>(r.overlaps.data.size()));
  }
  return r;
}

class Search {
 public:
  Search(const RankedInstance& r, uint64_t capacity, StepCounter& steps)
      : r_(r), capacity_(capacity), steps_(steps) {}

  SearchOutcome run(std::vector<uint64_t>& offsets_by_rank) {
    const uint32_t n = static_cast<uint32_t>(r_.size.size());
    const uint32_t sections = static_cast<uint32_t>(r_.section_total.size());
    offset_.assign(n, kUnplaced);
    lowest_.assign(n, 0);
    solution_.assign(n, 0);
    remaining_.assign(r_.section_total.begin(), r_.section_total.end());
    floor_.assign(sections, 0);
    dirty_.assign(sections, 0);
    crossing_.assign(sections, 0);
    for (uint32_t k = 0; k < n; ++k)
      for (uint32_t s = r_.first[k]; s + 1 < r_.end[k]; ++s) ++crossing_[s];
    for (uint64_t total : remaining_)
      if (total > capacity_) return SearchOutcome::kInfeasible;

    std::vector<uint32_t> all(n);
    for (uint32_t k = 0; k < n; ++k) all[k] = k;
    std::vector<uint32_t> borders;
    for (uint32_t s = 0; s + 1 < sections; ++s)
      if (crossing_[s] == 0) borders.push_back(s + 1);
    const Result result = solve_parts(Part{0, sections, all}, borders, 0, kNoItem);
    if (result == Result::kStopped) return SearchOutcome::kStopped;
    if (result == Result::kNotFound) return SearchOutcome::kInfeasible;
    offsets_by_rank = solution_;
    return SearchOutcome::kFound;
  }

 private:
  enum class Result { kFound, kNotFound, kStopped };
  // A set of sections and the unplaced items living in them; no unplaced
  // item outside it lives in them.
  struct Part {
    uint32_t section_begin, section_end;
    std::vector<uint32_t> items;
  };
  // Undo records: old values of `lowest_` (kind 0) and `floor_` (kind 1).
  struct Change {
    uint32_t index;
    uint32_t kind;
    uint64_t old;
  };

  bool placed(uint32_t k) const { return offset_[k] != kUnplaced; }

  // Depth-first search over the canonical completions of `part`, given that
  // the last item placed was `last_rank` at `last_offset`.
  Result solve(const Part& part, uint64_t last_offset, uint64_t last_rank) {
    // The lowest top any unplaced item can reach: an item placed at or above
    // it would leave room for that item below (dominance).
    uint64_t lowest_top = kUnplaced;
    bool any = false;
    for (uint32_t k : part.items) {
      if (placed(k)) continue;
      any = true;
      const uint64_t top = lowest_[k] + r_.size[k];
      if (top > capacity_) return Result::kNotFound;  // lowest_ only rises
      lowest_top = std::min(lowest_top, top);
    }
    if (!any) {
      record();
      return Result::kFound;
    }
    const size_t base = candidates_.size();
    for (uint32_t k : part.items) {
      if (placed(k)) continue;
      const uint64_t at = lowest_[k];
      if (at < last_offset || (at == last_offset && (last_rank == kNoItem ? false : k <= last_rank)))
        continue;
      if (at >= lowest_top) continue;
      candidates_.push_back(k);
    }
    std::sort(candidates_.begin() + static_cast<std::ptrdiff_t>(base), candidates_.end(),
              [&](uint32_t a, uint32_t b) { return lowest_[a] != lowest_[b] ? lowest_[a] < lowest_[b] : a < b; });
    const size_t stop = candidates_.size();
    Result result = Result::kNotFound;
    for (size_t c = base; c < stop && result == Result::kNotFound; ++c) {
      const uint32_t k = candidates_[c];
      const uint64_t at = lowest_[k];
      if (!steps_.take()) {
        result = Result::kStopped;
        break;
      }
      const size_t mark = place(k);
      if (feasible(part, at)) result = after_placing(part, k, at);
      unplace(k, mark);
    }
    candidates_.resize(base);
    return result;
  }

  // Continues with `part` after placing k, split where k was the last
  // unplaced item crossing a border.
  Result after_placing(const Part& part, uint32_t k, uint64_t at) {
    std::vector<uint32_t> borders;
    for (uint32_t s = r_.first[k]; s + 1 < r_.end[k]; ++s)
      if (crossing_[s] == 0) borders.push_back(s + 1);
    if (borders.empty()) return solve(part, at, k);
    return solve_parts(part, borders, at, k);
  }

  // Solves the pieces of `part` between the given borders one after another.
  Result solve_parts(const Part& part, const std::vector<uint32_t>& borders, uint64_t last_offset,
                     uint64_t last_rank) {
    uint32_t begin = part.section_begin;
    for (size_t b = 0; b <= borders.size(); ++b) {
      const uint32_t end = b < borders.size() ? borders[b] : part.section_end;
      Part piece{begin, end, {}};
      for (uint32_t k : part.items)
        if (!placed(k) && r_.first[k] >= begin && r_.first[k] < end) piece.items.push_back(k);
      begin = end;
      if (piece.items.empty()) continue;
      const Result result = solve(piece, last_offset, last_rank);
      if (result != Result::kFound) return result;
    }
    record();  // the pieces recorded theirs; these are the items placed before
    return Result::kFound;
  }

  // Section bounds: the unplaced items of a section all lie above its floor
  // (the lowest offset any of them can take) and above `at` (offsets never
  // decrease), so their bytes must fit between there and the capacity.
  bool feasible(const Part& part, uint64_t at) const {
    for (uint32_t s = part.section_begin; s < part.section_end; ++s) {
      if (remaining_[s] == 0) continue;
      if (std::max(at, floor_[s]) + remaining_[s] > capacity_) return false;
    }
    return true;
  }

  size_t place(uint32_t k) {
    const size_t mark = changes_.size();
    const uint64_t at = lowest_[k], top = at + r_.size[k];
    offset_[k] = at;
    placed_stack_.push_back(k);
    ++epoch_;
    for (uint32_t s = r_.first[k]; s < r_.end[k]; ++s) {
      remaining_[s] -= r_.size[k];
      if (floor_[s] == at) mark_dirty(s);
    }
    for (uint32_t s = r_.first[k]; s + 1 < r_.end[k]; ++s) --crossing_[s];
    for (uint32_t other : r_.overlaps.row(k)) {
      if (placed(other)) continue;
      const uint64_t raised = align_up(top, r_.align[other]);
      const uint64_t old = lowest_[other];
      if (raised <= old) continue;
      changes_.push_back({other, 0, old});
      lowest_[other] = raised;
      for (uint32_t s = r_.first[other]; s < r_.end[other]; ++s)
        if (floor_[s] == old) mark_dirty(s);
    }
    for (uint32_t s : dirty_list_) {
      uint64_t floor = kUnplaced;
      for (uint32_t member : r_.members.row(s))
        if (!placed(member)) floor = std::min(floor, lowest_[member]);
      if (floor == kUnplaced || floor == floor_[s]) continue;
      changes_.push_back({s, 1, floor_[s]});
      floor_[s] = floor;
    }
    dirty_list_.clear();
    return mark;
  }

  void unplace(uint32_t k, size_t mark) {
    while (changes_.size() > mark) {
      const Change& c = changes_.back();
      (c.kind == 0 ? lowest_ : floor_)[c.index] = c.old;
      changes_.pop_back();
    }
    for (uint32_t s = r_.first[k]; s < r_.end[k]; ++s) remaining_[s] += r_.size[k];
    for (uint32_t s = r_.first[k]; s + 1 < r_.end[k]; ++s) ++crossing_[s];
    offset_[k] = kUnplaced;
    placed_stack_.pop_back();
  }

  // Saves the offsets of the items placed on the current path. Pieces solved
  // earlier were saved at their own leaves and have been unplaced since.
  void record() {
    for (uint32_t k : placed_stack_) solution_[k] = offset_[k];
  }

  void mark_dirty(uint32_t s) {
    if (dirty_[s] == epoch_) return;
    dirty_[s] = epoch_;
    dirty_list_.push_back(s);
  }

  const RankedInstance& r_;
  const uint64_t capacity_;
  StepCounter& steps_;

  std::vector<uint64_t> offset_;     // per rank, kUnplaced until placed
  std::vector<uint64_t> lowest_;     // per rank: lowest aligned offset above placed overlapping items
  std::vector<uint64_t> solution_;   // per rank, written at each leaf
  std::vector<uint64_t> remaining_;  // per section: bytes of its unplaced items
  std::vector<uint64_t> floor_;      // per section: min of lowest_ over its unplaced items
  std::vector<uint32_t> crossing_;   // per border s|s+1: unplaced items living on both sides
  std::vector<uint64_t> dirty_;      // per section: epoch it was last marked in
  std::vector<uint32_t> dirty_list_;
  uint64_t epoch_ = 0;
  std::vector<uint32_t> placed_stack_;
  std::vector<uint32_t> candidates_;  // a stack: each node owns a tail
  std::vector<Change> changes_;
};

// Static rankings tried in turn. Keys: T, the crowding of the item's most
// crowded moment; W, its lifetime; A, its area (bytes x time). Ties go to the
// next key, then to the item's number.
std::vector<std::vector<uint32_t>> rankings(const Instance& in) {
  const uint32_t n = in.count();
  const std::vector<uint64_t> crowd = item_crowding(in);
  auto area = [&](uint32_t i) { return static_cast<unsigned __int128>(in.size[i]) * in.lifetime(i); };
  auto by = [&](auto first, auto second, auto third) {
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (first(a) != first(b)) return first(a) > first(b);
      if (second(a) != second(b)) return second(a) > second(b);
      if (third(a) != third(b)) return third(a) > third(b);
      return a < b;
    });
    return order;
  };
  auto t = [&](uint32_t i) { return static_cast<unsigned __int128>(crowd[i]); };
  auto w = [&](uint32_t i) { return static_cast<unsigned __int128>(in.lifetime(i)); };
  return {by(w, area, t), by(t, area, w), by(t, w, area)};
}

}  // namespace

SearchOutcome search_within(const Instance& in, uint64_t capacity, StepCounter& steps,
                            std::vector<uint64_t>& offsets) {
  if (in.lower_bound > capacity) return SearchOutcome::kInfeasible;
  std::vector<RankedInstance> ranked;
  for (const std::vector<uint32_t>& order : rankings(in)) ranked.push_back(rank_instance(in, order));
  // Restarts with a doubling step limit per ranking.
  for (uint64_t limit = 2 * static_cast<uint64_t>(in.count()) + 16;; limit *= 2) {
    for (const RankedInstance& r : ranked) {
      if (steps.exhausted()) return SearchOutcome::kStopped;
      StepCounter slice = steps.slice(limit);
      std::vector<uint64_t> by_rank;
      const SearchOutcome outcome = Search(r, capacity, slice).run(by_rank);
      steps.absorb(slice);
      if (outcome == SearchOutcome::kInfeasible) return outcome;
      if (outcome == SearchOutcome::kFound) {
        offsets.assign(in.count(), 0);
        for (uint32_t k = 0; k < by_rank.size(); ++k) offsets[r.item[k]] = by_rank[k];
        return outcome;
      }
    }
  }
}

}  // namespace stowage::ir::packing
