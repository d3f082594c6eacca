// Tensor lifetimes that no contiguous placement packs within the live-bytes
// lower bound, and tensor-level programs built from them, for the planner
// benchmark (discontiguous_planning.cc) and its tests.
//
// Each tensor is alive over [lower, upper) (steps) and holds `units` units of
// bytes. With every tensor split into blocks of one size, placing blocks is
// interval colouring and reaches the lower bound; whole tensors cannot, which
// the packer proves (tests/planning/plan_discontiguous_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "stowage/ir/packing.h"

namespace stowage::bench {

struct Lifetime {
  int64_t lower, upper;
  uint64_t units;
};

struct FragmentationCase {
  std::string name;
  std::vector<Lifetime> tensors;
  uint64_t lower_bound_units;  // the most units alive at one moment
  uint64_t contiguous_units;   // the best contiguous packing (proven by the packer)
  int64_t blocks_per_unit;     // a tensor of u units is [u * blocks_per_unit, block_elements] float32
  int64_t block_elements;
};

// Seven tensors t0..t6, 5 units live at most; whole tensors need 6. At step 0,
// t0 (3 units) and t1 (2) fill the storage, so t1 lies at one end; at step 1,
// t2 (2) and t3 (1) fill the rest. At step 3, t4 (1) must take half of t1's
// old range. At step 4 t3 has died and t5 (2) needs two adjacent free units:
// t3's and the one t4 left are adjacent only with t5 at units 1-2 of 0-4, in
// the middle, so that at step 5 t6 (3) finds no three adjacent free units.
inline FragmentationCase seven_tensors() {
  return {"seven", {{0, 1, 3}, {0, 2, 2}, {1, 5, 2}, {1, 4, 1}, {3, 5, 1}, {4, 7, 2}, {5, 7, 3}}, 5, 6, 3, 4096};
}

// Eight tensors, 8 units live at most, 9 for whole tensors (found by searching
// random instances): at 32 KiB a unit, the bound is 256 KiB, the shipped
// on-chip capacity.
inline FragmentationCase eight_tensors() {
  return {"eight", {{4, 7, 3}, {0, 1, 2}, {5, 6, 4}, {1, 2, 4}, {2, 5, 2}, {3, 5, 3}, {2, 4, 1}, {0, 3, 4}}, 8, 9, 2,
          4096};
}

// The instance of tests/planning/packing_test.cc: 18 units live at most, 19 for
// whole tensors.
inline FragmentationCase fourteen_tensors() {
  return {"fourteen",
          {{2, 3, 5}, {1, 5, 1}, {2, 4, 1}, {3, 4, 3}, {1, 4, 3}, {0, 2, 4}, {4, 7, 2},
           {4, 5, 5}, {3, 5, 4}, {1, 5, 5}, {0, 2, 4}, {2, 5, 1}, {5, 6, 2}, {1, 3, 1}},
          18, 19, 1, 3584};
}

inline std::vector<FragmentationCase> fragmentation_cases() {
  return {seven_tensors(), eight_tensors(), fourteen_tensors()};
}

inline uint64_t unit_bytes(const FragmentationCase& c) {
  return static_cast<uint64_t>(c.blocks_per_unit * c.block_elements) * sizeof(float);
}

// The tensors as packing items of unit_bytes(c) bytes a unit.
inline std::vector<ir::PackItem> fragmentation_items(const FragmentationCase& c) {
  std::vector<ir::PackItem> items;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const Lifetime& t = c.tensors[i];
    items.push_back({"t" + std::to_string(i), t.lower, t.upper, t.units * unit_bytes(c), 1});
  }
  return items;
}

// A function whose tensors live exactly as the lifetimes say: at each step,
// the tensors that die are killed, then those born are allocated
// (empty_discontiguous in `scope`, tables in "global"). Kills are the only
// uses: the lifetimes, not the computation, are what is planned.
inline std::string fragmentation_program(const FragmentationCase& c, const std::string& scope) {
  int64_t end = 0;
  for (const Lifetime& t : c.tensors) end = std::max(end, t.upper);
  std::string body;
  for (int64_t step = 0; step <= end; ++step) {
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      if (c.tensors[i].upper == step) body += "  kill_object(t" + std::to_string(i) + ")\n";
    }
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const Lifetime& t = c.tensors[i];
      if (t.lower != step) continue;
      body += "  t" + std::to_string(i) + " = empty_discontiguous([" +
              std::to_string(static_cast<int64_t>(t.units) * c.blocks_per_unit) + ", " +
              std::to_string(c.block_elements) + "], float32, scope=\"" + scope + "\", table_scope=\"global\")\n";
    }
  }
  return "fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {\n" + body + "  return x\n}\n";
}

}  // namespace stowage::bench
