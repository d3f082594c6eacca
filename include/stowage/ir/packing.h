// Offset packing for static memory planning: give every buffer a byte offset
// inside one storage so that buffers alive at the same time never share a byte,
// keeping the storage small.
//
// A buffer is alive over the half-open interval [lower, upper). The lower bound
// on any packing is the largest total of bytes alive at one moment; `pack` aims
// for it, and says when it has proven that nothing better exists. How it works
// and what it guarantees is described at the top of src/ir/passes/packing.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/support/error.h"

namespace stowage::ir {

struct PackItem {
  std::string id;
  int64_t lower = 0;  // first moment alive
  int64_t upper = 0;  // first moment no longer alive; lower >= upper: never alive
  uint64_t size = 0;  // bytes
  uint64_t alignment = 1;  // the offset must be a multiple of it; at least 1
};

struct PackOptions {
  // Without a capacity, `pack` minimises the height. With one, it stops at the
  // first packing whose height is within it.
  std::optional<uint64_t> capacity;
  // With a capacity that no packing was found within: go on lowering the
  // height until the time limit, to say how close the best packing comes
  // (true), or return at once (false).
  bool lower_when_over = true;
  // The budget. When it runs out, the best packing found so far is returned;
  // `PackResult::stopped_by_time` says so.
  double time_limit_seconds = kDefaultTimeLimitSeconds;
  // A cap on the work, in steps (see packing.cc), for reproducible experiments:
  // with the same cap, and a time limit that is not reached, the offsets are
  // the same on every run and machine. None by default.
  std::optional<uint64_t> max_steps;

  static constexpr double kDefaultTimeLimitSeconds = 10;
};

struct PackResult {
  std::vector<uint64_t> offsets;  // one per item, in the items' order
  uint64_t height = 0;            // bytes the storage needs: max of offset + size
  uint64_t lower_bound = 0;       // no packing can have a smaller height
  bool fits = false;              // height <= capacity (always true without one)
  bool proven_optimal = false;    // no packing has a smaller height
  bool proven_unfit = false;      // with a capacity: shown that no packing fits it
  bool stopped_by_time = false;   // the time limit ended the search
  uint64_t steps = 0;             // work done, counted as for max_steps
  double seconds = 0;
};

// Packs the items. Errors (as values): an alignment of 0, or sizes so large
// that a packing could need more than 2^64 - 1 bytes.
Expected<PackResult> pack(std::span<const PackItem> items, const PackOptions& options = {});

// Blocks that need not be contiguous with each other: `count` blocks of
// `block_size` bytes, all alive over [lower, upper) (the blocks of one
// discontiguous tensor).
struct BlockRequest {
  std::string id;
  int64_t lower = 0;
  int64_t upper = 0;
  uint64_t block_size = 0;
  uint64_t count = 0;
  uint64_t alignment = 1;  // each block's offset must be a multiple of it; at least 1
};

// The most blocks one placement takes, all requests together: it lists every
// block's offset, so the count is capped before anything is allocated.
inline constexpr uint64_t kMaxBlocks = uint64_t{1} << 20;

struct BlockPlacement {
  std::vector<std::vector<uint64_t>> offsets;  // per request, one per block
  uint64_t height = 0;  // max of offset + size over the items and the blocks
};

// Places blocks into the space that packed items leave free. Requests are
// taken in their order, blocks one by one, each at the lowest aligned offset
// where it shares no byte with an item (at `offsets`) or a block placed before
// it that is alive at a common moment (a request's own blocks included). Holes
// between items, too small for a whole tensor, take as many blocks as fit.
// With no items, blocks of one size whose alignment divides it, and requests
// alive (lower < upper) in order of `lower`, this is first-fit interval
// colouring: the height equals live_bytes_lower_bound. Errors (as values): an alignment of 0, an offset
// past 2^64 - 1.
// Errors (as values) also for more than kMaxBlocks blocks in all, and when
// `deadline` passes before every block is placed.
Expected<BlockPlacement> place_blocks(std::span<const PackItem> items, std::span<const uint64_t> offsets,
                                      std::span<const BlockRequest> requests,
                                      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// The largest total of sizes of items alive at one moment (saturates at
// 2^64 - 1). Items that are never alive count nowhere.
uint64_t live_bytes_lower_bound(std::span<const PackItem> items);

// An independent check of a packing: offsets are aligned, no offset + size
// overflows or passes the capacity, and no two items alive at the same moment
// share a byte. Returns the first violation found as an error, else ok.
Status check_packing(std::span<const PackItem> items, std::span<const uint64_t> offsets,
                     std::optional<uint64_t> capacity = std::nullopt);

// The bytes TVM Relax's storage-reuse planner would allocate: every item takes
// a whole storage; a storage freed at an item's death is reused by a later item
// (the smallest free one at least as large and at most 16 times larger, else
// the largest free one at least 1/16 of its size, grown to fit), else a new
// storage is made. Returns the total size of all storages (saturating).
uint64_t reuse_only_total(std::span<const PackItem> items);

// Every item its own storage: the sum of the sizes (saturating).
uint64_t naive_total(std::span<const PackItem> items);

// The planning CSV format: a header naming the columns `id,lower,upper,size`,
// optionally `alignment` and `offset` (any order, each at most once), then one
// item a line. `origin` names the text in error messages
// ("origin:LINE: column 'size': ..."). An `offset` column is read by
// read_planning_solution_csv and ignored here.
Expected<std::vector<PackItem>> read_planning_csv(std::string_view text, std::string_view origin);

struct PlanningSolution {
  std::vector<PackItem> items;
  std::vector<uint64_t> offsets;
};
// Like read_planning_csv, and also requires and reads the `offset` column.
Expected<PlanningSolution> read_planning_solution_csv(std::string_view text, std::string_view origin);

// The items as CSV, with an `alignment` column when any item has an alignment
// other than 1, and an `offset` column when `offsets` has one per item.
std::string write_planning_csv(std::span<const PackItem> items, std::span<const uint64_t> offsets);

}  // namespace stowage::ir
