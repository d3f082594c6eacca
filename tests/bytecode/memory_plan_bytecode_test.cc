// The memory plan section (version 1.5): the planner's figures carried in the file,
// the round trip, and one malformed file per rule with its exact message.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <limits>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace testing;
using bytecode::SectionKind;

Executable make_planned_executable() {
  Executable exe = make_add_mul_executable();
  exe.memory_plans = {ScopePlan{"main", "global", 3, 8192, 6144, 12288, 8192, 0, 0, 0, 0, 0.25},
                      ScopePlan{"main", "global.texture", 2, 4096, 4096, 8192, 4096, 0, 0, 0, 0, 0.0}};
  exe.minor_version = 5;  // as read back
  return exe;
}

// Offsets inside the section: u32 count, then the first plan: str "main" (4 + 4),
// str "global" (4 + 6), nine u64 figures from byte 22, f64 seconds at byte 94.
constexpr uint64_t kFirstFunction = 4, kFirstFigures = 22, kFirstSeconds = 94, kSecondPlan = 102;

std::string refusal(const std::vector<uint8_t>& file) {
  auto exe = read_bytecode(file);
  if (exe) return "accepted";
  EXPECT_EQ(exe.error().kind(), ErrorKind::kInvalidInput);
  return exe.error().message();
}

TEST(MemoryPlanBytecode, RoundTripsAtVersion15) {
  const Executable exe = make_planned_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, bytecode::HeaderField::kMinor), 5);
  auto back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(back->memory_plans[0].seconds, 0.25);
  EXPECT_EQ(write_bytecode(*back), file);
}

TEST(MemoryPlanBytecode, Rules) {
  const uint64_t at = find_section(write_bytecode(make_planned_executable()), SectionKind::kMemoryPlan).offset;
  const std::string where = "bytecode: section 'memory plan' at byte";
  Executable bad = make_planned_executable();
  bad.memory_plans[0].function = "nope";
  EXPECT_EQ(refusal(write_bytecode(bad)),
            fmt::format("{} {}: plan 0: 'nope' is not a function of the file", where, at + kFirstFunction));
  bad = make_planned_executable();
  bad.memory_plans[1].scope = "global";
  EXPECT_EQ(refusal(write_bytecode(bad)), fmt::format("{} {}: plan 1: function 'main' has two plans for scope "
                                                      "'global'", where, at + kSecondPlan));
  bad = make_planned_executable();
  bad.memory_plans[0].lower_bound = 12289;
  EXPECT_EQ(refusal(write_bytecode(bad)),
            fmt::format("{} {}: plan of 'main', scope 'global': lower bound 12289, spilled 0 of 3 tensors and spilled "
                        "bytes 0 do not fit its 12288 naive bytes", where, at + kFirstFigures));
  bad = make_planned_executable();
  bad.memory_plans[0].spilled = 4;
  EXPECT_NE(refusal(write_bytecode(bad)).find("spilled 4 of 3 tensors"), std::string::npos);
  bad = make_planned_executable();
  bad.memory_plans[0].seconds = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(refusal(write_bytecode(bad)), fmt::format("{} {}: plan of 'main', scope 'global': planning time nan is "
                                                      "not a finite number of seconds", where, at + kFirstSeconds));
  bad = make_planned_executable();
  bad.memory_plans[0].seconds = -1;
  EXPECT_NE(refusal(write_bytecode(bad)).find("planning time -1 is not"), std::string::npos);
}

TEST(MemoryPlanBytecode, CountsAndVersionAreCheckedBeforeUse) {
  const std::vector<uint8_t> file = write_bytecode(make_planned_executable());
  const uint64_t at = find_section(file, SectionKind::kMemoryPlan).offset;
  std::vector<uint8_t> patched = file;
  put_le<uint32_t>(patched, at, 0xFFFFFFFFu);
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("bytecode: section 'memory plan' at byte {}: plan count 4294967295 exceeds "
                                          "the limit {}", at, bytecode::kMaxScopes));
  patched = file;
  put_le<uint16_t>(patched, bytecode::HeaderField::kMinor, 4);
  reseal(patched);
  EXPECT_EQ(refusal(patched), "bytecode: header at byte 10: version 1.4 files have no memory plan; it needs 1.5");
}

}  // namespace
}  // namespace stowage
