// An independent checker of packings, used by pack() on its own output, by the
// tests and by the command-line tool. It shares no code with the packer.
#include <algorithm>
#include <set>
#include <string>

#include "stowage/ir/lifetimes.h"
#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

Error violation(std::string message) { return Error(ErrorKind::kVerify, std::move(message)); }

std::string name(const PackItem& item) { return "item '" + item.id + "'"; }

// Offsets, alignment and capacity, item by item.
Status check_each(std::span<const PackItem> items, std::span<const uint64_t> offsets,
                  std::optional<uint64_t> capacity) {
  for (size_t i = 0; i < items.size(); ++i) {
    const PackItem& item = items[i];
    const uint64_t offset = offsets[i];
    if (item.alignment == 0) return violation(name(item) + ": alignment must be at least 1");
    if (offset % item.alignment != 0)
      return violation(name(item) + ": offset " + std::to_string(offset) + " is not a multiple of its alignment " +
                       std::to_string(item.alignment));
    if (offset > UINT64_MAX - item.size)
      return violation(name(item) + ": offset " + std::to_string(offset) + " + size " + std::to_string(item.size) +
                       " overflows");
    if (capacity && !(item.size <= *capacity && offset <= *capacity - item.size))
      return violation(name(item) + " ends at byte " + std::to_string(offset + item.size) +
                       ", beyond the capacity " + std::to_string(*capacity));
  }
  return Status::ok();
}

// Sweeps time keeping the live items ordered by offset. While they are
// pairwise disjoint in bytes, a newcomer can only collide with its neighbours
// in that order.
Status check_overlaps(std::span<const PackItem> items, std::span<const uint64_t> offsets) {
  const std::vector<LifetimeEvent> events = lifetime_events(lifetimes_of(items));
  std::set<std::pair<uint64_t, uint32_t>> live;
  auto clash = [&](uint32_t a, uint32_t b) {
    if (b < a) std::swap(a, b);
    const PackItem &x = items[a], &y = items[b];
    const uint64_t from = std::max(offsets[a], offsets[b]);
    const uint64_t to = std::min(offsets[a] + x.size, offsets[b] + y.size);
    return violation(name(x) + " and " + name(y) + " are alive together over [" +
                     std::to_string(std::max(x.lower, y.lower)) + ", " + std::to_string(std::min(x.upper, y.upper)) +
                     ") and share bytes [" + std::to_string(from) + ", " + std::to_string(to) + ")");
  };
  for (const LifetimeEvent& e : events) {
    const uint64_t offset = offsets[e.index];
    if (!e.starts) {
      live.erase({offset, e.index});
      continue;
    }
    auto next = live.lower_bound({offset, 0});
    if (next != live.end() && next->first < offset + items[e.index].size) return clash(e.index, next->second);
    if (next != live.begin()) {
      auto prev = std::prev(next);
      if (prev->first + items[prev->second].size > offset) return clash(e.index, prev->second);
    }
    live.insert({offset, e.index});
  }
  return Status::ok();
}

}  // namespace

Status check_packing(std::span<const PackItem> items, std::span<const uint64_t> offsets,
                     std::optional<uint64_t> capacity) {
  if (offsets.size() != items.size())
    return violation("expected " + std::to_string(items.size()) + " offsets, one per item, got " +
                     std::to_string(offsets.size()));
  if (Status status = check_each(items, offsets, capacity); !status) return status;
  return check_overlaps(items, offsets);
}

}  // namespace stowage::ir
