// STOWAGE_TRY and STOWAGE_TRY_ASSIGN: they pass the first error up unchanged and
// stop there, and hand values through.
#include "stowage/support/error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stowage {
namespace {

Status fails(const std::string& message, int& calls) {
  ++calls;
  return Error(ErrorKind::kVerify, message);
}

Status succeeds(int& calls) {
  ++calls;
  return Status::ok();
}

Expected<int> half(int x) {
  if (x % 2 != 0) return Error(ErrorKind::kInvalidInput, std::to_string(x) + " is odd");
  return x / 2;
}

Status try_chain(int& calls) {
  STOWAGE_TRY(succeeds(calls));
  STOWAGE_TRY(fails("second", calls));
  STOWAGE_TRY(fails("third", calls));
  return Status::ok();
}

Expected<int> quarter(int x) {
  STOWAGE_TRY_ASSIGN(int h, half(x));
  STOWAGE_TRY_ASSIGN(int q, half(h));
  return q;
}

TEST(ErrorTest, TryReturnsTheFirstErrorAndRunsNothingAfterIt) {
  int calls = 0;
  Status s = try_chain(calls);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(), "second");
  EXPECT_EQ(s.error().kind(), ErrorKind::kVerify);
  EXPECT_EQ(calls, 2);
}

TEST(ErrorTest, TryAssignPassesValuesAndErrors) {
  Expected<int> q = quarter(12);
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, 3);
  Expected<int> odd_first = quarter(7);
  ASSERT_FALSE(odd_first);
  EXPECT_EQ(odd_first.error().message(), "7 is odd");
  EXPECT_EQ(odd_first.error().kind(), ErrorKind::kInvalidInput);
  Expected<int> odd_second = quarter(6);
  ASSERT_FALSE(odd_second);
  EXPECT_EQ(odd_second.error().message(), "3 is odd");
}

TEST(ErrorTest, TryAssignAssignsToAnExistingVariable) {
  std::vector<int> seen;
  auto collect = [&seen](int x) -> Status {
    int h = 0;
    STOWAGE_TRY_ASSIGN(h, half(x));
    seen.push_back(h);
    return Status::ok();
  };
  EXPECT_TRUE(collect(8));
  EXPECT_FALSE(collect(5));
  EXPECT_EQ(seen, std::vector<int>{4});
}

}  // namespace
}  // namespace stowage
