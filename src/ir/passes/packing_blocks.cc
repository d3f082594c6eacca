// Block placement into the free space of a packing (see place_blocks in
// include/stowage/ir/packing.h). A request at a time: the byte ranges taken by
// items and blocks alive with it are sorted and walked from offset 0, and its
// blocks fill the gaps between them, lowest first, then the space above.
#include <algorithm>
#include <string>

#include "stowage/ir/lifetimes.h"
#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

struct Taken {
  int64_t lower, upper;  // alive over [lower, upper)
  uint64_t begin, end;   // bytes
};

uint64_t round_up(uint64_t value, uint64_t alignment) {
  uint64_t rest = value % alignment;
  return rest == 0 ? value : value + (alignment - rest);  // callers check for overflow
}

}  // namespace

Expected<BlockPlacement> place_blocks(std::span<const PackItem> items, std::span<const uint64_t> offsets,
                                      std::span<const BlockRequest> requests,
                                      std::optional<std::chrono::steady_clock::time_point> deadline) {
  BlockPlacement result;
  std::vector<Taken> taken;
  if (items.size() != offsets.size()) {
    return Error(ErrorKind::kVerify, "place_blocks: " + std::to_string(items.size()) + " items but " +
                                         std::to_string(offsets.size()) + " offsets");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const PackItem& item = items[i];
    if (offsets[i] > UINT64_MAX - item.size) {
      return Error(ErrorKind::kVerify, "item '" + item.id + "' ends past 2^64 - 1 bytes");
    }
    result.height = std::max(result.height, offsets[i] + item.size);
    if (item.size != 0 && item.lower < item.upper) {
      taken.push_back({item.lower, item.upper, offsets[i], offsets[i] + item.size});
    }
  }
  const auto overflow = [](const BlockRequest& r) {
    return Error(ErrorKind::kVerify, "blocks of '" + r.id + "' would lie past 2^64 - 1 bytes");
  };
  const auto out_of_time = [](const BlockRequest& r) {
    return Error(ErrorKind::kVerify, "the time limit ran out while placing the blocks of '" + r.id + "'");
  };
  uint64_t blocks = 0;  // asked for by the requests so far
  for (const BlockRequest& r : requests) {
    blocks = r.count > kMaxBlocks - blocks ? kMaxBlocks + 1 : blocks + r.count;
    if (blocks > kMaxBlocks) {
      return Error(ErrorKind::kVerify, "blocks of '" + r.id + "': more than " + std::to_string(kMaxBlocks) +
                                           " blocks to place in all");
    }
  }
  uint64_t blocks_placed = 0;
  for (const BlockRequest& r : requests) {
    if (r.alignment == 0) return Error(ErrorKind::kVerify, "blocks of '" + r.id + "': alignment must be at least 1");
    std::vector<uint64_t>& placed = result.offsets.emplace_back();
    if (r.block_size == 0) {  // empty blocks take no bytes anywhere
      placed.assign(r.count, 0);
      continue;
    }
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Taken& t : taken) {
      if (alive_together(t.lower, t.upper, r.lower, r.upper)) busy.emplace_back(t.begin, t.end);
    }
    std::sort(busy.begin(), busy.end());
    busy.emplace_back(UINT64_MAX, UINT64_MAX);  // the space above everything
    uint64_t cursor = 0;  // lowest byte not known to be busy
    for (const auto& [begin, end] : busy) {
      while (placed.size() < r.count) {
        // The clock, every 65536 blocks of all requests: small placements always end.
        if (deadline && ++blocks_placed % 65536 == 0 && std::chrono::steady_clock::now() >= *deadline)
          return out_of_time(r);
        if (cursor > UINT64_MAX - (r.alignment - 1)) return overflow(r);
        uint64_t start = round_up(cursor, r.alignment);
        if (start > UINT64_MAX - r.block_size) return overflow(r);
        if (start + r.block_size > begin) break;  // the gap below `begin` is full
        placed.push_back(start);
        cursor = start + r.block_size;
      }
      if (placed.size() == r.count) break;
      cursor = std::max(cursor, end);
    }
    // The blocks, merged into runs, now take their bytes for the ones placed after.
    for (size_t b = 0; b < placed.size(); ++b) {
      uint64_t end = placed[b] + r.block_size;
      result.height = std::max(result.height, end);
      if (b > 0 && taken.back().end == placed[b]) {
        taken.back().end = end;
      } else {
        taken.push_back({r.lower, r.upper, placed[b], end});
      }
    }
  }
  return result;
}

}  // namespace stowage::ir
