// place_blocks: blocks in the free space of a packing. Every placement is
// checked with check_packing, each block as an item of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

// Items and blocks together, checked as one packing.
void expect_valid(const std::vector<PackItem>& items, const std::vector<uint64_t>& offsets,
                  const std::vector<BlockRequest>& requests, const BlockPlacement& placed) {
  std::vector<PackItem> all = items;
  std::vector<uint64_t> at = offsets;
  uint64_t height = 0;
  for (size_t i = 0; i < items.size(); ++i) height = std::max(height, offsets[i] + items[i].size);
  ASSERT_EQ(placed.offsets.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    ASSERT_EQ(placed.offsets[r].size(), requests[r].count);
    for (size_t b = 0; b < requests[r].count; ++b) {
      const BlockRequest& q = requests[r];
      all.push_back({q.id + "." + std::to_string(b), q.lower, q.upper, q.block_size, q.alignment});
      at.push_back(placed.offsets[r][b]);
      height = std::max(height, placed.offsets[r][b] + q.block_size);
    }
  }
  EXPECT_TRUE(check_packing(all, at)) << check_packing(all, at).error().message();
  EXPECT_EQ(placed.height, height);
}

TEST(PlaceBlocks, BlocksTakeTheHolesBetweenItemsFirst) {
  const std::vector<PackItem> items = {{"a", 0, 10, 100, 1}, {"b", 0, 10, 100, 1}, {"later", 10, 20, 500, 1}};
  const std::vector<uint64_t> offsets = {0, 200, 0};
  const std::vector<BlockRequest> requests = {{"t", 2, 8, 50, 3, 2}};
  auto placed = place_blocks(items, offsets, requests);
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->offsets[0], (std::vector<uint64_t>{100, 150, 300}));
  EXPECT_EQ(placed->height, 500u);  // `later` is the highest
  expect_valid(items, offsets, requests, *placed);
}

TEST(PlaceBlocks, AlignmentSkipsWhatIsTooSmall) {
  const std::vector<PackItem> items = {{"a", 0, 2, 10, 1}, {"b", 0, 2, 10, 1}};
  const std::vector<uint64_t> offsets = {0, 30};  // a hole of 20 at 10, too small once aligned to 8
  const std::vector<BlockRequest> requests = {{"t", 0, 2, 16, 2, 8}};
  auto placed = place_blocks(items, offsets, requests);
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->offsets[0], (std::vector<uint64_t>{40, 56}));
  expect_valid(items, offsets, requests, *placed);
}

// Blocks of one size, requests in order of birth, no items: the live-bytes
// bound is met, however the lifetimes interleave.
TEST(PlaceBlocks, EqualBlocksInOrderOfBirthMeetTheLowerBound) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<BlockRequest> requests;
    std::vector<PackItem> whole;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int64_t lower = static_cast<int64_t>(rng() % 50);
      int64_t upper = lower + 1 + static_cast<int64_t>(rng() % 20);
      uint64_t count = 1 + rng() % 6;
      requests.push_back({"r" + std::to_string(i), lower, upper, 96, count, 32});
    }
    std::sort(requests.begin(), requests.end(), [](const auto& a, const auto& b) { return a.lower < b.lower; });
    for (const auto& r : requests) whole.push_back({r.id, r.lower, r.upper, r.block_size * r.count, 1});
    auto placed = place_blocks({}, {}, requests);
    ASSERT_TRUE(placed);
    EXPECT_EQ(placed->height, live_bytes_lower_bound(whole)) << "trial " << trial;
    expect_valid({}, {}, requests, *placed);
  }
}

// With packed items and mixed block sizes: always a valid placement.
TEST(PlaceBlocks, AroundPackedItemsThePlacementIsValid) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PackItem> items;
    std::vector<BlockRequest> requests;
    for (int i = 0; i < 12; ++i) {
      int64_t lower = static_cast<int64_t>(rng() % 30);
      int64_t upper = lower + static_cast<int64_t>(rng() % 10);  // some never alive
      if (rng() % 2 == 0) {
        items.push_back({"i" + std::to_string(i), lower, upper, 1 + rng() % 300, 1 + rng() % 2 * 63});
      } else {
        uint64_t alignment = uint64_t{1} << (rng() % 4);
        requests.push_back({"r" + std::to_string(i), lower, upper, alignment * (rng() % 20), rng() % 5, alignment});
      }
    }
    auto packed = pack(items);
    ASSERT_TRUE(packed);
    auto placed = place_blocks(items, packed->offsets, requests);
    ASSERT_TRUE(placed);
    expect_valid(items, packed->offsets, requests, *placed);
  }
}

TEST(PlaceBlocks, BadInputIsAnError) {
  const std::vector<BlockRequest> zero = {{"t", 0, 1, 8, 1, 0}};
  auto placed = place_blocks({}, {}, zero);
  ASSERT_FALSE(placed);
  EXPECT_NE(placed.error().message().find("alignment must be at least 1"), std::string::npos);
  const std::vector<PackItem> items = {{"a", 0, 1, UINT64_MAX - 8, 1}};
  placed = place_blocks(items, {}, {});  // no offset for the item
  ASSERT_FALSE(placed);
  const std::vector<uint64_t> low = {0};
  const std::vector<BlockRequest> above = {{"t", 0, 1, 16, 1, 1}};
  placed = place_blocks(items, low, above);
  ASSERT_FALSE(placed);
  EXPECT_NE(placed.error().message().find("past 2^64 - 1"), std::string::npos) << placed.error().message();
}

}  // namespace
}  // namespace stowage::ir
