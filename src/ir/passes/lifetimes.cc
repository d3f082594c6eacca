#include "stowage/ir/lifetimes.h"

#include <algorithm>
#include <limits>

namespace stowage::ir {

std::vector<LifetimeEvent> lifetime_events(std::span<const Lifetime> lifetimes) {
  std::vector<LifetimeEvent> events;
  for (uint32_t i = 0; i < lifetimes.size(); ++i) {
    if (!takes_space(lifetimes[i])) continue;
    events.push_back({lifetimes[i].lower, i, true});
    events.push_back({lifetimes[i].upper, i, false});
  }
  std::sort(events.begin(), events.end());
  return events;
}

uint64_t peak_live_bytes(std::span<const Lifetime> lifetimes) {
  // Live bytes are a sum of up to 2^32 sizes: tracked exactly in 128 bits.
  unsigned __int128 live = 0, peak = 0;
  for (const LifetimeEvent& e : lifetime_events(lifetimes)) {
    if (e.starts) {
      live += lifetimes[e.index].size;
      peak = std::max(peak, live);
    } else {
      live -= lifetimes[e.index].size;
    }
  }
  return peak > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                     : static_cast<uint64_t>(peak);
}

std::vector<Lifetime> lifetimes_of(std::span<const PackItem> items) {
  std::vector<Lifetime> out;
  out.reserve(items.size());
  for (const PackItem& item : items) out.push_back({item.lower, item.upper, item.size});
  return out;
}

}  // namespace stowage::ir
