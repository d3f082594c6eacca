// Rectangle packing over time, for texture memory: every item (a tensor of an
// image scope) gets an atlas (an image storage) and a pixel position (x, y)
// in it, so that items alive at a common moment never share a pixel and
// items that must be apart (one launch reads one through an image and writes
// the other) are in different atlases; the atlases' total area is kept small.
//
// An item is alive over the half-open interval [lower, upper) of moments. No
// packing takes fewer pixels than the most pixels alive at one moment, the
// lower bound. How `pack_rectangles` works is described at the top of
// src/ir/passes/packing_rectangles.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stowage/bytecode/executable.h"
#include "stowage/support/error.h"

namespace stowage::ir {

struct RectItem {
  std::string id;       // named in error messages
  int64_t lower = 0;    // first moment alive
  int64_t upper = 0;    // first moment no longer alive; lower >= upper: never alive
  uint64_t width = 0;   // pixels (columns)
  uint64_t height = 0;  // pixels (rows)
};

// Two items, by index, that may not share an atlas.
struct RectApart {
  uint32_t a = 0;
  uint32_t b = 0;
};

struct RectOptions {
  // No atlas is larger (the device's image limits); at most 2^31 each.
  uint64_t max_width = 16384;
  uint64_t max_height = 16384;
  // The work spent improving the first packing, in steps (one step: one placed
  // item compared with one candidate position): with the same budget and seed,
  // the packing is the same on every run and machine.
  uint64_t max_steps = uint64_t{1} << 20;
  uint64_t seed = 1;
};

struct RectPlacement {
  uint32_t atlas = 0;
  uint64_t x = 0;  // column of its top-left pixel
  uint64_t y = 0;  // row
  friend bool operator==(const RectPlacement&, const RectPlacement&) = default;
};

struct RectPacking {
  std::vector<RectPlacement> placements;  // one per item, in the items' order
  std::vector<ImageExtent> atlases;       // each the bounding box of its items (one at least)
  uint64_t pixels = 0;       // sum of the atlases' areas
  uint64_t lower_bound = 0;  // the most pixels alive at one moment
  uint64_t steps = 0;        // work done, counted as for max_steps
};

// Packs the items. Errors (as values): an item larger than the limits, an
// apart pair naming an item that does not exist or an item twice, limits
// above 2^31, more than 2^32 - 1 items.
Expected<RectPacking> pack_rectangles(std::span<const RectItem> items, std::span<const RectApart> apart,
                                      const RectOptions& options = {});

// An independent check of a packing: one placement per item, every rectangle
// inside its atlas, atlases within the limits and the bounding boxes of their
// items, `pixels` their total area, apart items in different atlases, and no
// two items alive at a common moment sharing a pixel. The first violation, else ok.
Status check_rectangles(std::span<const RectItem> items, std::span<const RectApart> apart,
                        const RectPacking& packing, const RectOptions& options = {});

// The most pixels (width x height) of items alive at one moment (saturating).
uint64_t live_pixels_lower_bound(std::span<const RectItem> items);

}  // namespace stowage::ir
