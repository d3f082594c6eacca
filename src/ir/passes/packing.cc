// Offset packing: the core of static memory planning.
//
// The problem. Each item is alive over [lower, upper) and needs `size` bytes at
// an offset that is a multiple of its alignment. Items alive at a common moment
// must not share a byte. The height of a packing is the largest offset + size;
// the goal is the smallest height or, given a capacity, any height within it.
// This is dynamic storage allocation (two-dimensional packing with the time
// axis fixed), NP-hard in general. The method follows the canonical-packing
// search of Moffitt's MiniMalloc (ASPLOS 2023), written anew here.
//
// What pack() guarantees.
//  - The result is always a valid packing: every offset is aligned, and no two
//    items alive together overlap in bytes. pack() runs the independent checker
//    (packing_check.cc) on its own result before returning it.
//  - lower_bound is the largest total of bytes alive at one moment (and at
//    least the size of any never-alive item, see below): no packing is lower.
//    proven_optimal is set when height == lower_bound, or when the search has
//    shown every lower height infeasible.
//  - A first solution is always produced, however small the budget.
//  - The budget is time (PackOptions::time_limit_seconds). Within it, the work
//    is counted in steps: a step is one candidate tried (by the greedy start,
//    one per item placed), plus, in the search, one more per 64 entries of work
//    (items scanned, sections checked, overlap lists walked), so that steps
//    track time on small and large instances alike. Restarts are sized in
//    steps, so a search that ends before the time limit gives the same offsets
//    on every run and machine; PackOptions::max_steps caps the steps, for
//    experiments that must repeat exactly. When the time limit cuts a search
//    short, stopped_by_time says so and that run may differ from another.
//
// How.
//  1. Items of size 0 or never alive (lower >= upper) take no space at any
//     moment: they get offset 0. Like every item they lie inside the storage,
//     so the height is at least the size of a never-alive item.
//  2. The rest split into groups connected in time (no item of one group is
//     alive with an item of another); each group is packed on its own, all
//     from offset 0, and the height is the largest group height.
//  3. Per group, sections are computed (packing_sections.cc): the sets of
//     items alive between two consecutive births or deaths. The largest section
//     total is the group's lower bound.
//  4. A greedy start (packing_greedy.cc): items largest (or most crowded)
//     first, each in the tightest or the lowest gap left by the items placed
//     before it that overlap it in time, found through a max tree over births:
//     O(n k log n) for n items with k alive together. The best of three orders
//     is kept. Groups too large for the search (over 4096 items) end here.
//  5. An exact search (packing_search.cc) for each group whose greedy height is
//     above the target: a depth-first search over canonical packings, in two
//     branchings (items in order of offset and rank; or which item fills the
//     lowest floor, or none), pruned by section bounds and dominance, split
//     into independent pieces as they appear, with a memo of the pieces
//     settled, restarted under four item rankings and with shuffled first
//     choices. With a capacity, it looks for
//     a packing within it (and, if there is none and lower_when_over is set,
//     goes on as below to report the best height). Without one, it first asks
//     for the lower bound itself, with three quarters of the budget (real
//     instances mostly reach it), then bisects between the highest height
//     shown infeasible or abandoned and the best height found, each attempt
//     taking half of what is left.

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "packing_internal.h"

namespace stowage::ir {
namespace {

using packing::Instance;
using packing::Placement;
using packing::SearchOutcome;
using packing::StepCounter;

Status validate(std::span<const PackItem> items) {
  // Any greedy placement puts an item at most at the sum of the sizes and
  // alignment paddings below it: if that sum fits in 64 bits, no offset
  // computed later can overflow.
  if (items.size() >= std::numeric_limits<uint32_t>::max())
    return Error(ErrorKind::kInvalidInput, "too many items to pack: " + std::to_string(items.size()));
  unsigned __int128 worst = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].alignment == 0)
      return Error(ErrorKind::kInvalidInput, "item '" + items[i].id + "': alignment must be at least 1");
    worst += static_cast<unsigned __int128>(items[i].size) + (items[i].alignment - 1);
  }
  if (worst > std::numeric_limits<uint64_t>::max())
    return Error(ErrorKind::kInvalidInput,
                 "the items' sizes and alignments add up to more than 2^64 - 1 bytes");
  return Status::ok();
}

// What is known about one group after the work on it.
struct GroupState {
  Placement placement;
  uint64_t proven_low = 0;  // every height below is infeasible
};

// Lowers the group's height towards `floor` (below it nothing is gained).
void minimise_group(packing::ExactSearch& search, const Instance& in, GroupState& group, uint64_t floor,
                    StepCounter& steps, bool floor_first = true) {
  uint64_t low = std::max(floor, in.lower_bound);
  uint64_t high = group.placement.height;
  bool first = floor_first;
  while (low < high && !steps.exhausted()) {
    // The lower bound itself first, with most of the budget: real instances
    // often reach it. Then bisection, half of what is left per attempt.
    const uint64_t target = first ? low : low + (high - low) / 2;
    const double share = first ? 0.75 : 0.5;
    StepCounter slice = steps.slice(std::max<uint64_t>(static_cast<uint64_t>(steps.left() * share), 1), share);
    first = false;
    std::vector<uint64_t> offsets;
    const SearchOutcome outcome = search.within(target, slice, offsets);
    steps.absorb(slice);
    if (outcome == SearchOutcome::kFound) {
      group.placement.height = packing::height_of(in, offsets);
      group.placement.offsets = std::move(offsets);
      high = group.placement.height;
    } else {
      // Infeasible: proven. Stopped: abandoned, try an easier target.
      if (outcome == SearchOutcome::kInfeasible) group.proven_low = std::max(group.proven_low, target + 1);
      low = target + 1;
    }
  }
}

// Looks for a packing of the group within `capacity`; when there is none and
// `lower` is set, lowers its height as far as the budget allows, to say how
// close a packing comes.
void fit_group(const Instance& in, GroupState& group, uint64_t capacity, bool lower, StepCounter& steps) {
  packing::ExactSearch search(in);
  std::vector<uint64_t> offsets;
  // Most of the time to fit; a tenth kept, when asked, to come closer if nothing fits.
  StepCounter fit = steps.slice(steps.left(), lower ? 0.9 : 1.0);
  const SearchOutcome outcome = search.within(capacity, fit, offsets);
  steps.absorb(fit);
  if (outcome == SearchOutcome::kFound) {
    group.placement.height = packing::height_of(in, offsets);
    group.placement.offsets = std::move(offsets);
    return;
  }
  if (outcome == SearchOutcome::kInfeasible) group.proven_low = std::max(group.proven_low, capacity + 1);
  // Just over the capacity is likely as hard as within it: halve the distance instead,
  // unless the capacity is under the lower bound, which real instances often reach.
  if (lower) minimise_group(search, in, group, capacity + 1, steps, /*floor_first=*/capacity < in.lower_bound);
}

}  // namespace

Expected<PackResult> pack(std::span<const PackItem> items, const PackOptions& options) {
  const auto start = StepCounter::Clock::now();
  STOWAGE_TRY(validate(items));
  const auto limit = std::chrono::duration_cast<StepCounter::Clock::duration>(
      std::chrono::duration<double>(std::max(0.0, std::min(options.time_limit_seconds, 1e9))));
  StepCounter steps(options.max_steps.value_or(std::numeric_limits<uint64_t>::max()), start + limit);

  PackResult result;
  result.offsets.assign(items.size(), 0);
  std::vector<uint32_t> packed;
  for (uint32_t i = 0; i < items.size(); ++i) {
    if (items[i].size > 0 && items[i].lower < items[i].upper) {
      packed.push_back(i);
    } else {
      result.lower_bound = std::max(result.lower_bound, items[i].size);  // never alive, still inside
    }
  }
  const std::vector<Instance> groups = packing::split_into_instances(items, packed);
  std::vector<GroupState> states(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    states[g].placement = packing::best_greedy_placement(groups[g], steps);
    states[g].proven_low = groups[g].lower_bound;
    result.lower_bound = std::max(result.lower_bound, groups[g].lower_bound);
  }

  // Work on the searchable groups that stand above the target, highest first.
  std::vector<size_t> order;
  for (size_t g = 0; g < groups.size(); ++g)
    if (packing::searchable(groups[g])) order.push_back(g);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return states[a].placement.height > states[b].placement.height;
  });
  uint64_t settled = result.lower_bound;  // no group needs to go below this
  for (size_t k = 0; k < order.size(); ++k) {
    const Instance& in = groups[order[k]];
    GroupState& state = states[order[k]];
    const uint64_t goal = options.capacity ? *options.capacity : settled;
    if (state.placement.height > goal && !steps.exhausted()) {
      // Share what is left among this group and the later ones above the goal.
      const auto above = std::count_if(order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                                       [&](size_t g) { return states[g].placement.height > goal; });
      StepCounter share = steps.slice(steps.left() / static_cast<uint64_t>(above), 1.0 / static_cast<double>(above));
      if (options.capacity) {
        fit_group(in, state, *options.capacity, options.lower_when_over, share);
      } else {
        packing::ExactSearch search(in);
        minimise_group(search, in, state, settled, share);
      }
      steps.absorb(share);
    }
    settled = std::max(settled, state.placement.height);
  }

  uint64_t proven_low = result.lower_bound;
  for (const PackItem& item : items) result.height = std::max(result.height, item.size);  // offset 0 ones
  for (size_t g = 0; g < groups.size(); ++g) {
    const Instance& in = groups[g];
    for (uint32_t k = 0; k < in.count(); ++k) result.offsets[in.item[k]] = states[g].placement.offsets[k];
    result.height = std::max(result.height, states[g].placement.height);
    proven_low = std::max(proven_low, states[g].proven_low);
  }
  result.proven_optimal = result.height <= proven_low;
  result.fits = !options.capacity || result.height <= *options.capacity;
  result.proven_unfit = options.capacity && proven_low > *options.capacity;
  result.steps = steps.used();
  result.stopped_by_time = steps.time_up();

  if (Status status = check_packing(items, result.offsets); !status)
    return Error(ErrorKind::kRuntime, "internal error: the packer produced an invalid packing: " +
                                          status.error().message());
  result.seconds = std::chrono::duration<double>(StepCounter::Clock::now() - start).count();
  return result;
}

}  // namespace stowage::ir
