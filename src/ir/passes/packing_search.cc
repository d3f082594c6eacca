// The exact search of the packer: does a packing of height <= capacity exist?
//
// It enumerates canonical packings only: every item rests on the highest item
// below it that overlaps it in time (or on 0), and items are placed in order of
// (offset, rank), so each canonical packing is built once. Any packing can be
// turned into a canonical one no higher by letting items fall, so the search is
// complete. Each node places one of the unplaced items at its lowest feasible
// offset; what prunes the tree (see `enter` and `feasible`):
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
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// A step is one placement plus one per this many entries (items, sections,
// overlaps) the search visited since the previous step, so that steps track
// time on large instances as well as small ones.
constexpr uint64_t kWorkPerStep = 64;

// Compressed lists: row r is data[start[r] .. start[r + 1]).
struct Rows {
  std::vector<uint32_t> start{0};
  std::vector<uint32_t> data;
  std::span<const uint32_t> row(uint32_t r) const {
    return {data.data() + start[r], data.data() + start[r + 1]};
  }
  void end_row() { start.push_back(static_cast<uint32_t>(data.size())); }
};

// Static rankings tried in turn. Keys: T, the crowding of the item's most
// crowded moment; W, its lifetime; A, its area (bytes x time). Ties go to the
// next key, then to the item's number. Returns rank_of[item] per ranking.
std::vector<std::vector<uint32_t>> rankings(const Instance& in) {
  const uint32_t n = in.count();
  const std::vector<uint64_t> crowd = item_crowding(in);
  using Key = unsigned __int128;
  auto area = [&](uint32_t i) { return static_cast<Key>(in.size[i]) * in.lifetime(i); };
  auto t = [&](uint32_t i) { return static_cast<Key>(crowd[i]); };
  auto w = [&](uint32_t i) { return static_cast<Key>(in.lifetime(i)); };
  auto by = [&](auto first, auto second, auto third) {
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (first(a) != first(b)) return first(a) > first(b);
      if (second(a) != second(b)) return second(a) > second(b);
      if (third(a) != third(b)) return third(a) > third(b);
      return a < b;
    });
    std::vector<uint32_t> rank_of(n);
    for (uint32_t r = 0; r < n; ++r) rank_of[order[r]] = r;
    return rank_of;
  };
  return {by(w, area, t), by(t, area, w), by(t, w, area)};
}

}  // namespace

// What every search of one instance shares.
struct ExactSearch::Shared {
  const Instance& in;
  Rows overlaps;  // per item: the items alive at a common moment
  Rows members;   // per section: its items
  std::vector<std::vector<uint32_t>> rank_of;

  explicit Shared(const Instance& instance) : in(instance), rank_of(rankings(instance)) {
    const uint32_t n = in.count(), sections = in.section_count();
    std::vector<std::vector<uint32_t>> by_section(sections);
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t s = in.first_section[i]; s < in.end_section[i]; ++s) by_section[s].push_back(i);
    for (const std::vector<uint32_t>& row : by_section) {
      members.data.insert(members.data.end(), row.begin(), row.end());
      members.end_row();
    }
    // Two items overlap in time exactly when their section ranges intersect.
    for (uint32_t i = 0; i < n; ++i) {
      for (uint32_t j = 0; j < n; ++j) {
        if (j != i && in.first_section[j] < in.end_section[i] && in.first_section[i] < in.end_section[j])
          overlaps.data.push_back(j);
      }
      overlaps.end_row();
    }
  }
};

namespace {

// One depth-first search under one ranking.
class Search {
 public:
  Search(const ExactSearch::Shared& shared, const std::vector<uint32_t>& rank_of, uint64_t capacity,
         StepCounter& steps)
      : in_(shared.in), overlaps_(shared.overlaps), members_(shared.members), rank_of_(rank_of),
        capacity_(capacity), steps_(steps) {}

  SearchOutcome run(std::vector<uint64_t>& offsets) {
    const uint32_t n = in_.count(), sections = in_.section_count();
    offset_.assign(n, kUnplaced);
    lowest_.assign(n, 0);
    solution_.assign(n, 0);
    remaining_.assign(in_.section_total.begin(), in_.section_total.end());
    floor_.assign(sections, 0);
    at_floor_.assign(sections, 0);
    crossing_.assign(sections, 0);
    for (uint32_t s = 0; s < sections; ++s) at_floor_[s] = static_cast<uint32_t>(members_.row(s).size());
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t s = in_.first_section[i]; s + 1 < in_.end_section[i]; ++s) ++crossing_[s];
    for (uint64_t total : remaining_)
      if (total > capacity_) return SearchOutcome::kInfeasible;

    parts_.push_back(Part{0, sections, {}});
    for (uint32_t i = 0; i < n; ++i) parts_.back().items.push_back(i);
    std::vector<uint32_t> borders;
    for (uint32_t s = 0; s + 1 < sections; ++s)
      if (crossing_[s] == 0) borders.push_back(s + 1);
    push_pieces(0, borders, 0, kNoRank);
    const Result result = search();
    if (result == Result::kStopped) return SearchOutcome::kStopped;
    if (result == Result::kNotFound) return SearchOutcome::kInfeasible;
    offsets = solution_;
    return SearchOutcome::kFound;
  }

 private:
  enum class Result { kFound, kNotFound, kStopped, kNone };
  // A run of sections and the unplaced items living in them; no unplaced
  // item outside it lives in them.
  struct Part {
    uint32_t section_begin, section_end;
    std::vector<uint32_t> items;
  };
  struct LowestChange {
    uint32_t item;
    uint64_t old;
  };
  struct FloorChange {
    uint32_t section, old_count;
    uint64_t old;
  };
  struct Mark {
    size_t lowest, floor;
  };
  // The depth-first search keeps its own stack (deep searches would overflow
  // the thread's). A node frame tries the candidates of one part in turn; a
  // pieces frame solves the independent pieces of a split one after another.
  struct Frame {
    bool node;
    uint32_t part;          // node: the part searched; pieces: the first piece
    uint32_t parts_end;     // pieces: one past the last piece
    uint32_t first_part = 0;  // pieces: where its pieces begin in parts_
    uint64_t last_offset;   // the (offset, rank) of the item placed last
    uint32_t last_rank;
    bool entered = false;   // node: candidates computed
    size_t next = 0, stop = 0, base = 0;  // node: candidates_[base, stop), next to try
    uint32_t item = kNoRank;              // node: the candidate placed while a child runs
    Mark mark{0, 0};
  };

  bool placed(uint32_t i) const { return offset_[i] != kUnplaced; }

  // (offset, rank) order of placement.
  bool before(uint64_t offset_a, uint32_t rank_a, uint64_t offset_b, uint32_t rank_b) const {
    return offset_a != offset_b ? offset_a < offset_b : rank_a < rank_b;
  }

  // Runs the frames until the stack is empty; returns the outcome of the root.
  Result search() {
    Result result = Result::kNone;  // what the frame popped last returned
    while (!frames_.empty()) {
      result = frames_.back().node ? step_node(result) : step_pieces(result);
    }
    return result;
  }

  // One move of the pieces frame on top, given what its child returned.
  Result step_pieces(Result child) {
    Frame& f = frames_.back();
    if (child == Result::kNotFound || child == Result::kStopped) return pop_pieces(child);
    if (f.part < f.parts_end) {
      const uint32_t piece = f.part++;
      push_node(piece, f.last_offset, f.last_rank);
      return Result::kNone;
    }
    record();  // the pieces recorded theirs; these are the items placed before
    return pop_pieces(Result::kFound);
  }

  // One move of the node frame on top: depth-first search over the canonical
  // completions of its part, after the item of rank `last_rank` was placed at
  // `last_offset`.
  Result step_node(Result child) {
    Frame& f = frames_.back();
    if (!f.entered) {
      if (const Result early = enter(f); early != Result::kNone) return pop_node(early);
    } else if (f.item != kNoRank) {
      unplace(f.item, f.mark);
      f.item = kNoRank;
      if (child != Result::kNotFound) return pop_node(child);
    }
    while (f.next < f.stop) {
      if (!steps_.take(1 + work_ / kWorkPerStep)) return pop_node(Result::kStopped);
      work_ %= kWorkPerStep;
      const uint32_t i = candidates_[f.next++];
      const uint64_t at = lowest_[i];
      const Mark mark = place(i);
      if (!feasible(parts_[f.part], at)) {
        unplace(i, mark);
        continue;
      }
      f.item = i;
      f.mark = mark;
      // Continue in the same part, or in its pieces where i was the last
      // unplaced item crossing a border.
      borders_.clear();
      for (uint32_t s = in_.first_section[i]; s + 1 < in_.end_section[i]; ++s)
        if (crossing_[s] == 0) borders_.push_back(s + 1);
      const uint32_t part = f.part;  // f dangles once a frame is pushed
      if (borders_.empty()) {
        push_node(part, at, rank_of_[i]);
      } else {
        push_pieces(part, borders_, at, rank_of_[i]);
      }
      return Result::kNone;
    }
    return pop_node(Result::kNotFound);
  }

  // Computes the node's candidates: unplaced items allowed to come next in
  // (offset, rank) order, below the lowest top any unplaced item can reach
  // (an item placed at or above it would leave room below for that one:
  // dominance). Returns kNone to go on, or the node's result.
  Result enter(Frame& f) {
    f.entered = true;
    f.base = f.next = candidates_.size();
    const Part& part = parts_[f.part];
    uint64_t lowest_top = kUnplaced;
    bool any = false;
    work_ += part.items.size();
    for (uint32_t i : part.items) {
      if (placed(i)) continue;
      any = true;
      const uint64_t top = lowest_[i] + in_.size[i];
      if (top > capacity_) return Result::kNotFound;  // lowest_ only rises further down
      lowest_top = std::min(lowest_top, top);
      if (f.last_rank == kNoRank || before(f.last_offset, f.last_rank, lowest_[i], rank_of_[i]))
        candidates_.push_back(i);
    }
    if (!any) {
      record();
      return Result::kFound;
    }
    auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(f.base);
    candidates_.erase(std::remove_if(first, candidates_.end(), [&](uint32_t i) { return lowest_[i] >= lowest_top; }),
                      candidates_.end());
    std::sort(first, candidates_.end(), [&](uint32_t a, uint32_t b) {
      return before(lowest_[a], rank_of_[a], lowest_[b], rank_of_[b]);
    });
    f.stop = candidates_.size();
    return Result::kNone;
  }

  void push_node(uint32_t part, uint64_t last_offset, uint32_t last_rank) {
    Frame f;
    f.node = true;
    f.part = part;
    f.parts_end = part;
    f.last_offset = last_offset;
    f.last_rank = last_rank;
    frames_.push_back(f);
  }

  Result pop_node(Result result) {
    if (frames_.back().entered) candidates_.resize(frames_.back().base);
    frames_.pop_back();
    return result;
  }

  // Splits `part` at the borders into pieces holding its unplaced items, and
  // pushes a frame solving them in turn.
  void push_pieces(uint32_t part, const std::vector<uint32_t>& borders, uint64_t last_offset, uint32_t last_rank) {
    std::vector<Part> pieces;
    uint32_t begin = parts_[part].section_begin;
    for (size_t b = 0; b <= borders.size(); ++b) {
      const uint32_t end = b < borders.size() ? borders[b] : parts_[part].section_end;
      Part piece{begin, end, {}};
      for (uint32_t i : parts_[part].items)
        if (!placed(i) && in_.first_section[i] >= begin && in_.first_section[i] < end) piece.items.push_back(i);
      begin = end;
      if (!piece.items.empty()) pieces.push_back(std::move(piece));
    }
    Frame f;
    f.node = false;
    f.part = f.first_part = static_cast<uint32_t>(parts_.size());
    for (Part& piece : pieces) parts_.push_back(std::move(piece));
    f.parts_end = static_cast<uint32_t>(parts_.size());
    f.last_offset = last_offset;
    f.last_rank = last_rank;
    frames_.push_back(f);
  }

  Result pop_pieces(Result result) {
    // Its pieces are the last parts made: those of frames above it are gone.
    parts_.resize(frames_.back().first_part);
    frames_.pop_back();
    return result;
  }

  // Section bounds: the unplaced items of a section all lie above its floor
  // (the lowest offset any of them can take) and above `at` (offsets never
  // decrease), so their bytes must fit between there and the capacity.
  bool feasible(const Part& part, uint64_t at) {
    work_ += part.section_end - part.section_begin;
    for (uint32_t s = part.section_begin; s < part.section_end; ++s) {
      if (remaining_[s] == 0) continue;
      if (std::max(at, floor_[s]) + remaining_[s] > capacity_) return false;
    }
    return true;
  }

  Mark place(uint32_t i) {
    const Mark mark{lowest_changes_.size(), floor_changes_.size()};
    const uint64_t at = lowest_[i], top = at + in_.size[i];
    offset_[i] = at;
    placed_stack_.push_back(i);
    for (uint32_t s = in_.first_section[i]; s < in_.end_section[i]; ++s) {
      remaining_[s] -= in_.size[i];
      if (floor_[s] == at) leave_floor(s);
    }
    for (uint32_t s = in_.first_section[i]; s + 1 < in_.end_section[i]; ++s) --crossing_[s];
    work_ += 2 * (in_.end_section[i] - in_.first_section[i]) + overlaps_.row(i).size();
    for (uint32_t other : overlaps_.row(i)) {
      if (placed(other)) continue;
      const uint64_t raised = align_up(top, in_.align[other]);
      const uint64_t old = lowest_[other];
      if (raised <= old) continue;
      lowest_changes_.push_back({other, old});
      lowest_[other] = raised;
      work_ += in_.end_section[other] - in_.first_section[other];
      for (uint32_t s = in_.first_section[other]; s < in_.end_section[other]; ++s)
        if (floor_[s] == old) leave_floor(s);
    }
    // Sections whose floor lost its last item: find the new floor.
    for (uint32_t s : emptied_floors_) {
      uint64_t floor = kUnplaced;
      uint32_t count = 0;
      work_ += members_.row(s).size();
      for (uint32_t member : members_.row(s)) {
        if (placed(member)) continue;
        if (lowest_[member] < floor) {
          floor = lowest_[member];
          count = 0;
        }
        count += lowest_[member] == floor;
      }
      if (count == 0) continue;  // no unplaced item left: remaining_ is 0
      floor_changes_.push_back({s, at_floor_[s], floor_[s]});
      floor_[s] = floor;
      at_floor_[s] = count;
    }
    emptied_floors_.clear();
    return mark;
  }

  // An unplaced item of section s whose lowest offset was the floor rose or
  // was placed.
  void leave_floor(uint32_t s) {
    floor_changes_.push_back({s, at_floor_[s], floor_[s]});
    if (--at_floor_[s] == 0) emptied_floors_.push_back(s);
  }

  void unplace(uint32_t i, const Mark& mark) {
    while (floor_changes_.size() > mark.floor) {
      const FloorChange& c = floor_changes_.back();
      floor_[c.section] = c.old;
      at_floor_[c.section] = c.old_count;
      floor_changes_.pop_back();
    }
    while (lowest_changes_.size() > mark.lowest) {
      lowest_[lowest_changes_.back().item] = lowest_changes_.back().old;
      lowest_changes_.pop_back();
    }
    for (uint32_t s = in_.first_section[i]; s < in_.end_section[i]; ++s) remaining_[s] += in_.size[i];
    for (uint32_t s = in_.first_section[i]; s + 1 < in_.end_section[i]; ++s) ++crossing_[s];
    offset_[i] = kUnplaced;
    placed_stack_.pop_back();
  }

  // Saves the offsets of the items placed on the current path. Pieces solved
  // earlier were saved at their own leaves and have been unplaced since.
  void record() {
    for (uint32_t i : placed_stack_) solution_[i] = offset_[i];
  }

  const Instance& in_;
  const Rows& overlaps_;
  const Rows& members_;
  const std::vector<uint32_t>& rank_of_;
  const uint64_t capacity_;
  StepCounter& steps_;

  std::vector<uint64_t> offset_;     // kUnplaced until placed
  std::vector<uint64_t> lowest_;     // lowest aligned offset above the placed items it overlaps
  std::vector<uint64_t> solution_;   // written at each leaf
  std::vector<uint64_t> remaining_;  // per section: bytes of its unplaced items
  std::vector<uint64_t> floor_;      // per section: min of lowest_ over its unplaced items
  std::vector<uint32_t> at_floor_;   // per section: how many of them are at the floor
  std::vector<uint32_t> crossing_;   // per border s|s+1: unplaced items living on both sides
  std::vector<uint32_t> emptied_floors_;
  std::vector<uint32_t> placed_stack_;
  std::vector<uint32_t> candidates_;  // a stack: each node frame owns a tail
  std::vector<Frame> frames_;
  std::vector<Part> parts_;  // a stack: each pieces frame owns a tail
  std::vector<uint32_t> borders_;
  std::vector<LowestChange> lowest_changes_;
  std::vector<FloorChange> floor_changes_;
  uint64_t work_ = 0;  // entries visited, not yet charged as steps
};

}  // namespace

bool searchable(const Instance& in) {
  if (in.count() > kMaxSearchItems) return false;
  // Section members: one entry per section an item spans. Overlap pairs: for
  // each item, those whose section range starts before it ends and ends after
  // it starts (with sorted starts and ends, two binary searches).
  uint64_t members = 0;
  std::vector<uint32_t> firsts(in.first_section), ends(in.end_section);
  std::sort(firsts.begin(), firsts.end());
  std::sort(ends.begin(), ends.end());
  uint64_t pairs = 0;
  for (uint32_t i = 0; i < in.count(); ++i) {
    members += in.end_section[i] - in.first_section[i];
    const auto started = std::lower_bound(firsts.begin(), firsts.end(), in.end_section[i]) - firsts.begin();
    const auto ended = std::upper_bound(ends.begin(), ends.end(), in.first_section[i]) - ends.begin();
    pairs += static_cast<uint64_t>(started - ended - 1);
  }
  return members <= kMaxSearchEntries && pairs <= kMaxSearchEntries;
}

ExactSearch::ExactSearch(const Instance& instance) : shared_(std::make_unique<Shared>(instance)) {}
ExactSearch::~ExactSearch() = default;

SearchOutcome ExactSearch::within(uint64_t capacity, StepCounter& steps, std::vector<uint64_t>& offsets) {
  const Instance& in = shared_->in;
  if (in.lower_bound > capacity) return SearchOutcome::kInfeasible;
  // Restarts with a doubling step limit per ranking.
  for (uint64_t limit = 2 * static_cast<uint64_t>(in.count()) + 16;; limit *= 2) {
    for (const std::vector<uint32_t>& rank_of : shared_->rank_of) {
      if (steps.exhausted()) return SearchOutcome::kStopped;
      StepCounter slice = steps.slice(limit);
      const SearchOutcome outcome = Search(*shared_, rank_of, capacity, slice).run(offsets);
      steps.absorb(slice);
      if (outcome != SearchOutcome::kStopped) return outcome;
    }
  }
}

}  // namespace stowage::ir::packing
