// Sections (maximal sets of items alive together), the live-bytes lower bound
// and the split of a packing problem into groups independent in time.
#include <algorithm>
#include <limits>

#include "packing_internal.h"
#include "stowage/ir/lifetimes.h"

namespace stowage::ir {
uint64_t live_bytes_lower_bound(std::span<const PackItem> items) { return peak_live_bytes(lifetimes_of(items)); }

namespace packing {

void compute_sections(Instance& in) {
  const uint32_t n = in.count();
  std::vector<Lifetime> lifetimes(n);
  for (uint32_t i = 0; i < n; ++i) lifetimes[i] = {in.lower[i], in.upper[i], in.size[i]};
  // The instance holds only items that take space, so every item has its two events.
  const std::vector<LifetimeEvent> events = lifetime_events(lifetimes);
  in.first_section.assign(n, 0);
  in.end_section.assign(n, 0);
  in.section_total.clear();
  in.lower_bound = 0;
  // A section is the time between two consecutive moments where an item is
  // born or dies, with the items alive then: every set of items alive at one
  // moment is a section (not only the largest ones), so the section bounds
  // see every moment. Deaths come before births at the same moment.
  uint64_t live = 0;  // cannot overflow: the caller checked the sum of all sizes
  for (size_t k = 0; k < events.size();) {
    const int64_t time = events[k].time;
    for (; k < events.size() && events[k].time == time; ++k) {
      const uint32_t item = events[k].index;
      if (events[k].starts) {
        in.first_section[item] = in.section_count();
        live += in.size[item];
      } else {
        in.end_section[item] = in.section_count();
        live -= in.size[item];
      }
    }
    if (live == 0) continue;
    in.section_total.push_back(live);
    in.lower_bound = std::max(in.lower_bound, live);
  }
}

std::vector<Instance> split_into_instances(std::span<const PackItem> items,
                                           std::span<const uint32_t> packed) {
  std::vector<uint32_t> order(packed.begin(), packed.end());
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (items[a].lower != items[b].lower) return items[a].lower < items[b].lower;
    return a < b;
  });
  std::vector<Instance> instances;
  int64_t reach = std::numeric_limits<int64_t>::min();  // latest upper of the open group
  for (uint32_t index : order) {
    const PackItem& item = items[index];
    if (instances.empty() || item.lower >= reach) instances.emplace_back();
    Instance& in = instances.back();
    in.item.push_back(index);
    in.lower.push_back(item.lower);
    in.upper.push_back(item.upper);
    in.size.push_back(item.size);
    in.align.push_back(item.alignment);
    reach = in.item.size() == 1 ? item.upper : std::max(reach, item.upper);
  }
  for (Instance& in : instances) compute_sections(in);
  return instances;
}

// The largest section total over each item's sections (sparse table).
std::vector<uint64_t> item_crowding(const Instance& in) {
  const uint32_t s = in.section_count();
  std::vector<std::vector<uint64_t>> table{in.section_total};
  for (uint32_t width = 1; 2 * width <= s; width *= 2) {
    const std::vector<uint64_t>& prev = table.back();
    std::vector<uint64_t> next(s - 2 * width + 1);
    for (uint32_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + width]);
    table.push_back(std::move(next));
  }
  std::vector<uint64_t> result(in.count());
  for (uint32_t i = 0; i < in.count(); ++i) {
    const uint32_t begin = in.first_section[i], end = in.end_section[i];
    uint32_t level = 0;
    while ((2u << level) <= end - begin) ++level;
    result[i] = std::max(table[level][begin], table[level][end - (1u << level)]);
  }
  return result;
}

uint64_t height_of(const Instance& in, std::span<const uint64_t> offsets) {
  uint64_t height = 0;
  for (uint32_t i = 0; i < in.count(); ++i) height = std::max(height, offsets[i] + in.size[i]);
  return height;
}

}  // namespace packing
}  // namespace stowage::ir
