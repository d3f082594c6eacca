// Constants (weights) in the IR: the text form and its round trip, parse errors,
// each verifier rule with its exact message, and the builder's checks.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "stowage/ir/builder.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"

namespace stowage::ir {
namespace {

const TargetDesc& opencl() {
  static const TargetDesc target = TargetDesc::load("opencl").value_or_throw();
  return target;
}

template <typename T>
std::shared_ptr<const std::vector<std::byte>> bytes_of(const std::vector<T>& values) {
  auto out = std::make_shared<std::vector<std::byte>>(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out->data(), values.data(), out->size());
  return out;
}

ConstantTensor constant(std::string name, std::vector<int64_t> shape, DType dtype,
                        std::shared_ptr<const std::vector<std::byte>> data, std::string scope = "global") {
  return ConstantTensor{std::move(name), Type::tensor(std::move(shape), dtype), std::move(scope), std::move(data), {}};
}

std::string parse_error(std::string_view text) {
  Expected<Module> m = parse_module(text, "c.stir");
  return m ? "parsed" : m.error().message();
}

TEST(ConstantText, SmallConstantsPrintAsNumbersAndRoundTrip) {
  Module m;
  m.constants.push_back(constant("f", {2, 2}, DType::kFloat32, bytes_of(std::vector<float>{1.5f, -2.0f, 0.1f, 1e30f})));
  m.constants.push_back(constant("i", {3}, DType::kInt8, bytes_of(std::vector<int8_t>{-128, 0, 127})));
  m.constants.push_back(constant("u", {1}, DType::kUInt64, bytes_of(std::vector<uint64_t>{42})));
  m.constants.push_back(constant("b", {2}, DType::kBool, bytes_of(std::vector<uint8_t>{1, 0})));
  m.constants.push_back(constant("h", {2}, DType::kFloat16, bytes_of(std::vector<uint16_t>{0x3c00, 0xc400})));
  m.constants.push_back(constant(
      "d", {3}, DType::kFloat64,
      bytes_of(std::vector<double>{0.1, -std::numeric_limits<double>::infinity(), std::nan("")})));
  m.constants.push_back(constant("none", {0, 3}, DType::kInt32, bytes_of(std::vector<int32_t>{}), "global.vtcm"));
  const std::string text = print_module(m);
  EXPECT_EQ(text,
            "const f: Tensor[(2, 2), float32] = [1.5, -2.0, 0.1, 1e+30], scope=\"global\"\n"
            "const i: Tensor[(3,), int8] = [-128, 0, 127], scope=\"global\"\n"
            "const u: Tensor[(1,), uint64] = [42], scope=\"global\"\n"
            "const b: Tensor[(2,), bool] = [1, 0], scope=\"global\"\n"
            "const h: Tensor[(2,), float16] = [1.0, -4.0], scope=\"global\"\n"
            "const d: Tensor[(3,), float64] = [0.1, -inf, nan], scope=\"global\"\n"
            "const none: Tensor[(0, 3), int32] = [], scope=\"global.vtcm\"\n");
  Expected<Module> back = parse_module(text, "c.stir");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, m);
  EXPECT_EQ(print_module(*back), text);
}

TEST(ConstantText, LargeConstantsAndNaNPayloadsPrintAsBase64) {
  std::vector<int32_t> many(65);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int32_t>(i * 1000003);
  Module m;
  m.constants.push_back(constant("many", {65}, DType::kInt32, bytes_of(many)));
  // A NaN with a payload would not survive `nan`: its bytes are kept as base64.
  m.constants.push_back(constant("payload", {1}, DType::kFloat32, bytes_of(std::vector<uint32_t>{0x7fc00123u})));
  const std::string text = print_module(m);
  EXPECT_NE(text.find("const many: Tensor[(65,), int32] = base64 \"AAAAAENCDwCGhB4AycYtAAwJPQBPS0"), std::string::npos);
  EXPECT_NE(text.find("const payload: Tensor[(1,), float32] = base64 \"IwHAfw==\""), std::string::npos);
  Expected<Module> back = parse_module(text, "c.stir");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, m);
}

TEST(ConstantText, ExternalDataStaysOutOfTheText) {
  Module m;
  m.constants.push_back(constant("w", {1024}, DType::kFloat32, bytes_of(std::vector<float>(1024, 0.5f))));
  m.constants.push_back(constant("s", {1}, DType::kFloat32, bytes_of(std::vector<float>{2.0f})));
  const std::string text = print_module(m, PrintOptions{256});
  EXPECT_EQ(text,
            "const w: Tensor[(1024,), float32] = external, scope=\"global\"\n"
            "const s: Tensor[(1,), float32] = [2.0], scope=\"global\"\n");
  Expected<Module> back = parse_module(text, "c.stir");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->constants[0].data, nullptr);
  EXPECT_FALSE(*back == m);  // the data is not in the text
}

TEST(ConstantText, ParseErrorsSayWhatAndWhere) {
  EXPECT_EQ(parse_error("const w: Tensor[(2,), int32] = [1, 2, 3]\n"),
            "c.stir:1:32: error: constant 'w' lists 3 numbers, its type Tensor[(2,), int32] has 2 elements");
  EXPECT_EQ(parse_error("const w: Tensor[(2,), int8] = [1, 300]\n"),
            "c.stir:1:31: error: constant 'w': element 1 (300) does not fit int8");
  EXPECT_EQ(parse_error("const w: Tensor[(1,), int32] = [1.5]\n"),
            "c.stir:1:32: error: constant 'w': element 0 is a float, but the dtype is int32");
  EXPECT_EQ(parse_error("const w: Tensor[(2,), int32] = base64 \"AAAA\"\n"),
            "c.stir:1:39: error: constant 'w': the data holds 3 bytes, its type Tensor[(2,), int32] needs 8");
  EXPECT_EQ(parse_error("const w: Tensor[(1,), int32] = base64 \"AA*A\"\n"),
            "c.stir:1:39: error: constant 'w': the data is not valid base64");
  EXPECT_EQ(parse_error("const w: int = [1]\n"), "c.stir:1:10: error: constant 'w' must have a Tensor type");
  EXPECT_EQ(parse_error("const w: Tensor[(1,), int32] = zeros\n"),
            "c.stir:1:32: error: expected a list of numbers, base64 \"...\" or external as the constant's data, found "
            "'zeros'");
  EXPECT_EQ(parse_error("const w: Tensor[(1,), int32] = [1], place=\"global\"\n"),
            "c.stir:1:37: error: unknown keyword argument 'place' of const (it takes scope)");
  EXPECT_EQ(parse_error("const return: Tensor[(1,), int32] = [1]\n"),
            "c.stir:1:7: error: 'return' is a reserved word and cannot name a variable");
}

// "ok", or the verifier's message for `module`.
std::string verify(const Module& module) {
  Status s = verify_module(module, opencl(), "c.stir");
  if (s) return "ok";
  EXPECT_EQ(s.error().kind(), ErrorKind::kVerify);
  return s.error().message();
}

// A module with the kernels `read` (a const buffer to a buffer) and `write` (writes
// its first parameter), the constant `w` of 4 floats, and main(x) with `body`.
Module with_constant(const std::vector<std::string>& body, std::string ret = "t") {
  ModuleBuilder mb;
  mb.add_kernels("ops", R"(
__kernel void read(__global const float* a, __global float* b) { b[get_global_id(0)] = a[get_global_id(0)]; }
__kernel void write(__global float* a) { a[get_global_id(0)] = 0.0f; }
)");
  mb.add_constant("w", Type::tensor({4}, DType::kFloat32), bytes_of(std::vector<float>{1, 2, 3, 4}));
  std::string text = "fn main(x: Tensor[(4,), float32]) -> Tensor[(4,), float32] {\n";
  for (const auto& line : body) text += "  " + line + "\n";
  text += "  return " + ret + "\n}\n";
  Module m = mb.module();
  Expected<Module> parsed = parse_module(text, "c.stir");
  EXPECT_TRUE(parsed) << parsed.error().message();
  m.functions = parsed->functions;
  return m;
}

TEST(ConstantVerifier, AConstantIsReadByName) {
  EXPECT_EQ(verify(with_constant({"t = empty([4], float32, scope=\"global\")", "call_kernel(read, [w, t], grid=[4])"})),
            "ok");
}

TEST(ConstantVerifier, EachRuleWithItsMessage) {
  EXPECT_EQ(verify(with_constant({"t = empty([4], float32, scope=\"global\")", "kill_object(w)"})),
            "c.stir:3:3: error: function 'main', binding 'kill_object(w)': constant 'w' cannot be killed: it lives as "
            "long as the VM");
  EXPECT_EQ(verify(with_constant({"t = empty([4], float32, scope=\"global\")", "copy_tensor(x, w)"})),
            "c.stir:3:3: error: function 'main', binding 'copy_tensor(x, w)': constant 'w' is read-only: it cannot be "
            "copied into");
  EXPECT_EQ(verify(with_constant({"t = empty([4], float32, scope=\"global\")", "call_kernel(write, [w], grid=[4])"})),
            "c.stir:3:3: error: function 'main', binding 'call_kernel(write, [w], grid=[4])': constant 'w' is "
            "read-only, but parameter 'a' of kernel 'write' may write it (declare it __global const or __constant)");
  EXPECT_EQ(verify(with_constant({}, "w")),
            "c.stir:2:3: error: function 'main', 'return w': 'w' is a constant, which cannot be returned (the caller "
            "could write it); return a copy");
  EXPECT_EQ(verify(with_constant({"w = empty([4], float32, scope=\"global\")"}, "w")),
            "c.stir:2:3: error: function 'main', binding 'w = empty([4], float32, scope=\"global\")': 'w' is already "
            "defined as a constant");
  Module m = with_constant({"t = empty([4], float32, scope=\"global\")"});
  m.functions[0].params[0].name = "w";
  EXPECT_EQ(verify(m), "c.stir:1:9: error: function 'main', parameter 'w': 'w' is already defined as a constant");
}

TEST(ConstantVerifier, ConstantsThemselves) {
  auto one = [](ConstantTensor c) {
    Module m;
    m.constants.push_back(std::move(c));
    return verify(m);
  };
  auto four_floats = bytes_of(std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(one(constant("w", {5}, DType::kFloat32, four_floats)),
            "c.stir: error: constant 'w': its data holds 16 bytes, its type Tensor[(5,), float32] needs 20");
  EXPECT_EQ(one(constant("w", {4}, DType::kFloat32, nullptr)),
            "c.stir: error: constant 'w': it has no data (its text form says 'external'): give the data beside the "
            "text, e.g. stowage.parse(text, constants=...)");
  EXPECT_EQ(one(constant("w", {4}, DType::kFloat32, four_floats, "shared")),
            "c.stir: error: constant 'w': unknown scope 'shared' (target 'opencl')");
  EXPECT_EQ(one(constant("w", {1, 4}, DType::kInt32, four_floats, "global.texture")),
            "c.stir: error: constant 'w': in image scope 'global.texture': an image storage holds RGBA float32 or "
            "float16 pixels, not int32");
  EXPECT_EQ(one(constant("w", {2, 2}, DType::kFloat32, four_floats, "global.texture")),
            "c.stir: error: constant 'w': a tensor in image scope 'global.texture' needs a last extent of 4 and at "
            "most 5 dimensions");
  EXPECT_EQ(one(constant("w", {0, 4}, DType::kFloat32, bytes_of(std::vector<float>{}), "global.texture")),
            "c.stir: error: constant 'w': an image constant needs at least one pixel");
  EXPECT_EQ(one(constant("1w", {4}, DType::kFloat32, four_floats)),
            "c.stir: error: constant '1w': the name is not a valid variable name");
  Module twice;
  twice.constants = {constant("w", {4}, DType::kFloat32, four_floats), constant("w", {4}, DType::kFloat32, four_floats)};
  EXPECT_EQ(verify(twice), "c.stir: error: constant 'w': defined twice (first)");
  Module onchip;
  auto big = bytes_of(std::vector<float>(40000));
  onchip.constants = {constant("a", {40000}, DType::kFloat32, big, "global.vtcm"),
                      constant("b", {40000}, DType::kFloat32, big, "global.vtcm")};
  EXPECT_EQ(verify(onchip), "c.stir: error: constant 'b': the constants of scope 'global.onchip' need 320000 bytes, "
                            "over its capacity of 262144 bytes");
}

TEST(ConstantBuilder, ChecksAsItGoes) {
  ModuleBuilder mb;
  std::string w = mb.add_constant("", Type::tensor({2}, DType::kInt32), bytes_of(std::vector<int32_t>{1, 2}));
  EXPECT_EQ(w, "c0");
  EXPECT_EQ(mb.add_constant("", Type::tensor({1}, DType::kInt32), bytes_of(std::vector<int32_t>{3})), "c1");
  auto error = [](auto fn) {
    try {
      fn();
    } catch (const StowageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error([&] { mb.add_constant("c0", Type::tensor({1}, DType::kInt32), bytes_of(std::vector<int32_t>{3})); }),
            "constant: constant 'c0' is already in the module");
  EXPECT_EQ(error([&] { mb.add_constant("x", Type::tensor({3}, DType::kInt32), bytes_of(std::vector<int32_t>{3})); }),
            "constant: argument 'data': 4 bytes, but Tensor[(3,), int32] needs 12");
  EXPECT_EQ(error([&] { mb.add_constant("x", Type::of(Type::Kind::kInt), bytes_of(std::vector<int32_t>{3})); }),
            "constant: argument 'type': int is not a Tensor type");
  FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", Type::tensor({2}, DType::kInt32));
  EXPECT_EQ(fb.type_of("c0"), Type::tensor({2}, DType::kInt32));
  EXPECT_EQ(error([&] { fb.kill_object("c0"); }),
            "kill_object: argument 'var': 'c0' is a constant, which lives as long as the VM and cannot be killed");
  EXPECT_EQ(error([&] { fb.copy_tensor(x, "c0"); }), "copy_tensor: argument 'dst': 'c0' is a constant, which is read-only");
  EXPECT_EQ(error([&] { fb.empty({2}, DType::kInt32, "global", "c1"); }),
            "empty: name 'c1' is already defined as a constant");
  EXPECT_EQ(error([&] { fb.ret("c0"); }),
            "ret: argument 'var': 'c0' is a constant, which cannot be returned (the caller could write it); return a "
            "copy");
  EXPECT_EQ(error([&] { fb.ret(std::vector<std::string>{x, "c0"}); }),
            "ret: argument 'vars[1]': 'c0' is a constant, which cannot be returned (the caller could write it); "
            "return a copy");
  std::string copy = fb.empty({2}, DType::kInt32);
  fb.copy_tensor("c0", copy);  // reading a constant is fine
  mb.add_function(fb.ret(copy));
  Module m = mb.module();
  EXPECT_EQ(verify(m), "ok");
  Expected<Module> back = parse_module(print_module(m), "c.stir");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, m);
}

TEST(HalfFloat, ConvertsExactlyAndRoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -26)), 0x0000);  // below half of it
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // a tie: to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = half_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(float_to_half(f), bits) << bits;  // every half survives the round trip
  }
}

}  // namespace
}  // namespace stowage::ir
