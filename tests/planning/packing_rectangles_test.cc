// The rectangle packer over time (include/stowage/ir/packing_rectangles.h):
// hand-checkable instances, the texture tensors of ResNet-18, limits, errors,
// the checker, and random instances.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "stowage/ir/packing_rectangles.h"

namespace stowage::ir {
namespace {

RectPacking packed(const std::vector<RectItem>& items, const std::vector<RectApart>& apart = {},
                   const RectOptions& options = {}) {
  auto result = pack_rectangles(items, apart, options);
  EXPECT_TRUE(result) << result.error().message();
  if (!result) return {};
  Status check = check_rectangles(items, apart, *result, options);
  EXPECT_TRUE(check) << check.error().message();
  return result.take();
}

TEST(PackRectangles, NothingToPack) {
  RectPacking p = packed({});
  EXPECT_TRUE(p.atlases.empty());
  EXPECT_EQ(p.pixels, 0u);
  EXPECT_EQ(p.lower_bound, 0u);
}

TEST(PackRectangles, ItemsAliveTogetherShareOneAtlasAtTheBound) {
  RectPacking p = packed({{"a", 0, 2, 4, 2}, {"b", 1, 3, 4, 2}});
  ASSERT_EQ(p.atlases.size(), 1u);
  EXPECT_EQ(p.pixels, 16u);
  EXPECT_EQ(p.lower_bound, 16u);
  EXPECT_EQ(p.placements[0], (RectPlacement{0, 0, 0}));
  EXPECT_EQ(p.placements[1], (RectPlacement{0, 4, 0}));  // beside a: 8 x 2, as small as 4 x 4
}

TEST(PackRectangles, ItemsAliveAtDifferentMomentsTakeTheSamePixels) {
  RectPacking p = packed({{"a", 0, 1, 4, 4}, {"b", 1, 2, 4, 4}});
  ASSERT_EQ(p.atlases.size(), 1u);
  EXPECT_EQ(p.atlases[0], (ImageExtent{4, 4}));
  EXPECT_EQ(p.placements[1], (RectPlacement{0, 0, 0}));
}

TEST(PackRectangles, NarrowItemsStandSideBySideWhereAWideOneWas) {
  RectPacking p = packed({{"wide", 0, 1, 8, 8}, {"left", 1, 3, 4, 8}, {"right", 2, 4, 4, 8}});
  ASSERT_EQ(p.atlases.size(), 1u);
  EXPECT_EQ(p.pixels, 64u);
  EXPECT_EQ(p.placements[1].y, 0u);
  EXPECT_EQ(p.placements[2].y, 0u);
  EXPECT_NE(p.placements[1].x, p.placements[2].x);
}

TEST(PackRectangles, ApartItemsTakeDifferentAtlasesEvenAtDifferentMoments) {
  RectPacking p = packed({{"a", 0, 1, 4, 4}, {"b", 1, 2, 4, 4}}, {{0, 1}});
  ASSERT_EQ(p.atlases.size(), 2u);
  EXPECT_EQ(p.pixels, 32u);
  EXPECT_NE(p.placements[0].atlas, p.placements[1].atlas);
}

// A chain of launches, each reading the last tensor and writing the next: two
// atlases, used in turn.
TEST(PackRectangles, AChainOfLaunchesAlternatesBetweenTwoAtlases) {
  std::vector<RectItem> items;
  std::vector<RectApart> apart;
  for (uint32_t i = 0; i < 6; ++i) {
    items.push_back({"t" + std::to_string(i), int64_t(i), int64_t(i) + 2, 8, 8});
    if (i > 0) apart.push_back({i - 1, i});
  }
  RectPacking p = packed(items, apart);
  EXPECT_EQ(p.atlases.size(), 2u);
  EXPECT_EQ(p.pixels, 128u);
  EXPECT_EQ(p.pixels, p.lower_bound);
}

// A residual block: a launch reads x and y and writes z; y was written from x.
TEST(PackRectangles, ThreeItemsPairwiseApartNeedThreeAtlases) {
  RectPacking p = packed({{"x", 0, 3, 8, 8}, {"y", 1, 3, 8, 8}, {"z", 2, 4, 8, 8}}, {{0, 1}, {0, 2}, {1, 2}});
  EXPECT_EQ(p.atlases.size(), 3u);
  EXPECT_EQ(p.pixels, 192u);
}

// Shapes: a square and a tall item never alive together would need a 224 x 896
// atlas to share one; two atlases of their own take half of that.
TEST(PackRectangles, ShapesThatDoNotFitEachOtherGetAtlasesOfTheirOwn) {
  RectPacking p = packed({{"square", 0, 1, 224, 224}, {"tall", 1, 2, 56, 896}});
  EXPECT_EQ(p.atlases.size(), 2u);
  EXPECT_EQ(p.pixels, 224u * 224 + 56u * 896);
}

TEST(PackRectangles, AtlasesStayWithinTheLimits) {
  RectOptions options;
  options.max_width = 4;
  options.max_height = 8;
  RectPacking p = packed({{"a", 0, 2, 4, 4}, {"b", 0, 2, 4, 4}, {"c", 0, 2, 4, 4}}, {}, options);
  EXPECT_EQ(p.atlases.size(), 2u);
  for (const ImageExtent& a : p.atlases) {
    EXPECT_LE(a.width, 4u);
    EXPECT_LE(a.height, 8u);
  }
}

TEST(PackRectangles, EmptyAndNeverAliveItemsStillGetAPlace) {
  RectPacking p = packed({{"a", 0, 2, 4, 4}, {"empty", 0, 2, 0, 5}, {"never", 3, 3, 2, 2}}, {{0, 1}});
  EXPECT_NE(p.placements[0].atlas, p.placements[1].atlas);
  EXPECT_EQ(p.lower_bound, 16u);
}

// The texture tensors of ResNet-18 (batch 1, 224 x 224, float32) as the planner
// sees them: lifetimes in bindings, extents in pixels, and the apart pairs of
// its launches (each writes its output through an image while reading its
// inputs through images). 351232 pixels is the least any packing takes: t2, t3
// and t4 are pairwise apart and alive together, so three atlases of at least
// 56 x 896; t1 (112 x 1792) is apart from t0 and t2. If t1's atlas holds none
// of t2..t4, the total is at least 112*1792 + 3*56*896 = 351232. Otherwise it
// holds t3 or t4, the other two of t2..t4 are in two more atlases, and t0 (not
// with t1) is either in one of them, which then spans 224 x 896, or alone:
// at least 351232 either way. The lower bound (t0 and t1 alive together) is
// 250880.
TEST(PackRectangles, ResNet18TexturesAtTheirLeast) {
  const std::vector<RectItem> items = {
      {"t0", 0, 4, 224, 224},   {"t1", 2, 6, 112, 1792},  {"t2", 4, 10, 56, 896},   {"t3", 6, 10, 56, 896},
      {"t4", 8, 14, 56, 896},   {"t5", 10, 14, 56, 896},  {"t6", 12, 18, 56, 896},  {"t7", 14, 20, 28, 896},
      {"t8", 16, 20, 28, 896},  {"t9", 18, 24, 28, 896},  {"t10", 20, 24, 28, 896}, {"t11", 22, 28, 28, 896},
      {"t12", 24, 30, 14, 896}, {"t13", 26, 30, 14, 896}, {"t14", 28, 34, 14, 896}, {"t15", 30, 34, 14, 896},
      {"t16", 32, 38, 14, 896}, {"t17", 34, 40, 7, 896},  {"t18", 36, 40, 7, 896},  {"t19", 38, 44, 7, 896},
      {"t20", 40, 44, 7, 896},  {"t21", 42, 46, 7, 896},  {"t22", 44, 48, 1, 128},
  };
  const std::vector<RectApart> apart = {
      {0, 1},   {1, 2},   {10, 11}, {10, 9},  {11, 12}, {11, 13}, {11, 9},  {12, 14}, {13, 14}, {14, 15},
      {14, 16}, {15, 16}, {16, 17}, {16, 18}, {17, 19}, {18, 19}, {19, 20}, {19, 21}, {2, 3},   {2, 4},
      {20, 21}, {21, 22}, {3, 4},   {4, 5},   {4, 6},   {5, 6},   {6, 7},   {6, 8},   {7, 9},   {8, 9},
  };
  RectPacking p = packed(items, apart);
  EXPECT_EQ(p.lower_bound, 250880u);
  EXPECT_EQ(p.pixels, 351232u);
  EXPECT_EQ(p.atlases.size(), 4u);
}

TEST(PackRectangles, TheSameInputGivesTheSamePacking) {
  std::mt19937_64 random(7);
  std::vector<RectItem> items;
  for (int i = 0; i < 40; ++i) {
    int64_t lower = int64_t(random() % 30);
    items.push_back({"t" + std::to_string(i), lower, lower + 1 + int64_t(random() % 6), 1 + random() % 16,
                     1 + random() % 64});
  }
  std::vector<RectApart> apart = {{0, 1}, {1, 2}, {2, 3}, {5, 9}};
  RectPacking a = packed(items, apart), b = packed(items, apart);
  EXPECT_EQ(a.placements, b.placements);
  EXPECT_EQ(a.atlases, b.atlases);
  RectOptions greedy_only;
  greedy_only.max_steps = 0;
  EXPECT_GE(packed(items, apart, greedy_only).pixels, a.pixels);
}

TEST(PackRectangles, RandomInstancesPackValidly) {
  std::mt19937_64 random(11);
  for (int round = 0; round < 40; ++round) {
    const uint32_t n = 1 + uint32_t(random() % 60);
    std::vector<RectItem> items;
    for (uint32_t i = 0; i < n; ++i) {
      int64_t lower = int64_t(random() % 50);
      items.push_back({"t" + std::to_string(i), lower, lower + int64_t(random() % 8), random() % 40,
                       random() % 100});
    }
    std::vector<RectApart> apart;
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t a = uint32_t(random() % n), b = uint32_t(random() % n);
      if (a != b) apart.push_back({a, b});
    }
    RectOptions options;
    options.max_width = 64;
    options.max_height = 160;
    options.max_steps = 20000;
    RectPacking p = packed(items, apart, options);
    EXPECT_GE(p.pixels, p.lower_bound);
  }
}

TEST(PackRectangles, RefusesWhatCannotBePacked) {
  RectOptions options;
  options.max_width = 16;
  options.max_height = 16;
  auto too_large = pack_rectangles(std::vector<RectItem>{{"big", 0, 1, 17, 4}}, {}, options);
  ASSERT_FALSE(too_large);
  EXPECT_EQ(too_large.error().message(),
            "rectangle packing: item 'big' is 17 x 4 pixels (width x height), larger than an atlas may be (16 x 16)");
  std::vector<RectItem> two = {{"a", 0, 1, 1, 1}, {"b", 0, 1, 1, 1}};
  auto past = pack_rectangles(two, std::vector<RectApart>{{0, 2}});
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().message(), "rectangle packing: an apart pair (0, 2) names an item past the last (2)");
  auto self = pack_rectangles(two, std::vector<RectApart>{{1, 1}});
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().message(), "rectangle packing: item 'b' cannot be apart from itself");
  RectOptions huge;
  huge.max_width = (uint64_t{1} << 31) + 1;
  auto limits = pack_rectangles(two, {}, huge);
  ASSERT_FALSE(limits);
  EXPECT_EQ(limits.error().message(), "rectangle packing: atlas limits 2147483649 x 16384 exceed 2^31 pixels");
}

TEST(CheckRectangles, FindsEveryKindOfViolation) {
  const std::vector<RectItem> items = {{"a", 0, 2, 4, 4}, {"b", 1, 3, 4, 4}};
  const std::vector<RectApart> apart = {{0, 1}};
  RectPacking good;
  good.placements = {{0, 0, 0}, {1, 0, 0}};
  good.atlases = {{4, 4}, {4, 4}};
  good.pixels = 32;
  ASSERT_TRUE(check_rectangles(items, apart, good));

  auto message = [&](const RectPacking& p, const std::vector<RectApart>& pairs) {
    Status s = check_rectangles(items, pairs, p);
    return s ? std::string("ok") : s.error().message();
  };
  RectPacking shared = good;
  shared.placements = {{0, 0, 0}, {0, 0, 0}};
  shared.atlases = {{4, 4}};
  shared.pixels = 16;
  EXPECT_EQ(message(shared, apart), "rectangle packing: items 'a' and 'b' must be apart but share atlas 0");
  EXPECT_EQ(message(shared, {}), "rectangle packing: items 'a' and 'b' overlap in atlas 0 while both are alive");
  RectPacking outside = good;
  outside.placements[1] = {1, 1, 0};
  EXPECT_EQ(message(outside, apart), "rectangle packing: item 'b' at (1, 0) is not inside atlas 1 (4 x 4)");
  RectPacking loose = good;
  loose.atlases[1] = {5, 4};
  loose.pixels = 36;
  EXPECT_EQ(message(loose, apart), "rectangle packing: atlas 1 is not its items' bounding box");
  RectPacking miscounted = good;
  miscounted.pixels = 31;
  EXPECT_EQ(message(miscounted, apart), "rectangle packing: the pixels are not the atlases' total area");
  RectPacking unused = good;
  unused.atlases.push_back({1, 1});
  unused.pixels = 33;
  EXPECT_EQ(message(unused, apart), "rectangle packing: atlas 2 holds no item");
}

}  // namespace
}  // namespace stowage::ir
