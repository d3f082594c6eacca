// The inputs vm-run generates (--input NAME=random, NAME=zeros) and the summary it
// prints of each result.
#include "host_arrays.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace stowage {
namespace {

template <typename T>
std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  auto span = std::as_bytes(std::span(values));
  return {span.begin(), span.end()};
}

std::vector<std::byte> random_bytes(std::vector<int64_t> shape, DType dtype, uint64_t seed) {
  std::mt19937_64 engine(seed);
  return host_arrays::random(shape, dtype, engine, "x").value_or_throw();
}

TEST(HostArrays, RandomFloatsFillMinusOneToOne) {
  std::vector<float> v = values_of<float>(random_bytes({100, 100}, DType::kFloat32, 0));
  ASSERT_EQ(v.size(), 10000u);
  float lo = 1, hi = -1;
  for (float f : v) {
    ASSERT_GE(f, -1.0f);
    ASSERT_LT(f, 1.0f);
    lo = std::min(lo, f);
    hi = std::max(hi, f);
  }
  EXPECT_LT(lo, -0.99f);
  EXPECT_GT(hi, 0.99f);
  // float16 and float64 take the same values (multiples of 2^-23 in [-1, 1)).
  std::vector<double> d = values_of<double>(random_bytes({100, 100}, DType::kFloat64, 0));
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(d[i], static_cast<double>(v[i]));
  std::vector<uint16_t> h = values_of<uint16_t>(random_bytes({100, 100}, DType::kFloat16, 0));
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(h[i], float_to_half(v[i]));
}

TEST(HostArrays, RandomIntegersAreZeroToNineAndBoolsBoth) {
  for (DType dtype : {DType::kInt8, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt64}) {
    std::vector<std::byte> bytes = random_bytes({1000}, dtype, 3);
    std::set<int64_t> seen;
    for (size_t i = 0; i < 1000; ++i) {
      int64_t v = 0;
      std::memcpy(&v, bytes.data() + i * dtype_bytes(dtype), dtype_bytes(dtype));  // little-endian, non-negative
      ASSERT_GE(v, 0);
      ASSERT_LT(v, 10);
      seen.insert(v);
    }
    EXPECT_EQ(seen.size(), 10u) << dtype_name(dtype);
  }
  std::vector<uint8_t> b = values_of<uint8_t>(random_bytes({1000}, DType::kBool, 3));
  EXPECT_EQ(std::set<uint8_t>(b.begin(), b.end()), (std::set<uint8_t>{0, 1}));
}

TEST(HostArrays, ASeedGivesTheSameValuesAndInputsDrawnInTurnDiffer) {
  EXPECT_EQ(random_bytes({64}, DType::kInt32, 5), random_bytes({64}, DType::kInt32, 5));
  EXPECT_NE(random_bytes({64}, DType::kInt32, 5), random_bytes({64}, DType::kInt32, 6));
  std::mt19937_64 engine(5);
  auto first = host_arrays::random(std::vector<int64_t>{64}, DType::kInt32, engine, "x").value_or_throw();
  auto second = host_arrays::random(std::vector<int64_t>{64}, DType::kInt32, engine, "y").value_or_throw();
  EXPECT_EQ(first, random_bytes({64}, DType::kInt32, 5));
  EXPECT_NE(first, second);
}

TEST(HostArrays, ZerosAndTheirLimits) {
  EXPECT_EQ(host_arrays::zeros(std::vector<int64_t>{2, 3}, DType::kFloat64, "x").value_or_throw(),
            std::vector<std::byte>(48));
  auto open = host_arrays::zeros(std::vector<int64_t>{-1, 3}, DType::kFloat32, "--input x=zeros");
  ASSERT_FALSE(open);
  EXPECT_EQ(open.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(open.error().message(), "--input x=zeros: the file gives no static shape to generate");
  std::mt19937_64 engine(0);
  auto huge = host_arrays::random(std::vector<int64_t>{1 << 20, 1 << 20, 1 << 20}, DType::kInt8, engine,
                                  "--input x=random");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message(), "--input x=random: too large to generate (the limit is 17179869184 bytes)");
}

TEST(HostArrays, SummariesOfFloats) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(host_arrays::summarize(DType::kFloat32, bytes_of(std::vector<float>{1.5f, nan, -2.0f, 0.25f})),
            "min -2, max 1.5, mean -0.0833333, 1 NaN; [1.5, nan, -2, 0.25]");
  EXPECT_EQ(host_arrays::summarize(DType::kFloat32, bytes_of(std::vector<float>{nan, nan})), "all 2 NaN; [nan, nan]");
  std::vector<double> ramp;
  for (int i = 0; i < 10; ++i) ramp.push_back(i / 3.0);
  EXPECT_EQ(host_arrays::summarize(DType::kFloat64, bytes_of(ramp)),
            "min 0, max 3, mean 1.5; first 8 of 10: [0, 0.333333, 0.666667, 1, 1.33333, 1.66667, 2, 2.33333, ...]");
  EXPECT_EQ(host_arrays::summarize(DType::kFloat16, bytes_of(std::vector<uint16_t>{float_to_half(-0.5f),
                                                                                    float_to_half(65504.0f)}),
                                   1),
            "min -0.5, max 65504, mean 32751.8; first 1 of 2: [-0.5, ...]");
  EXPECT_EQ(host_arrays::summarize(DType::kFloat32, {}), "no elements");
}

TEST(HostArrays, SummariesOfIntegersAreExact) {
  EXPECT_EQ(host_arrays::summarize(DType::kInt64, bytes_of(std::vector<int64_t>{INT64_MAX, INT64_MIN, -1})),
            "min -9223372036854775808, max 9223372036854775807, mean -0.666667; [9223372036854775807, "
            "-9223372036854775808, -1]");
  EXPECT_EQ(host_arrays::summarize(DType::kUInt64, bytes_of(std::vector<uint64_t>{UINT64_MAX, 0})),
            "min 0, max 18446744073709551615, mean 9.22337e+18; [18446744073709551615, 0]");
  EXPECT_EQ(host_arrays::summarize(DType::kInt8, bytes_of(std::vector<int8_t>{-128, 127, 1})),
            "min -128, max 127, mean 0; [-128, 127, 1]");
  EXPECT_EQ(host_arrays::summarize(DType::kBool, bytes_of(std::vector<uint8_t>{1, 0, 1, 1})),
            "min 0, max 1, mean 0.75; [true, false, true, true]");
}

}  // namespace
}  // namespace stowage
