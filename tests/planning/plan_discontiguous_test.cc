// The planning pass on discontiguous tensors: empty_discontiguous becomes
// alloc_discontiguous_tensor with tables packed and blocks in free space; the
// planned program passes the verifier. Checked at the IR level.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../../benchmarks/fragmentation_programs.h"
#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/planner.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"
#include "plan_test_util.h"

namespace stowage::ir {
namespace {

constexpr const char* kKernels = R"(kernels ops """
__kernel void fill(__global const float* x, __global const uint* tables, uint root, __global float* data) {
  size_t i = get_global_id(0);
  data[i] = x[i];
}
"""

)";

Expected<Planned> plan(const std::string& body, const TargetDesc& target, const PlanOptions& options = {}) {
  return plan_and_verify(std::string(kKernels) + body, "d.stir", target, options);
}

TargetDesc opencl_target() { return TargetDesc::load("opencl").value_or_throw(); }

TEST(PlanDiscontiguousTest, BecomesAllocDiscontiguousTensorAndVerifies) {
  auto planned = plan(R"(fn main(x: Tensor[(4, 64), float32]) -> Tensor[(4, 64), float32] {
  t = empty_discontiguous([4, 64], float32, scope="global.vtcm", table_scope="global")
  call_kernel(fill, [x, t], grid=[64])
  y = empty([4, 64], float32, scope="global")
  copy_tensor(t, y)
  return y
}
)", opencl_target());
  ASSERT_TRUE(planned) << planned.error().message();
  EXPECT_EQ(planned->text, R"(fn main(x: Tensor[(4, 64), float32]) -> Tensor[(4, 64), float32] {
  arena0 = alloc_storage([1024], device=0, dtype=uint8, scope="global.vtcm")
  arena1 = alloc_storage([128], device=0, dtype=uint8, scope="global")
  t = alloc_discontiguous_tensor(arena1, 0, arena0, [0, 256, 512, 768], [4, 64], float32)
  call_kernel(fill, [x, t], grid=[64])
  result0 = alloc_storage([1024], device=0, dtype=uint8, scope="global")
  y = alloc_tensor(result0, 0, [4, 64], float32)
  copy_tensor(t, y)
  kill_object(t)
  return y
}
)");
  ASSERT_EQ(planned->report.scopes.size(), 2u);
  const ScopeReport& blocks = planned->report.scopes[0];
  EXPECT_EQ(blocks.scope, "global.vtcm");
  EXPECT_EQ(blocks.tensors, 1u);
  EXPECT_EQ(blocks.discontiguous, 1u);
  EXPECT_EQ(blocks.blocks, 4u);
  EXPECT_EQ(blocks.lower_bound, 1024u);
  EXPECT_EQ(blocks.planned_bytes, 1024u);
  EXPECT_TRUE(blocks.proven_optimal);
  const ScopeReport& tables = planned->report.scopes[1];
  EXPECT_EQ(tables.scope, "global");
  EXPECT_EQ(tables.tensors, 1u);  // t's tables; y, returned, has its own storage
  EXPECT_EQ(tables.discontiguous, 0u);
  EXPECT_EQ(tables.lower_bound, 16u);  // one table of 4 entries of 4 bytes
  EXPECT_NE(format_memory_report(planned->report).find("main global.vtcm: blocks of 1 discontiguous tensor (4 blocks)"),
            std::string::npos)
      << format_memory_report(planned->report);
}

// Tables back to back, breadth-first: the root (2 entries), then 2 tables of 3.
// In one storage with the blocks, the blocks follow the tables (32 bytes).
TEST(PlanDiscontiguousTest, RankThreeTablesLieBackToBackBesideTheBlocks) {
  auto planned = plan(R"(fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  t = empty_discontiguous([2, 3, 16], float32, scope="global.vtcm", table_scope="global.vtcm")
  kill_object(t)
  return x
}
)", opencl_target());
  ASSERT_TRUE(planned) << planned.error().message();
  EXPECT_NE(planned->text.find("t = alloc_discontiguous_tensor(arena0, [0, 8, 20], arena0, [32, 96, 160, 224, 288, "
                               "352], [2, 3, 16], float32)"),
            std::string::npos)
      << planned->text;
  EXPECT_NE(planned->text.find("arena0 = alloc_storage([512]"), std::string::npos) << planned->text;
}

// Whole tensors sit at multiples of the scope's alignment (128); blocks need
// only their element size, so they take the holes a 64-byte tensor leaves.
TEST(PlanDiscontiguousTest, BlocksFillHolesThatAWholeTensorCannotUse) {
  const std::string body = R"(fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  a = empty([16], float32, scope="global")
  b = empty([16], float32, scope="global")
  t = empty_discontiguous([2, 16], float32, scope="global", table_scope="global.vtcm")
  kill_object(a)
  kill_object(b)
  kill_object(t)
  return x
}
)";
  auto split = plan(body, opencl_target());
  ASSERT_TRUE(split) << split.error().message();
  EXPECT_NE(split->text.find("arena1 = alloc_storage([256], device=0, dtype=uint8, scope=\"global\")"),
            std::string::npos)
      << split->text;
  EXPECT_NE(split->text.find(", arena1, [64, 192], [2, 16], float32)"), std::string::npos) << split->text;
  PlanOptions together;
  together.split_discontiguous = false;
  auto whole = plan(body, opencl_target(), together);
  ASSERT_TRUE(whole) << whole.error().message();
  EXPECT_NE(whole->text.find("arena1 = alloc_storage([384], device=0, dtype=uint8, scope=\"global\")"),
            std::string::npos)
      << whole->text;
  EXPECT_NE(whole->text.find(", arena1, [0, 64], [2, 16], float32)"), std::string::npos) << whole->text;
}

// The tensor's bytes do not fit on chip: its blocks move to the fallback scope,
// its tables (in another scope) stay, and the program still verifies.
TEST(PlanDiscontiguousTest, BlocksBeyondTheCapacitySpillToTheFallback) {
  auto target = TargetDesc::from_json(R"({"scopes": [
    {"name": "global", "alignment": 128},
    {"name": "global.onchip", "aliases": ["global.vtcm"], "alignment": 128, "capacity": 2048, "onchip": true,
     "fallback": "global"}]})", "small").value_or_throw();
  auto planned = plan(R"(fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  a = empty([256], float32, scope="global.vtcm")
  t = empty_discontiguous([8, 64], float32, scope="global.vtcm", table_scope="global.vtcm")
  kill_object(a)
  u = empty_discontiguous([2, 64], float32, scope="global.vtcm", table_scope="global")
  kill_object(t)
  kill_object(u)
  return x
}
)", target);
  ASSERT_TRUE(planned) << planned.error().message();
  ASSERT_EQ(planned->report.scopes.size(), 2u);
  const ScopeReport& onchip = planned->report.scopes[0];
  EXPECT_EQ(onchip.scope, "global.vtcm");
  EXPECT_LE(onchip.planned_bytes, 2048u);
  EXPECT_EQ(onchip.discontiguous, 1u);  // u's blocks
  const ScopeReport& global = planned->report.scopes[1];
  EXPECT_EQ(global.scope, "global");
  EXPECT_EQ(global.spilled, 1u);
  EXPECT_EQ(global.spilled_bytes, 2048u);  // t's blocks: the most bytes for the longest time
  EXPECT_EQ(global.discontiguous, 1u);
  // t's tables stay on chip; its blocks go to global, after u's tables (8 bytes at 0).
  EXPECT_NE(planned->text.find("t = alloc_discontiguous_tensor(arena0, 1024, arena1, [8, 264, "), std::string::npos)
      << planned->text;
}

TEST(PlanDiscontiguousTest, NaiveStrategyGivesEachPartItsOwnStorage) {
  PlanOptions naive;
  naive.strategy = PlanStrategy::kNaive;
  auto planned = plan(R"(fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  t = empty_discontiguous([2, 2, 8], int16, scope="global.vtcm", table_scope="global")
  kill_object(t)
  return x
}
)", opencl_target(), naive);
  ASSERT_TRUE(planned) << planned.error().message();
  EXPECT_NE(planned->text.find("t = alloc_discontiguous_tensor(storage1, [0, 8, 16], storage0, [0, 16, 32, 48], [2, "
                               "2, 8], int16)"),
            std::string::npos)
      << planned->text;
  EXPECT_NE(planned->text.find("kill_object(storage0)"), std::string::npos) << planned->text;
  EXPECT_NE(planned->text.find("kill_object(storage1)"), std::string::npos) << planned->text;
}

// Offsets are written into table entries: past 2^32 - 1 they cannot be.
TEST(PlanDiscontiguousTest, OffsetsBeyondATableEntryAreAnError) {
  auto planned = plan(R"(fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  big = empty([1073741824, 2], float32, scope="global")
  t = empty_discontiguous([2, 16], float32, scope="global", table_scope="global.vtcm")
  kill_object(big)
  kill_object(t)
  return x
}
)", opencl_target());
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message().find("does not fit a 4-byte table entry"), std::string::npos)
      << planned.error().message();
}

// On-chip bytes planned, and tensors / bytes spilled out of it.
struct OnChip {
  uint64_t bytes = 0;
  uint64_t spilled = 0;
  uint64_t spilled_bytes = 0;
};

OnChip on_chip(const MemoryReport& report) {
  OnChip out;
  for (const ScopeReport& r : report.scopes) {
    if (r.scope == "global.vtcm") out.bytes += r.planned_bytes;
    out.spilled += r.spilled;
    out.spilled_bytes += r.spilled_bytes;
  }
  return out;
}

// The programs of the benchmark: the packer proves that whole tensors need more
// than the lower bound, which the shipped capacity holds; so the contiguous
// plan spills and the discontiguous one fits, at the lower bound.
TEST(PlanDiscontiguousTest, FragmentationSpillsWholeTensorsButNotBlocks) {
  const TargetDesc target = opencl_target();
  const uint64_t capacity = target.find_scope("global.vtcm")->capacity;
  TargetDesc unlimited = target;
  for (ScopeDesc& s : unlimited.scopes) s.capacity = 0;
  for (const bench::FragmentationCase& c : bench::fragmentation_cases()) {
    SCOPED_TRACE(c.name);
    const uint64_t unit = bench::unit_bytes(c);
    const std::vector<PackItem> items = bench::fragmentation_items(c);
    const uint64_t bound = live_bytes_lower_bound(items);
    ASSERT_EQ(bound, c.lower_bound_units * unit);
    ASSERT_LE(bound, capacity);
    auto packed = pack(items);
    ASSERT_TRUE(packed);
    EXPECT_TRUE(packed->proven_optimal);
    EXPECT_EQ(packed->height, c.contiguous_units * unit);
    EXPECT_GT(packed->height, capacity);

    const std::string program = bench::fragmentation_program(c, "global.vtcm");
    PlanOptions together;
    together.split_discontiguous = false;
    auto whole_needed = plan(program, unlimited, together);
    ASSERT_TRUE(whole_needed) << whole_needed.error().message();
    EXPECT_EQ(on_chip(whole_needed->report).bytes, c.contiguous_units * unit);
    auto whole = plan(program, target, together);
    ASSERT_TRUE(whole) << whole.error().message();
    EXPECT_EQ(on_chip(whole->report).spilled, 1u);
    EXPECT_GT(on_chip(whole->report).spilled_bytes, 0u);
    EXPECT_LE(on_chip(whole->report).bytes, capacity);

    auto split = plan(program, target);
    ASSERT_TRUE(split) << split.error().message();
    EXPECT_EQ(on_chip(split->report).bytes, bound);
    EXPECT_EQ(on_chip(split->report).spilled, 0u);
    EXPECT_TRUE(split->report.scopes[0].proven_optimal);
    // Some tensor's blocks are not back to back: they took separate holes.
    bool scattered = false;
    for (const Binding& b : split->module.functions[0].bindings) {
      if (b.op != Op::kAllocDiscontiguousTensor) continue;
      const uint64_t block = static_cast<uint64_t>(b.shape.back()) * sizeof(float);
      for (size_t i = 1; i < b.data_offsets.size(); ++i) {
        scattered |= static_cast<uint64_t>(b.data_offsets[i] - b.data_offsets[i - 1]) != block;
      }
    }
    EXPECT_TRUE(scattered);
  }
}

// Blocks kept together are planned exactly as `empty` tensors of the same bytes.
TEST(PlanDiscontiguousTest, BlocksKeptTogetherPlanLikeEmptyTensors) {
  const TargetDesc target = opencl_target();
  for (const bench::FragmentationCase& c : bench::fragmentation_cases()) {
    SCOPED_TRACE(c.name);
    std::string program = bench::fragmentation_program(c, "global.vtcm");
    PlanOptions together;
    together.split_discontiguous = false;
    auto whole = plan(program, target, together);
    ASSERT_TRUE(whole) << whole.error().message();
    for (size_t at; (at = program.find("empty_discontiguous(")) != std::string::npos;) {
      program.replace(at, 20, "empty(");
    }
    for (size_t at; (at = program.find(", table_scope=\"global\"")) != std::string::npos;) {
      program.replace(at, 22, "");
    }
    auto contiguous = plan(program, target);
    ASSERT_TRUE(contiguous) << contiguous.error().message();
    EXPECT_EQ(on_chip(whole->report).bytes, on_chip(contiguous->report).bytes);
    EXPECT_EQ(on_chip(whole->report).spilled_bytes, on_chip(contiguous->report).spilled_bytes);
    // Offsets too: each tensor's first block where its `empty` twin lies.
    std::map<std::string, int64_t> first_block, offset;
    for (const Binding& b : whole->module.functions[0].bindings) {
      if (b.op == Op::kAllocDiscontiguousTensor) first_block[b.result] = b.data_offsets.at(0);
    }
    for (const Binding& b : contiguous->module.functions[0].bindings) {
      if (b.op == Op::kAllocTensor) offset[b.result] = b.offset;
    }
    EXPECT_EQ(first_block, offset);
  }
}

// Random mixes of empty and empty_discontiguous tensors (some with no blocks or
// empty blocks) in a small on-chip scope and global memory: every plan (split,
// kept together, naive) verifies, and on-chip storage stays within capacity.
TEST(PlanDiscontiguousTest, RandomProgramsVerifyUnderEveryStrategy) {
  auto target = TargetDesc::from_json(R"({"table_entry_bytes": 4, "scopes": [
    {"name": "global", "alignment": 64},
    {"name": "global.vtcm", "alignment": 128, "capacity": 1024, "onchip": true, "fallback": "global"}]})",
                                      "small").value_or_throw();
  TargetDesc unlimited = target;
  for (ScopeDesc& s : unlimited.scopes) s.capacity = 0;
  std::mt19937_64 rng(2024);
  auto below = [&](uint64_t n) { return static_cast<int64_t>(rng() % n); };
  const char* scopes[] = {"global", "global.vtcm"};
  uint64_t spills = 0;
  for (int p = 0; p < 40; ++p) {
    std::string body;
    std::vector<std::string> live;
    const int steps = 4 + static_cast<int>(below(20));
    for (int s = 0; s < steps; ++s) {
      std::string t = "t" + std::to_string(s);
      const char* scope = scopes[below(2)];
      const char* dtype = below(2) == 0 ? "float32" : "int16";
      if (below(3) == 0) {
        body += "  " + t + " = empty([" + std::to_string(1 + below(200)) + "], " + dtype + ", scope=\"" + scope +
                "\")\n";
      } else {
        // Extents of 0 now and then: no blocks, or empty blocks.
        std::string shape = std::to_string(below(5)) + ", " + std::to_string(below(41));
        if (below(2) == 0) shape = std::to_string(below(3) + 1) + ", " + shape;
        body += "  " + t + " = empty_discontiguous([" + shape + "], " + dtype + ", scope=\"" + scope +
                "\", table_scope=\"" + scopes[below(2)] + "\")\n";
      }
      live.push_back(t);
      while (!live.empty() && below(3) == 0) {  // some die now, the rest at the end
        size_t k = static_cast<size_t>(below(live.size()));
        body += "  kill_object(" + live[k] + ")\n";
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    const std::string program = "fn main(x: Tensor[(4), float32]) -> Tensor[(4), float32] {\n" + body +
                                "  return x\n}\n";
    PlanOptions together, naive;
    together.split_discontiguous = false;
    naive.strategy = PlanStrategy::kNaive;
    for (const PlanOptions& options : {PlanOptions{}, together, naive}) {
      // The naive reference does not spill (as for empty): it gets no capacity.
      auto planned = plan(program, options.strategy == PlanStrategy::kNaive ? unlimited : target, options);
      ASSERT_TRUE(planned) << planned.error().message() << "\n" << program;
      for (const ScopeReport& r : planned->report.scopes) {
        spills += r.spilled;
        EXPECT_GE(r.planned_bytes, r.lower_bound) << program;
        if (r.scope == "global.vtcm" && options.strategy == PlanStrategy::kPacked) {
          EXPECT_LE(r.planned_bytes, 1024u) << program;
        }
      }
    }
  }
  EXPECT_GT(spills, 0u);  // the capacity was in play
}

}  // namespace
}  // namespace stowage::ir
