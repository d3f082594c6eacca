// The lifetime utility, and the memory layout the compiler records with it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"
#include "stowage/ir/lifetimes.h"

namespace stowage::ir {
namespace {

TEST(Lifetimes, EventsPutDeathsBeforeBirthsAndSkipWhatTakesNoSpace) {
  const std::vector<Lifetime> l = {{0, 4, 8}, {4, 6, 8}, {2, 2, 8}, {1, 3, 0}, {2, 5, 1}};
  std::vector<std::tuple<int64_t, uint32_t, bool>> got;
  for (const LifetimeEvent& e : lifetime_events(l)) got.emplace_back(e.time, e.index, e.starts);
  const std::vector<std::tuple<int64_t, uint32_t, bool>> want = {
      {0, 0, true}, {2, 4, true}, {4, 0, false}, {4, 1, true}, {5, 4, false}, {6, 1, false}};
  EXPECT_EQ(got, want);
  // 0 and 1 meet at no moment: the peak is 0's 8 bytes with 4's 1.
  EXPECT_EQ(peak_live_bytes(l), 9u);
  EXPECT_TRUE(alive_together(0, 4, 3, 6));
  EXPECT_FALSE(alive_together(0, 4, 4, 6));
}

TEST(Lifetimes, PeakSaturates) {
  const std::vector<Lifetime> l = {{0, 2, UINT64_MAX}, {1, 3, 2}};
  EXPECT_EQ(peak_live_bytes(l), UINT64_MAX);
  const std::vector<PackItem> items = {{"a", 0, 2, 5, 1}, {"b", 1, 3, 7, 4}};
  EXPECT_EQ(peak_live_bytes(lifetimes_of(items)), 12u);
}

std::string example(const std::string& name) {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/examples/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// add_mul_planned: a, b, c, d in one arena of 3072 bytes, e (returned) in a storage of its own.
TEST(MemoryLayout, TheCompilerRecordsItAndTheFileCarriesIt) {
  auto target = TargetDesc::load("opencl");
  ASSERT_TRUE(target);
  auto compiled = compile_text(example("add_mul_planned.stir"), "add_mul_planned.stir", *target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  ASSERT_EQ(compiled->layouts.size(), 1u);
  const FunctionLayout& main = compiled->layouts[0];
  EXPECT_EQ(main.function, "main");
  ASSERT_EQ(main.scopes.size(), 1u);
  const LayoutScope& vtcm = main.scopes[0];
  EXPECT_EQ(vtcm.scope, "global.vtcm");
  ASSERT_EQ(vtcm.storages.size(), 2u);
  EXPECT_EQ(vtcm.storages[0].nbytes, 3072u);
  EXPECT_EQ(vtcm.storages[0].tensors.size(), 4u);
  EXPECT_EQ(vtcm.storage_bytes(), 3072u + 1024u);
  EXPECT_EQ(vtcm.tensor_bytes(), 5u * 1024u);
  // The planner's bound covers its arena; the layout's the scope, e alive beside c and d.
  EXPECT_EQ(compiled->memory.scopes[0].lower_bound, 3072u);
  EXPECT_EQ(vtcm.lower_bound, 3072u);
  EXPECT_EQ(compiled->executable.memory_layouts, compiled->layouts);
  auto back = read_bytecode(write_bytecode(compiled->executable));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->memory_layouts, compiled->layouts);

  CompileOptions bare;
  bare.keep_memory_layout = false;
  auto without = compile_text(example("add_mul_planned.stir"), "add_mul_planned.stir", *target, bare);
  ASSERT_TRUE(without) << without.error().message();
  EXPECT_TRUE(without->executable.memory_layouts.empty());
  EXPECT_EQ(without->layouts, compiled->layouts);
}

}  // namespace
}  // namespace stowage::ir
