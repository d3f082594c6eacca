// The planning CSV format: reading, writing, and one exact error per mistake.
#include <gtest/gtest.h>

#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

std::string error_of(std::string_view text) {
  Expected<std::vector<PackItem>> items = read_planning_csv(text, "t.csv");
  return items ? "no error" : items.error().message();
}

TEST(PlanningCsv, ReadsItems) {
  Expected<std::vector<PackItem>> items =
      read_planning_csv("id,lower,upper,size\r\nb1,0,3,4\r\n\r\nb2, -3 ,9,4\r\n", "t.csv");
  ASSERT_TRUE(items.has_value()) << items.error().message();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].id, "b1");
  EXPECT_EQ((*items)[0].upper, 3);
  EXPECT_EQ((*items)[0].alignment, 1u);
  EXPECT_EQ((*items)[1].lower, -3);
  EXPECT_EQ((*items)[1].size, 4u);
}

TEST(PlanningCsv, ColumnsInAnyOrderWithAlignmentAndOffset) {
  Expected<PlanningSolution> solution =
      read_planning_solution_csv("size,offset,id,alignment,upper,lower\n8,16,x,16,5,1\n", "t.csv");
  ASSERT_TRUE(solution.has_value()) << solution.error().message();
  ASSERT_EQ(solution->items.size(), 1u);
  EXPECT_EQ(solution->items[0].alignment, 16u);
  EXPECT_EQ(solution->items[0].lower, 1);
  EXPECT_EQ(solution->offsets, std::vector<uint64_t>{16});
  // The item reader ignores the offset column.
  EXPECT_EQ(error_of("size,offset,id,alignment,upper,lower\n8,16,x,16,5,1\n"), "no error");
}

TEST(PlanningCsv, WritesWhatItReads) {
  const std::vector<PackItem> items = {{"a", 0, 3, 4, 1}, {"b", 3, 9, 8, 8}};
  const std::string text = write_planning_csv(items, std::vector<uint64_t>{0, 8});
  EXPECT_EQ(text, "id,lower,upper,size,alignment,offset\na,0,3,4,1,0\nb,3,9,8,8,8\n");
  Expected<PlanningSolution> back = read_planning_solution_csv(text, "t.csv");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->offsets, (std::vector<uint64_t>{0, 8}));
  EXPECT_EQ(back->items[1].alignment, 8u);
  EXPECT_EQ(write_planning_csv(std::vector<PackItem>{{"a", 0, 3, 4, 1}}, std::vector<uint64_t>{7}),
            "id,lower,upper,size,offset\na,0,3,4,7\n");
  EXPECT_EQ(write_planning_csv(std::vector<PackItem>{{"a", 0, 3, 4, 1}}, {}), "id,lower,upper,size\na,0,3,4\n");
}

TEST(PlanningCsv, ErrorsSayWhatAndWhere) {
  EXPECT_EQ(error_of(""), "t.csv:1: missing header (expected columns id,lower,upper,size)");
  EXPECT_EQ(error_of("id,lower,upper\n"), "t.csv:1: missing column 'size'");
  EXPECT_EQ(error_of("id,lower,upper,size,colour\n"),
            "t.csv:1: unknown column 'colour' (expected id, lower, upper, size, alignment, offset)");
  EXPECT_EQ(error_of("id,lower,upper,size,size\n"), "t.csv:1: column 'size' appears twice");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,3\n"), "t.csv:2: expected 4 fields, found 3");
  EXPECT_EQ(error_of("id,lower,upper,size\n\nb1,0,3,4,5\n"), "t.csv:3: expected 4 fields, found 5");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,x3,4\n"), "t.csv:2: column 'upper': 'x3' is not an integer");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,3,\n"), "t.csv:2: column 'size': '' is not a non-negative integer");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,3,4.5\n"),
            "t.csv:2: column 'size': '4.5' is not a non-negative integer");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,3,-4\n"), "t.csv:2: column 'size': '-4' is negative");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,3,18446744073709551616\n"),
            "t.csv:2: column 'size': '18446744073709551616' is out of range");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,-9223372036854775809,3,4\n"),
            "t.csv:2: column 'lower': '-9223372036854775809' is out of range");
  EXPECT_EQ(error_of("id,lower,upper,size\n,0,3,4\n"), "t.csv:2: column 'id': empty");
  EXPECT_EQ(error_of("id,lower,upper,size\nb1,0,3,4\nb2,0,3,4\nb1,1,2,4\n"),
            "t.csv:4: column 'id': 'b1' already appears on line 2");
  EXPECT_EQ(error_of("id,lower,upper,size,alignment\nb1,0,3,4,0\n"),
            "t.csv:2: column 'alignment': must be at least 1");
  Expected<PlanningSolution> solution = read_planning_solution_csv("id,lower,upper,size\nb1,0,3,4\n", "t.csv");
  ASSERT_FALSE(solution.has_value());
  EXPECT_EQ(solution.error().message(), "t.csv:1: missing column 'offset'");
  EXPECT_EQ(solution.error().kind(), ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace stowage::ir
