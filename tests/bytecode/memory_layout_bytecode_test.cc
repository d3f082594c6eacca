// The memory layout section (version 1.3): the round trip, and one malformed
// file per rule with its exact message.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace testing;
using bytecode::SectionKind;

// add_mul's main with a layout of two of its tensors in one storage.
Executable make_laid_out_executable() {
  Executable exe = make_add_mul_executable();
  LayoutStorage vtcm{"vtcm", 4096, 0, 13, {{"a", 0, 1024, 1, 7}, {"b", 1024, 1024, 3, 8}}};
  exe.memory_layouts = {FunctionLayout{"main", 13, {LayoutScope{"global.vtcm", {vtcm}, 2048}}}};
  exe.minor_version = 3;  // as read back
  return exe;
}

// Offsets inside the section of make_laid_out_executable's file: u32 count, str
// "main", u64 steps, u32 scopes, str "global.vtcm", u64 lower bound, u32 storages,
// str "vtcm", u64 nbytes, start, end, u32 tensors, then tensors of 37 bytes.
constexpr uint64_t kFunctionName = 4, kLowerBound = 39, kTensorCount = 83, kTensorA = 87, kTensorB = 124;

std::string refusal(const std::vector<uint8_t>& file) {
  auto exe = read_bytecode(file);
  if (exe) return "accepted";
  EXPECT_EQ(exe.error().kind(), ErrorKind::kInvalidInput);
  return exe.error().message();
}

uint64_t section_of(const Executable& exe) {
  return find_section(write_bytecode(exe), SectionKind::kMemoryLayout).offset;
}

TEST(MemoryLayoutBytecode, RoundTripsAtVersion13) {
  const Executable exe = make_laid_out_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, bytecode::HeaderField::kMinor), 3);
  EXPECT_EQ(find_section(file, SectionKind::kMemoryLayout).size, kTensorB + 37);
  auto back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(back->memory_layouts[0].scopes[0].storage_bytes(), 4096u);
  EXPECT_EQ(back->memory_layouts[0].scopes[0].tensor_bytes(), 2048u);
  EXPECT_EQ(write_bytecode(*back), file);
  // Without a layout there is no section, and the file keeps its older version.
  EXPECT_EQ(get_le<uint16_t>(write_bytecode(make_add_mul_executable()), bytecode::HeaderField::kMinor), 0);
}

TEST(MemoryLayoutBytecode, Rules) {
  const uint64_t at = section_of(make_laid_out_executable());
  const std::string where = fmt::format("bytecode: section 'memory layout' at byte");
  Executable bad = make_laid_out_executable();
  bad.memory_layouts[0].scopes[0].storages[0].tensors[1].offset = 3500;
  EXPECT_EQ(refusal(write_bytecode(bad)),
            fmt::format("{} {}: layout of 'main': tensor 'b': 1024 bytes at offset 3500 do not fit storage 'vtcm' of "
                        "4096 bytes", where, at + kTensorB + 5));
  bad = make_laid_out_executable();
  bad.memory_layouts[0].scopes[0].storages[0].tensors[0].end = 14;
  EXPECT_EQ(refusal(write_bytecode(bad)), fmt::format("{} {}: layout of 'main': lifetime [1, 14) is not within the "
                                                      "function's 13 steps", where, at + kTensorA + 21));
  bad = make_laid_out_executable();
  bad.memory_layouts[0].scopes[0].lower_bound = 2049;
  EXPECT_EQ(refusal(write_bytecode(bad)), fmt::format("{} {}: layout of 'main': scope 'global.vtcm': lower bound 2049 "
                                                      "exceeds its 2048 tensor bytes", where, at + kLowerBound));
  bad = make_laid_out_executable();
  bad.memory_layouts[0].function = "nope";
  EXPECT_EQ(refusal(write_bytecode(bad)),
            fmt::format("{} {}: layout 0: 'nope' is not a function of the file", where, at + kFunctionName));
  bad = make_laid_out_executable();
  bad.memory_layouts.push_back(bad.memory_layouts[0]);
  EXPECT_EQ(refusal(write_bytecode(bad)), fmt::format("{} {}: function count 2 exceeds the limit 1", where, at));
}

TEST(MemoryLayoutBytecode, CountsAndVersionAreCheckedBeforeUse) {
  const std::vector<uint8_t> file = write_bytecode(make_laid_out_executable());
  const uint64_t at = find_section(file, SectionKind::kMemoryLayout).offset;
  std::vector<uint8_t> patched = file;
  put_le<uint32_t>(patched, at + kTensorCount, 0xFFFFFFFFu);
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("bytecode: section 'memory layout' at byte {}: layout of 'main': tensor "
                                          "count 4294967295 exceeds the limit {}",
                                          at + kTensorCount, bytecode::kMaxLayoutEntries - 1));
  patched = file;
  put_le<uint32_t>(patched, at + kTensorCount, 3);
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("bytecode: section 'memory layout' at byte {}: layout of 'main': tensor "
                                          "count 3 cannot fit in the 74 bytes left in the section",
                                          at + kTensorCount));
  patched = file;
  put_le<uint16_t>(patched, bytecode::HeaderField::kMinor, 2);
  reseal(patched);
  EXPECT_EQ(refusal(patched), "bytecode: header at byte 10: version 1.2 files have no memory layout; it needs 1.3");
}

}  // namespace
}  // namespace stowage
