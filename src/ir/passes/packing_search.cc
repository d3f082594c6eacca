// The exact search of the packer: does a packing of height <= capacity exist?
//
// It enumerates canonical packings only: every item rests on the highest item
// below it that overlaps it in time (or on 0). Any packing can be turned into
// a canonical one no higher by letting items fall, so the search is complete.
// Each unplaced item has a lowest offset: just above the placed items alive
// with it. Two branchings build each canonical packing once:
//  - canonical order (`enter`): each node places an item at its lowest offset,
//    items in order of (offset, rank);
//  - niche branching (`enter_niche`): a section with the lowest floor (the
//    tightest, or one with few branches) decides which of its items lies at
//    its floor, or none (then those items rise to the lowest top of an item
//    alive with them, the lowest spot where they can rest). Each choice is
//    among the few items of one section, and leaving a floor empty is a
//    branch whose consequence the section bounds see at once. It packs some
//    instances (MiniMalloc's I) that canonical order does not, and fails on
//    others that it packs.
// What a niche node has left is a set of items, each with a lowest offset,
// and its subtree finds a packing of them whenever one exists (see
// skip_floor); so does a canonical node at the start of a piece.
// What prunes the tree (see `enter` and `floors_fit`):
//  - monotone offsets (canonical order): an item may only follow one of lower
//    (offset, rank);
//  - dominance (canonical order): an item whose lowest offset lies at or above
//    the top of another unplaced item's lowest spot would leave a gap that
//    item could fall into;
//  - section bounds: in each section (every set of items alive at one moment)
//    the unplaced items need their bytes between the capacity and the lowest
//    offset any of them, or any later item, can take; checked incrementally;
//  - decomposition: once no unplaced item spans the border between two
//    sections, the two sides are independent pieces, each searched on its own;
//  - the memo (SubproblemMemo): a piece is a set of items with the lowest
//    offset each may take; one shown to have no packing rules out the same
//    items starting as high or higher, and a packing found is reused;
//  - twins: items of the same sections, size and alignment are placed in the
//    order of their ranks only (any packing can swap them);
//  - hatless items: when the item just placed is alive with no unplaced item
//    and its subtree fails, the later candidates fail too (see step_node);
//  - the bottom rule: at the start of a part, an item alive with all the
//    others at the lowest offset goes there first (see bottom_item).
// Runs of both branchings under several static rankings alternate with short
// runs that shuffle the first choice (see `within`); a run that ends without
// hitting its step limit is a proof.
#include <algorithm>
#include <limits>
#include <tuple>

#include "packing_internal.h"

namespace stowage::ir::packing {
namespace {

constexpr uint64_t kUnplaced = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// The candidate that leaves a section's floor empty (niche branching).
constexpr uint32_t kSkipFloor = kNoRank - 1;
// A step is one placement plus one per this many entries (items, sections,
// overlaps) the search visited since the previous step, so that steps track
// time on large instances as well as small ones.
constexpr uint64_t kWorkPerStep = 64;
// The shortest restart: this many steps per item.
constexpr uint64_t kStepsPerRunPerItem = 256;
// The memo's bound: numbers stored (items and offsets), about 12 bytes each.
constexpr size_t kMemoValues = size_t{1} << 22;

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
// next key, then to the item's number (items are numbered by birth). Returns
// rank_of[item] per ranking.
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
  auto none = [](uint32_t) { return Key{0}; };
  return {by(w, area, t), by(t, area, w), by(t, w, area), by(t, none, none)};
}

}  // namespace

// What every search of one instance shares.
struct ExactSearch::Shared {
  const Instance& in;
  Rows overlaps;  // per item: the items alive at a common moment
  Rows members;   // per section: its items
  std::vector<std::vector<uint32_t>> rank_of;
  // Per ranking, per item: the item ranked just before it among those of the
  // same sections, size and alignment, or kNoRank. Such twins are
  // interchangeable, so the search places them in the order of their ranks
  // only (the order it would try them in anyway).
  std::vector<std::vector<uint32_t>> twin_of;
  SubproblemMemo memo{kMemoValues};

  explicit Shared(const Instance& instance) : in(instance), rank_of(rankings(instance)) {
    const uint32_t n = in.count(), sections = in.section_count();
    std::vector<std::vector<uint32_t>> by_section(sections);
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t s = in.first_section[i]; s < in.end_section[i]; ++s) by_section[s].push_back(i);
    for (const std::vector<uint32_t>& row : by_section) {
      members.data.insert(members.data.end(), row.begin(), row.end());
      members.end_row();
    }
    for (const std::vector<uint32_t>& rank : rank_of) {
      std::vector<uint32_t> order(n), twin(n, kNoRank);
      for (uint32_t i = 0; i < n; ++i) order[i] = i;
      auto key = [&](uint32_t i) {
        return std::make_tuple(in.first_section[i], in.end_section[i], in.size[i], in.align[i], rank[i]);
      };
      std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
      for (uint32_t k = 1; k < n; ++k) {
        const uint32_t a = order[k - 1], b = order[k];
        if (in.first_section[a] == in.first_section[b] && in.end_section[a] == in.end_section[b] &&
            in.size[a] == in.size[b] && in.align[a] == in.align[b])
          twin[b] = a;
      }
      twin_of.push_back(std::move(twin));
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
  // `niche`: niche branching, else canonical order; `fewest`: which section
  // a niche node settles (see enter_niche). `shuffle` (when not 0) seeds the
  // order in which the first item is chosen.
  Search(ExactSearch::Shared& shared, size_t ranking, bool niche, bool fewest, uint64_t capacity,
         StepCounter& steps, uint64_t shuffle)
      : niche_(niche), fewest_(fewest), in_(shared.in), overlaps_(shared.overlaps), members_(shared.members),
        twin_(shared.twin_of[ranking]), memo_(shared.memo), rank_of_(shared.rank_of[ranking]), capacity_(capacity),
        steps_(steps), random_(shuffle) {}

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
    push_pieces(0, borders);
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
  static constexpr uint32_t kNoPiece = std::numeric_limits<uint32_t>::max();
  // The depth-first search keeps its own stack (deep searches would overflow
  // the thread's). A node frame tries the candidates of one part in turn; a
  // pieces frame solves the independent pieces of a split one after another.
  struct Frame {
    bool node;
    uint32_t part;          // node: the part searched; pieces: the next piece
    uint32_t parts_end;     // pieces: one past the last piece
    uint32_t first_part = 0;  // pieces: where its pieces begin in parts_
    uint32_t waiting = kNoPiece;  // pieces: the piece whose search runs
    uint64_t last_offset = 0;  // node: the (offset, rank) of the item placed last in its piece
    uint32_t last_rank = kNoRank;
    bool entered = false;   // node: candidates computed
    size_t next = 0, stop = 0, base = 0;  // node: candidates_[base, stop), next to try
    uint32_t item = kNoRank;  // node: the candidate placed while a child runs
    Mark mark{0, 0};
    bool settles = false;   // node: a failure of `item` is the node's
    bool forced = false;    // node: its one candidate goes to the bottom (see bottom_item)
    uint32_t section = 0;   // node, niche branching: the section whose floor is decided
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

  // One move of the pieces frame on top, given what its child returned. Each
  // piece is a sub-problem of its own: the memo may know it already; else it
  // is searched afresh (its own canonical order, from no last item) and what
  // is learnt goes to the memo.
  Result step_pieces(Result child) {
    Frame& f = frames_.back();
    if (f.waiting != kNoPiece) {
      const uint32_t piece = f.waiting;
      f.waiting = kNoPiece;
      if (child == Result::kStopped) return pop_pieces(child);
      remember(piece, child == Result::kFound);
      if (child == Result::kNotFound) return pop_pieces(child);
    }
    while (f.part < f.parts_end) {
      const uint32_t piece = f.part++;
      const SubproblemMemo::Known known = recall(piece);
      if (known == SubproblemMemo::Known::kInfeasible) return pop_pieces(Result::kNotFound);
      if (known == SubproblemMemo::Known::kSolved) continue;
      f.waiting = piece;
      push_node(piece, 0, kNoRank);  // f dangles from here
      return Result::kNone;
    }
    record();  // the pieces recorded theirs; these are the items placed before
    return pop_pieces(Result::kFound);
  }

  // The memo's key of a piece: its items, sorted, and their lowest offsets.
  void make_key(uint32_t piece) {
    key_items_ = parts_[piece].items;  // all unplaced: the piece was just cut
    std::sort(key_items_.begin(), key_items_.end());
    key_values_.clear();
    for (uint32_t i : key_items_) key_values_.push_back(lowest_[i]);
    work_ += 4 * key_items_.size();
  }

  SubproblemMemo::Known recall(uint32_t piece) {
    make_key(piece);
    const SubproblemMemo::Known known = memo_.find(key_items_, key_values_, capacity_, memo_offsets_);
    if (known == SubproblemMemo::Known::kSolved) {
      for (size_t k = 0; k < key_items_.size(); ++k) solution_[key_items_[k]] = memo_offsets_[k];
    }
    return known;
  }

  // After the search of a piece, its items are unplaced again and their
  // lowest offsets are as when it began.
  void remember(uint32_t piece, bool solved) {
    make_key(piece);
    if (!solved) {
      memo_.add(key_items_, key_values_, capacity_, false);
      return;
    }
    uint64_t height = 0;
    for (size_t k = 0; k < key_items_.size(); ++k) {
      key_values_[k] = solution_[key_items_[k]];
      height = std::max(height, key_values_[k] + in_.size[key_items_[k]]);
    }
    memo_.add(key_items_, key_values_, height, true);
  }

  // One move of the node frame on top: depth-first search over the canonical
  // completions of its part, after the item of rank `last_rank` was placed at
  // `last_offset`.
  Result step_node(Result child) {
    Frame& f = frames_.back();
    if (!f.entered) {
      if (const Result early = enter(f); early != Result::kNone) return pop_node(early);
    } else if (f.item == kSkipFloor) {
      restore(f.mark);
      f.item = kNoRank;
      if (child != Result::kNotFound) return pop_node(child);
    } else if (f.item != kNoRank) {
      unplace(f.item, f.mark);
      f.item = kNoRank;
      if (child != Result::kNotFound) return pop_node(child);
      if (f.settles) return pop_node(Result::kNotFound);
    }
    while (f.next < f.stop) {
      if (!steps_.take(1 + work_ / kWorkPerStep)) return pop_node(Result::kStopped);
      work_ %= kWorkPerStep;
      const uint32_t i = candidates_[f.next++];
      if (i == kSkipFloor) {
        Mark mark;
        if (!skip_floor(f.section, mark)) continue;
        if (!floors_fit(mark)) {
          restore(mark);
          continue;
        }
        f.item = i;
        f.mark = mark;
        f.settles = false;
        push_node(f.part, 0, 0);  // niche nodes keep no order; 0: not a part's start
        return Result::kNone;
      }
      const uint64_t at = lowest_[i];
      const Mark mark = place(i);
      // Nothing unplaced is alive with i: where i goes changes nothing for the
      // others. A completion after any later candidate would stay one with i
      // moved down first to where it is now, so if i fails, the node fails.
      // Not where the first choice is shuffled: later candidates there are not
      // later in (offset, rank) order. Niche nodes keep no order: a completion
      // of a later branch, with i at its lowest offset, is one of this branch.
      const bool settles = hatless_ && !(random_ != 0 && placed_stack_.size() == 1);
      if (!floors_fit(mark)) {
        unplace(i, mark);
        if (settles) return pop_node(Result::kNotFound);
        continue;
      }
      f.item = i;
      f.mark = mark;
      f.settles = settles;
      // Continue in the same part, or in its pieces where i was the last
      // unplaced item crossing a border.
      borders_.clear();
      for (uint32_t s = in_.first_section[i]; s + 1 < in_.end_section[i]; ++s)
        if (crossing_[s] == 0) borders_.push_back(s + 1);
      const uint32_t part_index = f.part;  // f dangles once a frame is pushed
      if (borders_.empty()) {
        // After an item placed under the bottom rule, every unplaced item of
        // the part starts above it: no order to keep, as at a piece's start.
        push_node(part_index, at, frames_.back().forced ? kNoRank : rank_of_[i]);
      } else {
        push_pieces(part_index, borders_);
      }
      return Result::kNone;
    }
    return pop_node(Result::kNotFound);
  }

  // Computes the node's candidates: unplaced items allowed to come next in
  // (offset, rank) order, below the lowest top any unplaced item can reach
  // (an item placed at or above it would leave room below for that one:
  // dominance). Also the largest bytes left in a section before and after
  // each point of the part, for the section bounds. Returns kNone to go on,
  // or the node's result.
  Result enter(Frame& f) {
    f.entered = true;
    f.base = f.next = candidates_.size();
    const Part& part = parts_[f.part];
    if (f.last_rank == kNoRank) {
      const uint32_t j = bottom_item(part);
      if (j != kNoRank) {
        const uint64_t top = lowest_[j] + in_.size[j];
        if (top > capacity_) return Result::kNotFound;
        candidates_.push_back(j);
        f.stop = candidates_.size();
        f.forced = true;
        return Result::kNone;
      }
    }
    if (niche_) return enter_niche(f);
    uint64_t lowest_top = kUnplaced;
    bool any = false;
    work_ += part.items.size();
    for (uint32_t i : part.items) {
      if (placed(i)) continue;
      any = true;
      const uint64_t top = lowest_[i] + in_.size[i];
      if (top > capacity_) return Result::kNotFound;  // lowest_ only rises further down
      lowest_top = std::min(lowest_top, top);
      if (twin_[i] != kNoRank && !placed(twin_[i])) continue;
      if (f.last_rank == kNoRank || before(f.last_offset, f.last_rank, lowest_[i], rank_of_[i]))
        candidates_.push_back(i);
    }
    if (!any) {
      record();
      return Result::kFound;
    }
    // prefix[k]: max bytes left over sections [begin, begin + k);
    // suffix[k]: over [begin + k, end).
    const uint32_t width = part.section_end - part.section_begin;
    work_ += 2 * width;
    room_.resize(2 * (width + 1));
    uint64_t* prefix = room_.data();
    uint64_t* suffix = prefix + width + 1;
    prefix[0] = suffix[width] = 0;
    for (uint32_t k = 0; k < width; ++k) prefix[k + 1] = std::max(prefix[k], remaining_[part.section_begin + k]);
    for (uint32_t k = width; k-- > 0;) suffix[k] = std::max(suffix[k + 1], remaining_[part.section_begin + k]);
    // Section bounds, cheap part: the sections a candidate does not cover keep
    // their bytes, all to be placed at or above the candidate's offset.
    // Dominance: below the lowest top.
    auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(f.base);
    const auto cannot_come_next = [&](uint32_t i) {
      const uint64_t at = lowest_[i];
      if (at >= lowest_top) return true;
      const uint64_t outside = std::max(prefix[in_.first_section[i] - part.section_begin],
                                        suffix[in_.end_section[i] - part.section_begin]);
      return at + outside > capacity_;
    };
    candidates_.erase(std::remove_if(first, candidates_.end(), cannot_come_next), candidates_.end());
    std::sort(first, candidates_.end(), [&](uint32_t a, uint32_t b) {
      return before(lowest_[a], rank_of_[a], lowest_[b], rank_of_[b]);
    });
    f.stop = candidates_.size();
    if (random_ != 0 && placed_stack_.empty()) shuffle(first, candidates_.end());
    return Result::kNone;
  }

  // Niche branching: placements follow no order. The node takes a section of
  // the part with the lowest floor f and branches on which of its items lies
  // at f, in rank order, and last on none of them (see skip_floor). Every
  // unplaced item of the part has its lowest offset at f or above, so one
  // placed at f lies below nothing unplaced: it only raises the items alive
  // with it, to its top, as in any packing where it lies at f. Two items of
  // the section cannot both lie at f, so each packing follows one branch
  // only. Among the sections at the lowest floor, scanned in time order, one
  // replaces the one kept when it has less room left above its floor; or,
  // with `fewest_`, when its room is under a quarter of the kept one's, or
  // under four times it with fewer items at the floor (fewer branches). Runs
  // alternate between the two rules: both settle all sections, and which of
  // them meets a packing sooner varies.
  Result enter_niche(Frame& f) {
    const Part& part = parts_[f.part];
    bool any = false;
    work_ += part.items.size();
    for (uint32_t i : part.items) {
      if (placed(i)) continue;
      any = true;
      if (lowest_[i] + in_.size[i] > capacity_) return Result::kNotFound;
    }
    if (!any) {
      record();
      return Result::kFound;
    }
    uint32_t best = kNoRank;
    uint64_t best_floor = 0, best_room = 0;
    work_ += part.section_end - part.section_begin;
    for (uint32_t s = part.section_begin; s < part.section_end; ++s) {
      if (remaining_[s] == 0) continue;
      const uint64_t room = capacity_ - floor_[s] - remaining_[s];  // the section bounds hold
      bool replaces = best == kNoRank || floor_[s] < best_floor;
      if (!replaces && floor_[s] == best_floor) {
        using Wide = unsigned __int128;  // four times a room may pass 2^64
        replaces = !fewest_ ? room < best_room
                            : Wide{room} * 4 < best_room ||
                                  (room < Wide{best_room} * 4 && at_floor_[s] < at_floor_[best]);
      }
      if (replaces) {
        best = s;
        best_floor = floor_[s];
        best_room = room;
      }
    }
    f.section = best;
    work_ += members_.row(best).size();
    for (uint32_t i : members_.row(best)) {
      if (placed(i) || lowest_[i] != best_floor) continue;
      if (twin_[i] != kNoRank && !placed(twin_[i])) continue;
      candidates_.push_back(i);
    }
    auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(f.base);
    std::sort(first, candidates_.end(), [&](uint32_t a, uint32_t b) { return rank_of_[a] < rank_of_[b]; });
    if (random_ != 0 && placed_stack_.empty()) shuffle(first, candidates_.end());
    candidates_.push_back(kSkipFloor);
    f.stop = candidates_.size();
    return Result::kNone;
  }

  // The niche branch where no item of section s lies at its floor f, the
  // lowest of the part. Take a packing of the part where every item lies at
  // its lowest offset or on top of another unplaced item alive with it (any
  // packing of the part becomes one by letting its items fall, no lower than
  // their lowest offsets). An item at f in s lies higher there, so on top of
  // an unplaced item k alive with it: at least lowest[k] + size[k] (more than
  // f), rounded up to its alignment. Raising it there keeps that packing, and
  // it stays one of that kind. Returns false, with nothing changed, when an
  // item at f has no such k: it cannot leave the floor.
  bool skip_floor(uint32_t s, Mark& mark) {
    mark = Mark{lowest_changes_.size(), floor_changes_.size()};
    const uint64_t f = floor_[s];
    raised_.clear();  // all bounds first: they read the lowest offsets before any rises
    work_ += members_.row(s).size();
    for (uint32_t j : members_.row(s)) {
      if (placed(j) || lowest_[j] != f) continue;
      uint64_t next = kUnplaced;
      work_ += overlaps_.row(j).size();
      for (uint32_t k : overlaps_.row(j))
        if (!placed(k)) next = std::min(next, lowest_[k] + in_.size[k]);
      if (next == kUnplaced) return false;
      raised_.push_back({j, align_up(next, in_.align[j])});
    }
    for (const Rise& r : raised_) raise(r.item, r.to);
    settle_floors();
    return true;
  }

  // At the start of a part (no order to keep), an unplaced item alive with
  // every other unplaced item of the part, at the lowest offset any of them
  // can take, goes there first: in any packing of the part, nothing is beside
  // it, so moving it down to that offset and the items that were below it up
  // by its size gives a packing too (when its size keeps their alignment).
  // The lowest numbered such item, or kNoRank.
  uint32_t bottom_item(const Part& part) {
    uint64_t low = kUnplaced, align = 1;
    uint32_t unplaced = 0;
    for (uint32_t i : part.items) {
      if (placed(i)) continue;
      ++unplaced;
      low = std::min(low, lowest_[i]);
      align = std::max(align, in_.align[i]);
    }
    work_ += part.items.size();
    uint32_t best = kNoRank;
    for (uint32_t i : part.items) {
      if (placed(i) || lowest_[i] != low || (best != kNoRank && i > best)) continue;
      if (align > 1 && !shifts_keep_alignment(part, in_.size[i])) return kNoRank;
      uint32_t beside = 0;
      for (uint32_t other : overlaps_.row(i)) beside += !placed(other);
      work_ += overlaps_.row(i).size();
      if (beside + 1 == unplaced) best = i;
    }
    return best;
  }

  bool shifts_keep_alignment(const Part& part, uint64_t shift) const {
    for (uint32_t k : part.items)
      if (!placed(k) && shift % in_.align[k] != 0) return false;
    return true;
  }

  // A Fisher-Yates shuffle driven by splitmix64: the same seed, the same order.
  void shuffle(std::vector<uint32_t>::iterator begin, std::vector<uint32_t>::iterator end) {
    for (auto n = end - begin; n > 1; --n) {
      uint64_t z = (random_ += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      std::iter_swap(begin + (n - 1), begin + static_cast<std::ptrdiff_t>(z % static_cast<uint64_t>(n)));
    }
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
  void push_pieces(uint32_t part, const std::vector<uint32_t>& borders) {
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
    work_ += parts_[part].items.size() * (borders.size() + 1);
    Frame f;
    f.node = false;
    f.part = f.first_part = static_cast<uint32_t>(parts_.size());
    for (Part& piece : pieces) parts_.push_back(std::move(piece));
    f.parts_end = static_cast<uint32_t>(parts_.size());
    frames_.push_back(f);
  }

  Result pop_pieces(Result result) {
    // Its pieces are the last parts made: those of frames above it are gone.
    parts_.resize(frames_.back().first_part);
    frames_.pop_back();
    return result;
  }

  // Section bounds where floors moved: in a section, the unplaced items lie
  // at or above its floor (the lowest offset any of them can take), so their
  // bytes must fit between there and the capacity. Other sections kept their
  // floor and lost no room since their last check.
  bool floors_fit(const Mark& mark) {
    work_ += floor_changes_.size() - mark.floor;
    for (size_t c = mark.floor; c < floor_changes_.size(); ++c) {
      const uint32_t s = floor_changes_[c].section;
      if (remaining_[s] != 0 && floor_[s] + remaining_[s] > capacity_) return false;
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
    hatless_ = true;
    for (uint32_t other : overlaps_.row(i)) {
      if (placed(other)) continue;
      hatless_ = false;
      const uint64_t raised = align_up(top, in_.align[other]);
      if (raised > lowest_[other]) raise(other, raised);
    }
    settle_floors();
    return mark;
  }

  // Raises the lowest offset of an unplaced item (recorded, for restore).
  void raise(uint32_t item, uint64_t to) {
    const uint64_t old = lowest_[item];
    lowest_changes_.push_back({item, old});
    lowest_[item] = to;
    work_ += in_.end_section[item] - in_.first_section[item];
    for (uint32_t s = in_.first_section[item]; s < in_.end_section[item]; ++s)
      if (floor_[s] == old) leave_floor(s);
  }

  // Sections whose floor lost its last item: find the new floor.
  void settle_floors() {
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
  }

  // An unplaced item of section s whose lowest offset was the floor rose or
  // was placed.
  void leave_floor(uint32_t s) {
    floor_changes_.push_back({s, at_floor_[s], floor_[s]});
    if (--at_floor_[s] == 0) emptied_floors_.push_back(s);
  }

  void unplace(uint32_t i, const Mark& mark) {
    restore(mark);
    for (uint32_t s = in_.first_section[i]; s < in_.end_section[i]; ++s) remaining_[s] += in_.size[i];
    for (uint32_t s = in_.first_section[i]; s + 1 < in_.end_section[i]; ++s) ++crossing_[s];
    offset_[i] = kUnplaced;
    placed_stack_.pop_back();
  }

  // Undoes the rises and floor changes made since `mark`.
  void restore(const Mark& mark) {
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
  }

  // Saves the offsets of the items placed on the current path. Pieces solved
  // earlier were saved at their own leaves and have been unplaced since.
  void record() {
    for (uint32_t i : placed_stack_) solution_[i] = offset_[i];
  }

  const bool niche_;   // niche branching; else canonical (offset, rank) order
  const bool fewest_;  // niche nodes prefer few branches to the least room
  const Instance& in_;
  const Rows& overlaps_;
  const Rows& members_;
  const std::vector<uint32_t>& twin_;
  SubproblemMemo& memo_;
  const std::vector<uint32_t>& rank_of_;
  const uint64_t capacity_;
  StepCounter& steps_;
  uint64_t random_;  // the shuffle's state; 0: no shuffle

  std::vector<uint64_t> offset_;     // kUnplaced until placed
  std::vector<uint64_t> lowest_;     // lowest aligned offset above the placed items it overlaps
  std::vector<uint64_t> solution_;   // written at each leaf
  std::vector<uint64_t> remaining_;  // per section: bytes of its unplaced items
  std::vector<uint64_t> floor_;      // per section: min of lowest_ over its unplaced items
  std::vector<uint32_t> at_floor_;   // per section: how many of them are at the floor
  std::vector<uint32_t> crossing_;   // per border s|s+1: unplaced items living on both sides
  std::vector<uint32_t> emptied_floors_;
  struct Rise {
    uint32_t item;
    uint64_t to;
  };
  std::vector<Rise> raised_;  // skip_floor's items and where they go
  std::vector<uint32_t> placed_stack_;
  std::vector<uint32_t> candidates_;  // a stack: each node frame owns a tail
  std::vector<uint64_t> room_;        // enter's prefix and suffix maxima
  std::vector<Frame> frames_;
  std::vector<Part> parts_;  // a stack: each pieces frame owns a tail
  std::vector<uint32_t> borders_;
  std::vector<LowestChange> lowest_changes_;
  std::vector<FloorChange> floor_changes_;
  std::vector<uint32_t> key_items_;
  std::vector<uint64_t> key_values_, memo_offsets_;
  bool hatless_ = false;  // the item placed last is alive with no unplaced item
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

ExactSearch::ExactSearch(const Instance& instance, RunKinds kinds)
    : shared_(std::make_unique<Shared>(instance)), kinds_(kinds) {}
ExactSearch::~ExactSearch() = default;

namespace {

// The Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, 1, 2, ...: run lengths of a restart
// schedule that wastes at most a logarithmic factor on any instance.
uint64_t luby(uint64_t i) {
  for (;;) {
    uint64_t k = 1;
    while ((uint64_t{1} << k) - 1 < i) ++k;
    if ((uint64_t{1} << k) - 1 == i) return uint64_t{1} << (k - 1);
    i -= (uint64_t{1} << (k - 1)) - 1;
  }
}

}  // namespace

SearchOutcome ExactSearch::within(uint64_t capacity, StepCounter& steps, std::vector<uint64_t>& offsets) {
  const Instance& in = shared_->in;
  if (in.lower_bound > capacity) return SearchOutcome::kInfeasible;
  // Four kinds of runs share the steps: canonical plain and shuffled runs a
  // third each, niche plain and shuffled runs a sixth each (see the top of
  // this file), niche runs alternating between their section rules. Plain
  // runs take the rankings in turn with a step limit that doubles each round.
  // Shuffled runs also take them in turn, but choose the first item in a
  // random order, for a number of steps that follows the Luby sequence: the
  // first choices decide where the large and long-lived items go, and a bad
  // one can cost more than any plain run can afford. The two branchings fail
  // on different instances. A run that ends within its limit settles it.
  const std::vector<std::vector<uint32_t>>& ranks = shared_->rank_of;
  const uint64_t n = in.count();
  constexpr int kKinds = 4;  // canonical plain, canonical shuffled, niche plain, niche shuffled
  uint64_t weight[kKinds] = {2, 2, 1, 1};
  if (kinds_ == RunKinds::kCanonicalOnly) weight[2] = weight[3] = 0;
  if (kinds_ == RunKinds::kNicheOnly || kinds_ == RunKinds::kNicheFewestOnly) weight[0] = weight[1] = 0;
  uint64_t runs[kKinds] = {}, used[kKinds] = {};
  for (;;) {
    if (steps.exhausted()) return SearchOutcome::kStopped;
    int kind = -1;  // the kind furthest behind its share
    for (int k = 0; k < kKinds; ++k)
      if (weight[k] != 0 && (kind < 0 || used[k] * weight[kind] < used[kind] * weight[k])) kind = k;
    const bool plain = kind % 2 == 0, niche = kind >= 2;
    // Niche runs alternate between their two section rules, run by run; each
    // rule meets every ranking and every run length in turn.
    const uint64_t rules = niche ? 2 : 1, run = runs[kind]++, turn = run / rules;
    const size_t ranking = turn % ranks.size();
    uint64_t limit, seed = 0;
    if (plain) {
      const uint64_t round = turn / ranks.size();
      limit = (2 * n + 16) << std::min<uint64_t>(round + 1, 40);
    } else {
      limit = (kStepsPerRunPerItem * n + 1024) * luby(turn + 1);
      seed = run + 1;
    }
    const uint64_t before = steps.used();
    StepCounter slice = steps.slice(limit);
    const bool fewest = kinds_ == RunKinds::kNicheFewestOnly || run % rules == 1;
    const SearchOutcome outcome = Search(*shared_, ranking, niche, fewest, capacity, slice, seed).run(offsets);
    steps.absorb(slice);
    used[kind] += steps.used() - before;
    if (outcome != SearchOutcome::kStopped) return outcome;
  }
}

}  // namespace stowage::ir::packing
