// Rectangle packing over time (include/stowage/ir/packing_rectangles.h).
//
// The picture: each atlas is a wall of pixels; an item is a rectangle that
// occupies its pixels over its lifetime, so items alive at a common moment in
// one atlas must not overlap, while items alive at different moments may take
// the same pixels. An atlas is as large as the bounding box of its items.
//
// How:
//  1. A greedy pass places the items one at a time, in a given order. An item
//     looks at every atlas it may join (none of the items it must be apart
//     from is there) and at candidate columns x: 0 and the right edge of every
//     item of that atlas alive with it (bottom-left placement, over time: only
//     items alive at a common moment are obstacles). In each column it takes
//     the lowest row y where its rectangle meets none of them. Of all these
//     positions, and of a new atlas of its own, it takes the one that grows
//     the total area least (then the lowest top, the lowest x, the first
//     atlas). Atlases thus come into being where the apart rule or shapes need
//     them, and each takes the width its items give it.
//  2. Six orders (by area, height, area x lifetime, birth, longest side,
//     width; ties by index) under two width limits (the largest atlas, and
//     the widest item, which keeps atlases from growing sideways) give twelve
//     packings; the smallest is kept (fewer atlases on a tie).
//  3. Ruin and recreate, within a budget of steps: take the items of one
//     atlas, or those alive in a stretch of time around a random item, out;
//     shrink the atlases to what is left; place the items again by the greedy
//     rule, largest first with their areas randomly weighed by 0.7 to 1.3.
//     The result replaces the packing when its total area is no larger (then
//     no more atlases). The random numbers come from a seeded splitmix64, so
//     the same items, budget and seed give the same packing everywhere. It
//     stops early at the lower bound.
//
// The lower bound, the most pixels alive at one moment, ignores shapes and the
// apart rule: it is what one atlas of perfectly fitting shapes would need.
// Shapes alone can force more (a 224 x 224 item and a 56 x 896 item alive at
// different moments need an atlas of at least 224 x 896 to share one), and so
// can the apart rule (three items pairwise apart and alive together need three
// atlases, each at least as large as its item).
#include "stowage/ir/packing_rectangles.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <numeric>
#include <tuple>

#include "stowage/ir/lifetimes.h"

namespace stowage::ir {
namespace {

constexpr uint32_t kNoAtlas = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kMaxExtent = uint64_t{1} << 31;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t area(const RectItem& item) { return item.width * item.height; }  // both at most 2^31

// Whether the item can stand in another's way: it covers pixels at some moment.
bool occupies(const RectItem& item) { return item.width > 0 && item.height > 0 && item.lower < item.upper; }

uint64_t saturate(unsigned __int128 value) {
  return value > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                      : static_cast<uint64_t>(value);
}

struct Atlas {
  uint64_t width = 0;
  uint64_t height = 0;
  std::vector<uint32_t> members;
};

struct State {
  std::vector<RectPlacement> at;  // atlas kNoAtlas while unplaced
  std::vector<Atlas> atlases;

  unsigned __int128 pixels() const {
    unsigned __int128 sum = 0;
    for (const Atlas& a : atlases) sum += static_cast<unsigned __int128>(a.width) * a.height;
    return sum;
  }
  // Smaller total area first, then fewer atlases.
  bool better_than(const State& o) const {
    const auto mine = pixels(), theirs = o.pixels();
    return mine != theirs ? mine < theirs : atlases.size() < o.atlases.size();
  }
};

class Packer {
 public:
  Packer(std::span<const RectItem> items, std::span<const RectApart> apart, const RectOptions& options)
      : items_(items), options_(options), apart_(items.size()), alive_with_(items.size()) {
    const uint32_t n = static_cast<uint32_t>(items.size());
    for (const RectApart& p : apart) {
      apart_[p.a].push_back(p.b);
      apart_[p.b].push_back(p.a);
    }
    for (auto& list : apart_) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    // Who is alive with whom: a sweep over the items in order of birth.
    by_lower_.resize(n);
    std::iota(by_lower_.begin(), by_lower_.end(), 0u);
    std::stable_sort(by_lower_.begin(), by_lower_.end(),
                     [&](uint32_t a, uint32_t b) { return items[a].lower < items[b].lower; });
    for (uint32_t p = 0; p < n; ++p) {
      const uint32_t i = by_lower_[p];
      if (!occupies(items[i])) continue;
      for (uint32_t q = p + 1; q < n && items[by_lower_[q]].lower < items[i].upper; ++q) {
        const uint32_t j = by_lower_[q];
        if (!occupies(items[j]) || !alive_together(items[i].lower, items[i].upper, items[j].lower, items[j].upper))
          continue;
        alive_with_[i].push_back(j);
        alive_with_[j].push_back(i);
      }
    }
  }

  uint64_t steps() const { return steps_; }

  State greedy(std::span<const uint32_t> order, uint64_t width_limit, bool settle) {
    State s;
    s.at.assign(items_.size(), RectPlacement{kNoAtlas, 0, 0});
    for (uint32_t i : order) place(s, i, width_limit, settle);
    return s;
  }

  // Takes items out and places them again; the result, shrunk to its items.
  State ruin_and_recreate(const State& from, uint64_t& random) {
    State s = from;
    std::vector<uint32_t> removed;
    const uint32_t n = static_cast<uint32_t>(items_.size());
    if (s.atlases.size() > 1 && splitmix64(random) % 2 == 0) {
      Atlas& a = s.atlases[splitmix64(random) % s.atlases.size()];
      removed = std::move(a.members);
      a.members.clear();
    } else {
      // A stretch of time from a random item's birth over the next few births.
      const uint32_t p = static_cast<uint32_t>(splitmix64(random) % n);
      const uint32_t count = 1 + static_cast<uint32_t>(splitmix64(random) % std::max<uint32_t>(1, n / 8));
      const int64_t lower = items_[by_lower_[p]].lower;
      int64_t upper = lower;
      for (uint32_t q = p; q < n && q < p + count; ++q) upper = std::max(upper, items_[by_lower_[q]].upper);
      if (upper <= lower) upper = lower == std::numeric_limits<int64_t>::max() ? lower : lower + 1;
      auto taken = [&](uint32_t i) {
        return alive_together(items_[i].lower, items_[i].upper, lower, upper) || i == by_lower_[p];
      };
      for (uint32_t i = 0; i < n; ++i) {
        if (taken(i)) removed.push_back(i);
      }
      for (Atlas& a : s.atlases) std::erase_if(a.members, taken);
    }
    steps_ += removed.size() + 1;
    for (uint32_t i : removed) s.at[i].atlas = kNoAtlas;
    shrink(s);
    std::vector<std::pair<unsigned __int128, uint32_t>> order;
    for (uint32_t i : removed) {
      const uint64_t weight = 70 + splitmix64(random) % 61;
      order.push_back({static_cast<unsigned __int128>(area(items_[i])) * weight, i});
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    const bool settle = splitmix64(random) % 2 == 0;
    for (const auto& [weight, i] : order) place(s, i, options_.max_width, settle);
    shrink(s);
    return s;
  }

  // Each atlas the bounding box of its items; empty atlases go, the others keep their order.
  void shrink(State& s) const {
    std::vector<Atlas> kept;
    for (Atlas& a : s.atlases) {
      if (a.members.empty()) continue;
      a.width = a.height = 0;
      for (uint32_t i : a.members) {
        a.width = std::max(a.width, s.at[i].x + items_[i].width);
        a.height = std::max(a.height, s.at[i].y + items_[i].height);
        s.at[i].atlas = static_cast<uint32_t>(kept.size());
      }
      kept.push_back(std::move(a));
    }
    s.atlases = std::move(kept);
  }

 private:
  struct Candidate {
    uint64_t cost = 0;  // growth of the total area
    bool fresh = false; // a new atlas
    uint64_t top = 0;   // y + height
    uint64_t x = 0;
    uint32_t atlas = 0;
    uint64_t y = 0;
    // On equal growth, an atlas already there before a new one (`settle`), then the lowest top.
    bool better(const Candidate& o, bool settle) const {
      if (settle) return std::tie(cost, fresh, top, x, atlas) < std::tie(o.cost, o.fresh, o.top, o.x, o.atlas);
      return std::tie(cost, top, x, atlas) < std::tie(o.cost, o.top, o.x, o.atlas);
    }
  };

  // The greedy rule: the position (or new atlas) that grows the total area least.
  void place(State& s, uint32_t i, uint64_t width_limit, bool settle) {
    const RectItem& item = items_[i];
    const uint64_t w = item.width, h = item.height;
    const uint32_t atlases = static_cast<uint32_t>(s.atlases.size());
    const uint64_t limit = std::min(options_.max_width, std::max(width_limit, w));
    forbidden_.assign(atlases, 0);
    for (uint32_t j : apart_[i]) {
      if (s.at[j].atlas != kNoAtlas) forbidden_[s.at[j].atlas] = 1;
    }
    if (buckets_.size() < atlases) buckets_.resize(atlases);
    for (uint32_t k = 0; k < atlases; ++k) buckets_[k].clear();
    for (uint32_t j : alive_with_[i]) {
      if (s.at[j].atlas != kNoAtlas) buckets_[s.at[j].atlas].push_back(j);
    }
    Candidate best{w * h, true, h, 0, atlases, 0};  // an atlas of its own
    for (uint32_t k = 0; k < atlases; ++k) {
      if (forbidden_[k]) continue;
      const Atlas& a = s.atlases[k];
      const std::vector<uint32_t>& others = buckets_[k];
      columns_.assign(1, 0);
      for (uint32_t j : others) columns_.push_back(s.at[j].x + items_[j].width);
      std::sort(columns_.begin(), columns_.end());
      columns_.erase(std::unique(columns_.begin(), columns_.end()), columns_.end());
      for (uint64_t x : columns_) {
        if (x + w > limit) break;
        rows_.clear();
        for (uint32_t j : others) {
          const RectPlacement& p = s.at[j];
          if (x < p.x + items_[j].width && p.x < x + w) rows_.push_back({p.y, p.y + items_[j].height});
        }
        steps_ += others.size() + 1;
        std::sort(rows_.begin(), rows_.end());
        uint64_t y = 0;
        for (const auto& [top, bottom] : rows_) {
          if (y + h <= top) break;
          y = std::max(y, bottom);
        }
        if (y + h > options_.max_height) continue;
        const uint64_t grown = std::max(a.width, x + w) * std::max(a.height, y + h);
        Candidate c{grown - a.width * a.height, false, y + h, x, k, y};
        if (c.better(best, settle)) best = c;
      }
    }
    if (best.atlas == atlases) s.atlases.push_back(Atlas{});
    Atlas& a = s.atlases[best.atlas];
    a.width = std::max(a.width, best.x + w);
    a.height = std::max(a.height, best.y + h);
    a.members.push_back(i);
    s.at[i] = RectPlacement{best.atlas, best.x, best.y};
  }

  std::span<const RectItem> items_;
  const RectOptions& options_;
  std::vector<std::vector<uint32_t>> apart_;       // per item
  std::vector<std::vector<uint32_t>> alive_with_;  // per item that occupies pixels: the others that do, alive with it
  std::vector<uint32_t> by_lower_;
  uint64_t steps_ = 0;
  // Scratch space of `place`.
  std::vector<uint8_t> forbidden_;
  std::vector<std::vector<uint32_t>> buckets_;
  std::vector<uint64_t> columns_;
  std::vector<std::pair<uint64_t, uint64_t>> rows_;
};

Status check_input(std::span<const RectItem> items, std::span<const RectApart> apart, const RectOptions& options) {
  if (options.max_width > kMaxExtent || options.max_height > kMaxExtent) {
    return Error(ErrorKind::kInvalidInput, fmt::format("rectangle packing: atlas limits {} x {} exceed 2^31 pixels",
                                                       options.max_width, options.max_height));
  }
  if (items.size() >= kNoAtlas) {
    return Error(ErrorKind::kInvalidInput, fmt::format("rectangle packing: {} items, more than {}", items.size(),
                                                       kNoAtlas - 1));
  }
  for (const RectItem& item : items) {
    if (item.width > options.max_width || item.height > options.max_height) {
      return Error(ErrorKind::kInvalidInput,
                   fmt::format("rectangle packing: item '{}' is {} x {} pixels (width x height), larger than an atlas "
                               "may be ({} x {})", item.id, item.width, item.height, options.max_width,
                               options.max_height));
    }
  }
  for (const RectApart& p : apart) {
    if (p.a >= items.size() || p.b >= items.size()) {
      return Error(ErrorKind::kInvalidInput, fmt::format("rectangle packing: an apart pair ({}, {}) names an item "
                                                         "past the last ({})", p.a, p.b, items.size()));
    }
    if (p.a == p.b) {
      return Error(ErrorKind::kInvalidInput,
                   fmt::format("rectangle packing: item '{}' cannot be apart from itself", items[p.a].id));
    }
  }
  return Status::ok();
}

}  // namespace

uint64_t live_pixels_lower_bound(std::span<const RectItem> items) {
  std::vector<Lifetime> lifetimes;
  lifetimes.reserve(items.size());
  for (const RectItem& item : items) {
    auto pixels = checked_mul(item.width, item.height);
    lifetimes.push_back({item.lower, item.upper, pixels.value_or(std::numeric_limits<uint64_t>::max())});
  }
  return peak_live_bytes(lifetimes);
}

Expected<RectPacking> pack_rectangles(std::span<const RectItem> items, std::span<const RectApart> apart,
                                      const RectOptions& options) {
  if (Status s = check_input(items, apart, options); !s) return s.error();
  RectPacking out;
  out.lower_bound = live_pixels_lower_bound(items);
  const uint32_t n = static_cast<uint32_t>(items.size());
  if (n == 0) return out;
  Packer packer(items, apart, options);

  // The greedy orders, each a key per item (larger first), ties by index.
  using Key = std::pair<__int128, __int128>;
  auto lifetime = [&](uint32_t i) -> __int128 {
    return std::max<__int128>(0, static_cast<__int128>(items[i].upper) - items[i].lower);
  };
  auto pixels = [&](uint32_t i) -> __int128 { return area(items[i]); };
  const std::vector<std::function<Key(uint32_t)>> keys = {
      [&](uint32_t i) { return Key{pixels(i), 0}; },
      [&](uint32_t i) { return Key{items[i].height, items[i].width}; },
      [&](uint32_t i) { return Key{pixels(i) * lifetime(i), 0}; },  // below 2^62 * 2^64
      [&](uint32_t i) { return Key{-static_cast<__int128>(items[i].lower), 0}; },  // earlier birth first
      [&](uint32_t i) { return Key{std::max(items[i].width, items[i].height), pixels(i)}; },
      [&](uint32_t i) { return Key{items[i].width, items[i].height}; },
  };
  uint64_t widest = 0;
  for (const RectItem& item : items) widest = std::max(widest, item.width);
  std::vector<uint64_t> limits = {options.max_width};
  if (widest < options.max_width) limits.push_back(widest);

  std::optional<State> best;
  std::vector<uint32_t> order(n);
  for (const auto& key : keys) {
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) > key(b); });
    for (uint64_t limit : limits) {
      for (bool settle : {false, true}) {
        State s = packer.greedy(order, limit, settle);
        packer.shrink(s);
        if (!best || s.better_than(*best)) best = std::move(s);
      }
    }
  }

  const uint64_t budget_start = packer.steps();
  uint64_t random = options.seed;
  while (packer.steps() - budget_start < options.max_steps && best->pixels() > out.lower_bound) {
    State s = packer.ruin_and_recreate(*best, random);
    if (!best->better_than(s)) best = std::move(s);
  }

  for (const Atlas& a : best->atlases) out.atlases.push_back(ImageExtent{a.height, a.width});
  out.placements = std::move(best->at);
  out.pixels = saturate(best->pixels());
  out.steps = packer.steps();
  return out;
}

Status check_rectangles(std::span<const RectItem> items, std::span<const RectApart> apart, const RectPacking& packing,
                        const RectOptions& options) {
  auto fail = [](std::string what) { return Error(ErrorKind::kVerify, "rectangle packing: " + what); };
  if (packing.placements.size() != items.size()) {
    return fail(fmt::format("{} placements for {} items", packing.placements.size(), items.size()));
  }
  unsigned __int128 pixels = 0;
  std::vector<ImageExtent> boxes(packing.atlases.size());
  std::vector<uint32_t> members(packing.atlases.size(), 0);
  for (size_t k = 0; k < packing.atlases.size(); ++k) {
    const ImageExtent& a = packing.atlases[k];
    if (a.width > options.max_width || a.height > options.max_height) {
      return fail(fmt::format("atlas {} is {} x {}, past the limits {} x {}", k, a.width, a.height,
                              options.max_width, options.max_height));
    }
    pixels += static_cast<unsigned __int128>(a.width) * a.height;
  }
  if (pixels != packing.pixels) return fail("the pixels are not the atlases' total area");
  for (size_t i = 0; i < items.size(); ++i) {
    const RectPlacement& p = packing.placements[i];
    if (p.atlas >= packing.atlases.size()) return fail(fmt::format("item '{}' is in no atlas", items[i].id));
    const ImageExtent& a = packing.atlases[p.atlas];
    if (p.x > a.width || items[i].width > a.width - p.x || p.y > a.height || items[i].height > a.height - p.y) {
      return fail(fmt::format("item '{}' at ({}, {}) is not inside atlas {} ({} x {})", items[i].id, p.x, p.y,
                              p.atlas, a.width, a.height));
    }
    boxes[p.atlas].width = std::max(boxes[p.atlas].width, p.x + items[i].width);
    boxes[p.atlas].height = std::max(boxes[p.atlas].height, p.y + items[i].height);
    members[p.atlas] += 1;
  }
  for (size_t k = 0; k < packing.atlases.size(); ++k) {
    if (members[k] == 0) return fail(fmt::format("atlas {} holds no item", k));
    if (!(boxes[k] == packing.atlases[k])) return fail(fmt::format("atlas {} is not its items' bounding box", k));
  }
  for (const RectApart& q : apart) {
    if (q.a >= items.size() || q.b >= items.size()) return fail("an apart pair names an item that does not exist");
    if (packing.placements[q.a].atlas == packing.placements[q.b].atlas) {
      return fail(fmt::format("items '{}' and '{}' must be apart but share atlas {}", items[q.a].id, items[q.b].id,
                              packing.placements[q.a].atlas));
    }
  }
  std::vector<uint32_t> order(items.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return items[a].lower < items[b].lower; });
  for (size_t p = 0; p < order.size(); ++p) {
    const RectItem& a = items[order[p]];
    if (!occupies(a)) continue;
    for (size_t q = p + 1; q < order.size() && items[order[q]].lower < a.upper; ++q) {
      const RectItem& b = items[order[q]];
      const RectPlacement& pa = packing.placements[order[p]];
      const RectPlacement& pb = packing.placements[order[q]];
      if (!occupies(b) || pa.atlas != pb.atlas || !alive_together(a.lower, a.upper, b.lower, b.upper)) continue;
      if (pa.x < pb.x + b.width && pb.x < pa.x + a.width && pa.y < pb.y + b.height && pb.y < pa.y + a.height) {
        return fail(fmt::format("items '{}' and '{}' overlap in atlas {} while both are alive", a.id, b.id, pa.atlas));
      }
    }
  }
  return Status::ok();
}

}  // namespace stowage::ir
