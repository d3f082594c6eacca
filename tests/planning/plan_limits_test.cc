// The planning pass at its limits: on-chip capacity shared with storages the
// function allocates itself or returns, sizes past what a storage can hold,
// block counts, and the time limit. Each case ends in a plan that verifies or
// in one clear error.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/packing.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/planner.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"
#include "plan_test_util.h"

namespace stowage::ir {
namespace {

constexpr const char* kKernels = R"(kernels ops """
__kernel void fill(__global float* a) { a[get_global_id(0)] = 1.0f; }
__kernel void fill_bytes(__global uchar* a) { a[get_global_id(0)] = 1; }
__kernel void add(__global const float* a, __global const float* b, __global float* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}
__kernel void read2(__global const uchar* a, __global const uchar* b, __global uchar* c) { c[0] = a[0] + b[0]; }
__kernel void blocks(__global const uint* tables, uint root, __global float* data) { }
"""

)";

Expected<Planned> plan(const std::string& body, const TargetDesc& target, const PlanOptions& options = {}) {
  return plan_and_verify(std::string(kKernels) + body, "l.stir", target, options);
}

TargetDesc opencl_target() { return TargetDesc::load("opencl").value_or_throw(); }

// Global memory at byte granularity, and on-chip memory with no fallback.
TargetDesc bare_target() {
  return TargetDesc::from_json(R"({"name": "bare", "description": "limits test", "table_entry_bytes": 4,
    "max_image_width": 16384, "max_image_height": 16384, "scopes": [
      {"name": "global", "kind": "buffer", "alignment": 1},
      {"name": "global.onchip", "aliases": ["global.vtcm"], "kind": "buffer", "alignment": 128,
       "capacity": 262144, "onchip": true}]})",
                               "bare.json")
      .value_or_throw();
}

TEST(PlanLimitsTest, ReturnedOnChipTensorOverTheCapacitySpills) {
  auto planned = plan(R"(fn main() -> Tensor[(262145,), uint8] {
  t = empty([262145], uint8, scope="global.vtcm")
  call_kernel(fill_bytes, [t], grid=[262145])
  return t
}
)", opencl_target());
  ASSERT_TRUE(planned.has_value()) << planned.error().message();
  EXPECT_EQ(planned->text, R"(fn main() -> Tensor[(262145,), uint8] {
  result0 = alloc_storage([262272], device=0, dtype=uint8, scope="global")
  t = alloc_tensor(result0, 0, [262145], uint8)
  call_kernel(fill_bytes, [t], grid=[262145])
  return t
}
)");
}

TEST(PlanLimitsTest, ReturnedOnChipTensorWithoutFallbackIsAnError) {
  auto planned = plan(R"(fn main() -> Tensor[(262145,), uint8] {
  t = empty([262145], uint8, scope="global.vtcm")
  call_kernel(fill_bytes, [t], grid=[262145])
  return t
}
)", bare_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "13:3: error: planning function 'main', tensor 't': the returned tensor needs 262272 bytes of scope "
            "'global.onchip', beside the storages the function allocates there itself; its capacity is 262144 and "
            "it has no fallback scope");
}

// The returned tensor stays on chip; the planned ones get what is left.
TEST(PlanLimitsTest, ReturnedOnChipTensorLeavesLessRoomForThePlannedOnes) {
  auto planned = plan(R"(fn main() -> Tensor[(50000,), float32] {
  a = empty([25000], float32, scope="global.vtcm")
  call_kernel(fill, [a], grid=[25000])
  b = empty([25000], float32, scope="global.vtcm")
  call_kernel(fill, [b], grid=[25000])
  t = empty([50000], float32, scope="global.vtcm")
  call_kernel(fill, [t], grid=[50000])
  c = empty([25000], float32, scope="global.vtcm")
  call_kernel(add, [a, b, c], grid=[25000])
  return t
}
)", opencl_target());
  ASSERT_TRUE(planned.has_value()) << planned.error().message();
  // t takes 200064 of the 262144 bytes from its birth on: a, b and c (100000
  // bytes each, a and b alive with c) no longer fit beside it.
  EXPECT_NE(planned->text.find("result0 = alloc_storage([200064], device=0, dtype=uint8, scope=\"global.vtcm\")"),
            std::string::npos)
      << planned->text;
  bool spilled = false;
  for (const ScopeReport& s : planned->report.scopes) spilled = spilled || (s.scope == "global" && s.spilled > 0);
  EXPECT_TRUE(spilled) << format_memory_report(planned->report);
}

TEST(PlanLimitsTest, WholeCapacityAllocatedByTheFunctionSpillsThePlannedTensors) {
  auto planned = plan(R"(fn main() -> Tensor[(256,), float32] {
  s = alloc_storage([262144], device=0, dtype=uint8, scope="global.vtcm")
  a = empty([256], float32, scope="global.vtcm")
  call_kernel(fill, [a], grid=[256])
  b = empty([256], float32, scope="global.vtcm")
  call_kernel(fill, [b], grid=[256])
  c = empty([256], float32, scope="global")
  call_kernel(add, [a, b, c], grid=[256])
  kill_object(s)
  return c
}
)", opencl_target());
  ASSERT_TRUE(planned.has_value()) << planned.error().message();
  EXPECT_NE(planned->text.find("arena0 = alloc_storage([2048], device=0, dtype=uint8, scope=\"global\")"),
            std::string::npos)
      << planned->text;
  ASSERT_EQ(planned->report.scopes.size(), 1u);
  EXPECT_EQ(planned->report.scopes[0].scope, "global");
  EXPECT_EQ(planned->report.scopes[0].spilled, 2u);
}

// Once the function's own storage is killed, the whole capacity is free again,
// but the planned storage lives from the entry: it gets none of it.
TEST(PlanLimitsTest, WholeCapacityWithoutFallbackIsAnError) {
  auto planned = plan(R"(fn main() -> Tensor[(256,), float32] {
  s = alloc_storage([262144], device=0, dtype=uint8, scope="global.vtcm")
  kill_object(s)
  a = empty([256], float32, scope="global.vtcm")
  call_kernel(fill, [a], grid=[256])
  c = empty([256], float32, scope="global")
  call_kernel(add, [a, a, c], grid=[256])
  return c
}
)", bare_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "error: planning function 'main': scope 'global.onchip' needs 1024 bytes, its capacity is 262144 (262144 "
            "taken by storages the function allocates itself or returns) and it has no fallback scope");
}

TEST(PlanLimitsTest, TensorsLargerThanAStorageAreAnError) {
  auto planned = plan(R"(fn main() -> Tensor[(1,), uint8] {
  a = empty([1, 9223372036854775807], uint8)
  b = empty([1, 9223372036854775807], uint8)
  c = empty([1], uint8)
  call_kernel(read2, [a, b, c], grid=[1])
  return c
}
)", bare_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "error: planning function 'main', scope 'global': its tensors need 18446744073709551614 bytes at once, "
            "more than one storage can hold (9223372036854775807 bytes)");

  // At the scope's alignment of 128, the packer itself refuses the sizes.
  planned = plan(R"(fn main() -> Tensor[(1,), uint8] {
  a = empty([1, 9223372036854775807], uint8)
  b = empty([1, 9223372036854775807], uint8)
  c = empty([1], uint8)
  call_kernel(read2, [a, b, c], grid=[1])
  return c
}
)", opencl_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "error: planning function 'main', scope 'global': the items' sizes and alignments add up to more than "
            "2^64 - 1 bytes");
}

TEST(PlanLimitsTest, ReturnedTensorLargerThanAStorageIsAnError) {
  auto planned = plan(R"(fn main() -> Tensor[(9223372036854775807,), uint8] {
  t = empty([9223372036854775807], uint8)
  call_kernel(fill_bytes, [t], grid=[1])
  return t
}
)", opencl_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "13:3: error: planning function 'main', tensor 't': its 9223372036854775807 bytes are more than one "
            "storage can hold");
}

TEST(PlanLimitsTest, BlockCountsPastTheLimitAreAnError) {
  auto planned = plan(R"(fn main(x: Tensor[(1,), float32]) -> Tensor[(1,), float32] {
  a = empty_discontiguous([1099511627776, 4], float32, scope="global", table_scope="global")
  call_kernel(blocks, [a], grid=[1])
  return x
}
)", opencl_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "13:3: error: planning function 'main', tensor 'a': its 1099511627776 blocks make more than 1048576 in the "
            "function's discontiguous tensors, the most the planner places");

  // Tens of millions of blocks: refused before anything is placed.
  planned = plan(R"(fn main(x: Tensor[(1,), float32]) -> Tensor[(1,), float32] {
  a = empty_discontiguous([30000000, 1], float32, scope="global", table_scope="global")
  call_kernel(blocks, [a], grid=[1])
  return x
}
)", opencl_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_NE(planned.error().message().find("its 30000000 blocks make more than 1048576"), std::string::npos);

  // Under the limit one by one, over it together.
  planned = plan(R"(fn main(x: Tensor[(1,), float32]) -> Tensor[(1,), float32] {
  a = empty_discontiguous([600000, 1], float32, scope="global", table_scope="global")
  call_kernel(blocks, [a], grid=[1])
  b = empty_discontiguous([600000, 1], float32, scope="global", table_scope="global")
  call_kernel(blocks, [b], grid=[1])
  return x
}
)", opencl_target());
  ASSERT_FALSE(planned.has_value());
  EXPECT_EQ(planned.error().message(),
            "15:3: error: planning function 'main', tensor 'b': its 600000 blocks make more than 1048576 in the "
            "function's discontiguous tensors, the most the planner places");
}

// With no time at all, planning still ends in a plan that verifies: the
// packer's first solution, and blocks placed as long as they are few.
TEST(PlanLimitsTest, NoTimeLeftStillGivesAValidPlan) {
  PlanOptions options;
  options.time_limit_seconds = 0;
  auto planned = plan(R"(fn main() -> Tensor[(256,), float32] {
  a = empty([256], float32, scope="global")
  call_kernel(fill, [a], grid=[256])
  b = empty([256], float32, scope="global")
  call_kernel(fill, [b], grid=[256])
  d = empty_discontiguous([4, 64], float32, scope="global.vtcm", table_scope="global")
  call_kernel(blocks, [d], grid=[1])
  c = empty([256], float32, scope="global")
  call_kernel(add, [a, b, c], grid=[256])
  return c
}
)", opencl_target(), options);
  ASSERT_TRUE(planned.has_value()) << planned.error().message();
}

TEST(PlaceBlocksLimitsTest, TooManyBlocksOrNoTimeLeftAreErrors) {
  std::vector<BlockRequest> requests = {{"a", 0, 2, 4, kMaxBlocks / 2, 4}, {"b", 1, 3, 4, kMaxBlocks / 2 + 1, 4}};
  Expected<BlockPlacement> placed = place_blocks({}, {}, requests);
  ASSERT_FALSE(placed.has_value());
  EXPECT_EQ(placed.error().message(), "blocks of 'b': more than 1048576 blocks to place in all");

  requests = {{"a", 0, 2, 4, UINT64_MAX, 4}};
  placed = place_blocks({}, {}, requests);
  ASSERT_FALSE(placed.has_value());
  EXPECT_EQ(placed.error().message(), "blocks of 'a': more than 1048576 blocks to place in all");

  // A deadline already past: few blocks are placed all the same, many are not.
  const auto past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  requests = {{"few", 0, 2, 4, 1000, 4}};
  placed = place_blocks({}, {}, requests, past);
  ASSERT_TRUE(placed.has_value()) << placed.error().message();
  EXPECT_EQ(placed->offsets[0].size(), 1000u);
  requests = {{"many", 0, 2, 4, 200000, 4}};
  placed = place_blocks({}, {}, requests, past);
  ASSERT_FALSE(placed.has_value());
  EXPECT_EQ(placed.error().message(), "the time limit ran out while placing the blocks of 'many'");
}

}  // namespace
}  // namespace stowage::ir
