// The IR text form: printing, parsing, round trips, locations and syntax errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"

namespace stowage::ir {
namespace {

std::string read_example(const std::string& name) {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/examples/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Module parse_ok(std::string_view text) {
  Expected<Module> m = parse_module(text);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message());
  return m ? m.take() : Module();
}

std::string parse_error(std::string_view text, std::string_view file = "t.stir") {
  Expected<Module> m = parse_module(text, file);
  if (m) return "(parsed)";
  EXPECT_EQ(m.error().kind(), ErrorKind::kInvalidInput);
  return m.error().message();
}

TEST(TextTest, ExampleRoundTripsExactly) {
  std::string text = read_example("add_mul.stir");
  ASSERT_FALSE(text.empty());
  Module m = parse_ok(text);
  EXPECT_EQ(print_module(m), text);
  EXPECT_EQ(parse_ok(print_module(m)), m);
}

TEST(TextTest, ExampleParsesIntoTheNodes) {
  Module m = parse_ok(read_example("add_mul.stir"));
  ASSERT_EQ(m.units.size(), 1u);
  EXPECT_EQ(m.units[0].name, "vtcm_ops");
  EXPECT_EQ(m.units[0].loc.line, 2u);
  EXPECT_EQ(m.units[0].loc.col, 1u);
  EXPECT_EQ(m.units[0].source.substr(0, 20), "__kernel void comput");
  EXPECT_EQ(m.units[0].source.back(), '\n');
  EXPECT_TRUE(m.units[0].signatures.empty());

  ASSERT_EQ(m.functions.size(), 1u);
  const Function& fn = m.functions[0];
  EXPECT_EQ(fn.name, "main");
  EXPECT_EQ(fn.loc.line, 13u);
  EXPECT_EQ(fn.loc.col, 1u);
  ASSERT_EQ(fn.params.size(), 3u);
  EXPECT_EQ(fn.params[1].name, "y");
  EXPECT_EQ(fn.params[1].loc.col, 36u);
  EXPECT_EQ(fn.params[1].type, Type::tensor({4, 64}, DType::kInt32));
  EXPECT_EQ(fn.ret_type, Type::tensor({4, 64}, DType::kInt32));
  ASSERT_EQ(fn.bindings.size(), 13u);

  const Binding& vtcm = fn.bindings[0];
  EXPECT_EQ(vtcm.op, Op::kAllocStorage);
  EXPECT_EQ(vtcm.result, "vtcm");
  EXPECT_EQ(vtcm.shape, std::vector<int64_t>{4096});
  EXPECT_EQ(vtcm.device, 0);
  EXPECT_EQ(vtcm.dtype, DType::kUInt8);
  EXPECT_EQ(vtcm.scope, "global.vtcm");
  EXPECT_EQ(vtcm.loc.line, 14u);
  EXPECT_EQ(vtcm.loc.col, 3u);

  const Binding& b = fn.bindings[3];
  EXPECT_EQ(b.op, Op::kAllocTensor);
  EXPECT_EQ(b.vars, std::vector<std::string>{"vtcm"});
  ASSERT_EQ(b.var_locs.size(), 1u);
  EXPECT_EQ(b.var_locs[0].line, 17u);
  EXPECT_EQ(b.var_locs[0].col, 20u);
  EXPECT_EQ(b.offset, 1024);
  EXPECT_EQ(b.shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(b.dtype, DType::kInt32);

  const Binding& launch = fn.bindings[6];
  EXPECT_EQ(launch.op, Op::kCallKernel);
  EXPECT_TRUE(launch.result.empty());
  EXPECT_EQ(launch.callee, "compute_add_in_vtcm");
  ASSERT_EQ(launch.args.size(), 3u);
  EXPECT_EQ(launch.args[2], Arg::variable("c"));
  EXPECT_EQ(launch.args[2].loc.line, 20u);
  EXPECT_EQ(launch.args[2].loc.col, 43u);
  EXPECT_EQ(launch.grid, std::vector<int64_t>{256});
  EXPECT_TRUE(launch.local.empty());

  EXPECT_EQ(fn.bindings[7].op, Op::kKillObject);
  EXPECT_EQ(fn.bindings[7].vars, std::vector<std::string>{"a"});
  EXPECT_EQ(fn.bindings[4].op, Op::kCopyTensor);
  EXPECT_EQ(fn.bindings[4].vars, (std::vector<std::string>{"y", "b"}));
  EXPECT_EQ(fn.returns, std::vector<std::string>{"e"});
  EXPECT_EQ(fn.ret_loc.line, 27u);
  EXPECT_EQ(fn.ret_loc.col, 3u);
}

// Every op, type and literal form, as the printer writes it.
constexpr std::string_view kEveryForm = R"(kernels k1 """
__kernel void scale(__global float* x, float a, long n) {}
"""

kernels k2 """
// no trailing newline, and a quote at the end: """"

fn helper(s: Storage, n: int, f: float, b: bool, o: Object, sh: Shape, t: Tuple[int, Tuple[], Tensor[(), float32]], v: Tensor[(8,), float32]) -> Tuple[] {
  return t
}

fn main(x: Tensor[(2, 4), float32], n: int) -> Tensor[(8,), float32] {
  s = alloc_storage([4096], device=0, dtype=uint8, scope="global")
  img = alloc_storage([16, 16], device=1, dtype=float16, scope="global.texture")
  a = alloc_tensor(s, 128, [8], float32)
  z = alloc_tensor(s, -1, [], bool)
  e = empty([2, 4], float32, scope="global.onchip")
  q = empty([0, -3], int64, scope="odd \"scope\"\\ \x01")
  copy_tensor(x, e)
  call_kernel(scale, [a, 2.5, -3], grid=[8])
  call_kernel(scale, [a, 1e-05, 0], grid=[8, 2], local=[4, 1])
  call_kernel(scale, [a, inf, 9223372036854775807], grid=[1])
  call_kernel(scale, [a, -inf, -9223372036854775808], grid=[1])
  call_kernel(scale, [a, nan, n], grid=[])
  call_kernel(scale, [a, 3.0, 1e+20, 0.1, -0.5], grid=[1, 1, 1])
  call_kernel(nothing, [], grid=[1])
  r = call(helper, [s, 3, 0.5, x, x, x, x, a])
  kill_object(a)
  return r
}
)";

TEST(TextTest, EveryFormRoundTripsExactly) {
  Module m = parse_ok(kEveryForm);
  EXPECT_EQ(print_module(m), kEveryForm);
  EXPECT_EQ(parse_ok(print_module(m)), m);

  EXPECT_EQ(m.units[1].source, "// no trailing newline, and a quote at the end: \"");
  const Function& helper = m.functions[0];
  Type tuple = Type::of(Type::Kind::kTuple);
  tuple.fields = {Type::of(Type::Kind::kInt), Type::of(Type::Kind::kTuple), Type::tensor({}, DType::kFloat32)};
  EXPECT_EQ(helper.params[6].type, tuple);
  EXPECT_EQ(helper.params[3].type, Type::of(Type::Kind::kBool));
  EXPECT_EQ(helper.ret_type, Type::of(Type::Kind::kTuple));

  const Function& main = m.functions[1];
  EXPECT_EQ(main.bindings[5].scope, "odd \"scope\"\\ \x01");
  EXPECT_EQ(main.bindings[5].shape, (std::vector<int64_t>{0, -3}));
  EXPECT_EQ(main.bindings[3].offset, -1);
  const auto& args = main.bindings[9].args;
  EXPECT_EQ(args[1].kind, Arg::Kind::kFloat);
  EXPECT_TRUE(std::isinf(args[1].float_value) && args[1].float_value > 0);
  EXPECT_EQ(args[2].int_value, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(main.bindings[10].args[2].int_value, std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(std::isnan(main.bindings[11].args[1].float_value));
  EXPECT_EQ(main.bindings[12].args[2].float_value, 1e20);
  EXPECT_EQ(main.bindings[8].local, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(main.bindings[7].args[2], Arg::integer(-3));
}

// Tensors in image storages print their offsets [y, x] (row, column); a plain 0
// still parses as [0, 0], and buffers keep byte offsets.
TEST(TextTest, ImageOffsetsPrintAsRowAndColumn) {
  constexpr std::string_view kWritten = R"(fn f(x: Tensor[(4,), int32]) -> Tensor[(4,), int32] {
  img = alloc_storage([8, 16], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(img, 0, [2, 4, 4], float32)
  b = alloc_tensor(img, [2, 5], [2, 4, 4], float32)
  s = alloc_storage([64], device=0, dtype=uint8, scope="global")
  c = alloc_tensor(s, 16, [4], int32)
  return x
}
)";
  constexpr std::string_view kPrinted = R"(fn f(x: Tensor[(4,), int32]) -> Tensor[(4,), int32] {
  img = alloc_storage([8, 16], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(img, [0, 0], [2, 4, 4], float32)
  b = alloc_tensor(img, [2, 5], [2, 4, 4], float32)
  s = alloc_storage([64], device=0, dtype=uint8, scope="global")
  c = alloc_tensor(s, 16, [4], int32)
  return x
}
)";
  Module m = parse_ok(kWritten);
  const Function& f = m.functions[0];
  EXPECT_EQ(f.bindings[1].image_offset, (ImageOffset{0, 0}));
  EXPECT_EQ(f.bindings[2].image_offset, (ImageOffset{5, 2}));  // x = 5 (column), y = 2 (row)
  EXPECT_EQ(f.bindings[2].offset, 0);
  EXPECT_EQ(f.bindings[4].offset, 16);
  EXPECT_EQ(print_module(m), kPrinted);
  EXPECT_EQ(parse_ok(kPrinted), m);
  // Alone, a binding shows an image offset only when it is not [0, 0].
  EXPECT_EQ(print_binding(f.bindings[1]), "a = alloc_tensor(img, 0, [2, 4, 4], float32)");
  EXPECT_EQ(print_binding(f.bindings[2]), "b = alloc_tensor(img, [2, 5], [2, 4, 4], float32)");
}

TEST(TextTest, PrintsTypes) {
  EXPECT_EQ(print_type(Type::tensor({4, 64}, DType::kInt32)), "Tensor[(4, 64), int32]");
  EXPECT_EQ(print_type(Type::tensor({}, DType::kFloat32)), "Tensor[(), float32]");
  EXPECT_EQ(print_type(Type::tensor({8}, DType::kFloat32)), "Tensor[(8,), float32]");
  Type tuple = Type::of(Type::Kind::kTuple);
  tuple.fields = {Type::of(Type::Kind::kStorage), Type::of(Type::Kind::kShape), Type::of(Type::Kind::kObject)};
  EXPECT_EQ(print_type(tuple), "Tuple[Storage, Shape, Object]");
}

TEST(TextTest, PrintsBindingsOnOneLine) {
  Binding b;
  b.op = Op::kCallKernel;
  b.callee = "k";
  b.args = {Arg::variable("a"), Arg::integer(-2), Arg::floating(2.0), Arg::floating(1e-3)};
  b.grid = {64, 4};
  b.local = {8, 4};
  EXPECT_EQ(print_binding(b), "call_kernel(k, [a, -2, 2.0, 0.001], grid=[64, 4], local=[8, 4])");
  Binding e;
  e.result = "t";
  e.op = Op::kEmpty;
  e.shape = {3};
  e.dtype = DType::kFloat16;
  e.scope = "global";
  EXPECT_EQ(print_binding(e), "t = empty([3], float16, scope=\"global\")");
}

// Modules built in code, with values the text must carry exactly.
TEST(TextTest, BuiltModulesRoundTrip) {
  Module m;
  KernelSourceUnit unit;
  unit.name = "u";
  unit.source = "\"\"";  // ends in two quotes
  m.units.push_back(unit);
  unit.name = "empty_source";
  unit.source = "";
  m.units.push_back(unit);

  Function fn;
  fn.name = "f";
  fn.params = {{"x", Type::tensor({1, 2, 3}, DType::kUInt16), {}}};
  fn.ret_type = Type::of(Type::Kind::kObject);
  Binding b;
  b.op = Op::kCallKernel;
  b.callee = "k";
  for (double v : {0.1, 1.0 / 3.0, 1e300, -1e-300, 5e-324, std::numeric_limits<double>::max(), -0.0, 123456789.0,
                   std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
    b.args.push_back(Arg::floating(v));
  }
  b.args.push_back(Arg::integer(std::numeric_limits<int64_t>::min()));
  b.grid = {std::numeric_limits<int64_t>::max()};
  fn.bindings.push_back(b);
  Binding s;
  s.result = "s";
  s.op = Op::kAllocStorage;
  s.shape = {-5};
  s.device = std::numeric_limits<int64_t>::min();
  s.dtype = DType::kFloat64;
  s.scope = "tab\there\nnewline \x7f";
  fn.bindings.push_back(s);
  fn.returns = {"x"};
  m.functions.push_back(fn);

  std::string text = print_module(m);
  Module back = parse_ok(text);
  EXPECT_EQ(back, m) << text;
  EXPECT_EQ(print_module(back), text);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(back.functions[0].bindings[0].args[i].float_value, b.args[i].float_value) << i;
  }
}

TEST(TextTest, AcceptsCommentsBlankLinesAndSplitLists) {
  constexpr std::string_view text = R"(# a comment before everything


fn f(x: Tensor[(8), float32],   # rank 1 without the comma
     y: Tensor[(2, 3,), int8]) -> Tensor[(8,), float32] {   # trailing comma in a shape

  t = empty([1,2],float32)   # scope defaults to "global"
  call_kernel(k, [x,
                  y], grid=[1])
  # a comment line inside the body

  return x   # done
}
# trailing comment)";
  Module m = parse_ok(text);
  EXPECT_EQ(print_module(m), R"(fn f(x: Tensor[(8,), float32], y: Tensor[(2, 3), int8]) -> Tensor[(8,), float32] {
  t = empty([1, 2], float32, scope="global")
  call_kernel(k, [x, y], grid=[1])
  return x
}
)");
  EXPECT_EQ(m.functions[0].bindings[1].args[1].loc.line, 9u);
  EXPECT_EQ(m.functions[0].bindings[1].args[1].loc.col, 19u);
}

TEST(TextTest, KernelSourceKeepsCarriageReturns) {
  Module m = parse_ok("kernels k \"\"\"\r\nline one\r\nline two\r\n\"\"\"\r\n");
  ASSERT_EQ(m.units.size(), 1u);
  EXPECT_EQ(m.units[0].source, "line one\r\nline two\r\n");
  EXPECT_EQ(m.units[0].loc.line, 2u);
}

TEST(TextTest, SourcesHoldingTripleQuotesAreNotPrintable) {
  EXPECT_TRUE(kernel_source_is_printable("a \"\" b\""));
  EXPECT_FALSE(kernel_source_is_printable("a \"\"\" b"));
}

TEST(TextTest, FunctionWithoutParametersOrBindings) {
  constexpr std::string_view text = "fn f() -> Object {\n  return f\n}\n";
  Module m = parse_ok(text);
  ASSERT_EQ(m.functions.size(), 1u);
  EXPECT_TRUE(m.functions[0].params.empty());
  EXPECT_TRUE(m.functions[0].bindings.empty());
  EXPECT_EQ(print_module(m), text);
}

TEST(TextTest, EmptyModule) {
  Module m = parse_ok("  # nothing here\n\n");
  EXPECT_TRUE(m.units.empty());
  EXPECT_TRUE(m.functions.empty());
  EXPECT_EQ(print_module(m), "");
}

struct ErrorCase {
  std::string_view text;
  std::string_view message;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << testing::PrintToString(std::string(c.text)); }

class ParseErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(ParseErrorTest, GivesOneExactMessage) { EXPECT_EQ(parse_error(GetParam().text), GetParam().message); }

constexpr std::string_view kHead = "fn f(x: Tensor[(4,), int32]) -> Tensor[(4,), int32] {\n";

std::string body(std::string_view line) { return std::string(kHead) + std::string(line) + "\n  return x\n}\n"; }

INSTANTIATE_TEST_SUITE_P(
    Syntax, ParseErrorTest,
    testing::Values(
        ErrorCase{"fn f(x: int) -> int {\n  s = alloc_storage([4 x], device=0, dtype=uint8, scope=\"global\")\n",
                  "t.stir:2:24: error: expected ',' or ']' in storage size, found 'x'"},
        ErrorCase{"func f() -> int {\n", "t.stir:1:1: error: expected 'fn', 'const' or 'kernels', found 'func'"},
        ErrorCase{"fn f() -> int {\n  x = frobnicate(y)\n", "t.stir:2:7: error: unknown op 'frobnicate'"},
        ErrorCase{"fn f() -> int {\n  x = empty([4], int33)\n", "t.stir:2:18: error: unknown dtype 'int33'"},
        ErrorCase{"fn f(x: Tensor[(4,), int33]) -> int {\n", "t.stir:1:22: error: unknown dtype 'int33'"},
        ErrorCase{"fn f(x: Tensr) -> int {\n", "t.stir:1:9: error: unknown type 'Tensr'"},
        ErrorCase{"fn f(x: int) -> int {\n  s = alloc_storage([4], device=0, device=1, dtype=uint8, scope=\"g\")\n",
                  "t.stir:2:36: error: duplicate keyword argument 'device'"},
        ErrorCase{"fn f(x: int) -> int {\n  s = alloc_storage([4], device=0, dtype=uint8)\n",
                  "t.stir:2:47: error: alloc_storage needs the keyword argument 'scope'"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [x])\n",
                  "t.stir:2:21: error: call_kernel needs the keyword argument 'grid'"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [x], grid=[1], block=[1])\n",
                  "t.stir:2:33: error: unknown keyword argument 'block' of call_kernel (it takes grid, local)"},
        ErrorCase{"fn f(x: int) -> int {\n  t = empty([99999999999999999999], int8)\n",
                  "t.stir:2:14: error: integer '99999999999999999999' does not fit in 64 bits"},
        ErrorCase{"fn f(x: int) -> int {\n  t = empty([-9223372036854775809], int8)\n",
                  "t.stir:2:14: error: integer '-9223372036854775809' does not fit in 64 bits"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [1e999], grid=[1])\n",
                  "t.stir:2:19: error: float '1e999' is out of range"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [4x], grid=[1])\n",
                  "t.stir:2:19: error: malformed number '4x'"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [1e], grid=[1])\n",
                  "t.stir:2:19: error: malformed number '1e'"},
        ErrorCase{"kernels k \"\"\"\n__kernel void f() {}\n", "t.stir:1:11: error: unterminated kernel source: no closing '\"\"\"'"},
        ErrorCase{"kernels k \"\"\" void f() {}\n\"\"\"\n",
                  "t.stir:1:14: error: kernel source must start on the line after '\"\"\"'"},
        ErrorCase{"kernels k \"\"\"\n\"\"\" extra\n", "t.stir:2:5: error: expected end of line after the kernel source's closing '\"\"\"', found 'extra'"},
        ErrorCase{"kernels \"\"\"\n\"\"\"\n", "t.stir:1:9: error: expected a name after 'kernels', found '\"\"\"'"},
        ErrorCase{"fn f(x: int) -> int {\n  e = empty([4], int8, scope=\"glo\n",
                  "t.stir:2:30: error: unterminated string"},
        ErrorCase{"fn f(x: int) -> int {\n  e = empty([4], int8, scope=\"a\\qb\")\n",
                  "t.stir:2:32: error: unknown escape '\\q' in string"},
        ErrorCase{"fn f(x: int) -> int {\n  kill_object(x) $\n", "t.stir:2:18: error: unexpected character '$'"},
        ErrorCase{std::string_view("fn f(x: int) -> int {\n  kill_object(\0)\n", 38),
                  "t.stir:2:15: error: unexpected character '\\x00'"},
        ErrorCase{"fn f(x: int) -> int {\n  kill_object(x)\n", "t.stir:3:1: error: function 'f' ends without 'return' and '}'"},
        ErrorCase{"fn f(x: int) -> int {\n  kill_object(x)\n}\n", "t.stir:3:1: error: function 'f' ends without 'return'"},
        ErrorCase{"fn f(x: int) -> int {\n  return x\n  kill_object(x)\n}\n",
                  "t.stir:3:3: error: expected '}' after the return, found 'kill_object'"},
        ErrorCase{"fn f(x: int) -> int {\n  return x y\n}\n",
                  "t.stir:2:12: error: expected end of line after the returned variable, found 'y'"},
        ErrorCase{"fn f(x: int) -> int {\n  kill_object(x) kill_object(x)\n",
                  "t.stir:2:18: error: expected end of line after the binding, found 'kill_object'"},
        ErrorCase{"fn f(x: int) -> int {\n  v = kill_object(x)\n",
                  "t.stir:2:3: error: kill_object produces no value to bind to 'v'"},
        ErrorCase{"fn f(x: int) -> int {\n  alloc_tensor(x, 0, [4], int8)\n",
                  "t.stir:2:3: error: alloc_tensor produces a value: bind it, as in 'x = alloc_tensor(...)'"},
        ErrorCase{"fn f(x: int) -> int {\n  inf = empty([4], int8)\n",
                  "t.stir:2:3: error: 'inf' is a reserved word and cannot name a variable"},
        ErrorCase{"fn f(nan: int) -> int {\n", "t.stir:1:6: error: 'nan' is a reserved word and cannot name a variable"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [-x], grid=[1])\n",
                  "t.stir:2:20: error: expected 'inf' or a digit after '-', found 'x'"},
        ErrorCase{"fn f(x: int) -> int {\n  call_kernel(k, [x,], grid=[1])\n",
                  "t.stir:2:21: error: expected a variable, a literal or null in the argument list, found ']'"},
        ErrorCase{"fn f(x: int) -> int {\n  t = alloc_tensor(x 0, [4], int8)\n",
                  "t.stir:2:22: error: expected ',' between the operands of alloc_tensor, found '0'"},
        ErrorCase{"fn f(x: int) -> int {\n  t = alloc_tensor(x, 1.5, [4], int8)\n",
                  "t.stir:2:23: error: expected an integer offset or an image offset [y, x], found '1.5'"},
        ErrorCase{"fn f(x: int) -> int {\n  t = alloc_tensor(x, [1, 2, 3], [4], int8)\n",
                  "t.stir:2:23: error: an image offset is [y, x] (row, column), got 3 values"},
        ErrorCase{"fn f(x: int) -> int {\n  t = alloc_tensor(x, [5], [4], int8)\n",
                  "t.stir:2:23: error: an image offset is [y, x] (row, column), got 1 value"},
        ErrorCase{"fn f(x: int) -> int {\n  t = alloc_tensor(x, [0, -1], [4], int8)\n",
                  "t.stir:2:23: error: image offset [0, -1] is negative"},
        ErrorCase{"fn f(x: int) -> int {\n  t = view(x, [0, 1], [4], int8)\n",
                  "t.stir:2:15: error: expected an integer offset, found '['"},
        ErrorCase{"fn f(x: int) -> int {\n  copy_tensor(x)\n",
                  "t.stir:2:16: error: expected ',' between the operands of copy_tensor, found ')'"},
        ErrorCase{"fn f(x: int) -> int {\n  kill_object(x, x)\n",
                  "t.stir:2:16: error: expected ')' after the operands of kill_object, found ','"},
        ErrorCase{"fn f(x: int) -> int {\n  e = empty([4], int8, scope=global)\n",
                  "t.stir:2:30: error: expected a quoted scope name, found 'global'"},
        ErrorCase{"fn f(x: int, ) -> int {\n", "t.stir:1:14: error: expected a parameter name, found ')'"},
        ErrorCase{"fn f(x int) -> int {\n", "t.stir:1:8: error: expected ':' after the parameter name, found 'int'"},
        ErrorCase{"fn f(x: int) int {\n",
                  "t.stir:1:14: error: expected '->' and the return type after the parameters, found 'int'"},
        ErrorCase{"fn f(x: int) -> int { return x }\n", "t.stir:1:23: error: expected end of line after '{', found 'return'"},
        ErrorCase{"fn f(x: Tensor[(4 4), int8]) -> int {\n",
                  "t.stir:1:19: error: expected ',' or ')' in the tensor shape, found '4'"},
        ErrorCase{"fn f(x: Tuple[int float]) -> int {\n",
                  "t.stir:1:19: error: expected ',' or ']' in the tuple type, found 'float'"},
        ErrorCase{"fn f(x: int) -> int {\n  t = empty([4], int8",
                  "t.stir:2:22: error: expected ')' after the operands of empty, found end of input"},
        ErrorCase{"fn", "t.stir:1:3: error: expected a function name after 'fn', found end of input"},
        // Returned tuples
        ErrorCase{"fn f(x: int) -> int {\n  return (x)\n}\n",
                  "t.stir:2:10: error: '(x)' is not a tuple: write 'return (x,)' for a tuple of one, or 'return x'"},
        ErrorCase{"fn f(x: int) -> int {\n  return ()\n}\n",
                  "t.stir:2:11: error: expected a variable name in the returned tuple, found ')'"},
        ErrorCase{"fn f(x: int) -> int {\n  return (x y)\n}\n",
                  "t.stir:2:13: error: expected ',' or ')' in the returned tuple, found 'y'"},
        ErrorCase{"fn f(x: int) -> int {\n  return (x, 1)\n}\n",
                  "t.stir:2:14: error: expected a variable name in the returned tuple, found '1'"},
        ErrorCase{"fn f(x: int) -> int {\n  return (x, y) z\n}\n",
                  "t.stir:2:17: error: expected end of line after the returned tuple, found 'z'"},
        ErrorCase{"fn f(x: int) -> int {\n  return (x, y\n}\n",
                  "t.stir:3:1: error: expected ',' or ')' in the returned tuple, found '}'"},
        ErrorCase{"fn f(x: int) -> int {\n  return 3\n}\n",
                  "t.stir:2:10: error: expected a variable name or '(' after 'return', found '3'"}));

// `return (a, b)` returns a tuple; `(a,)` a tuple of one; `return a` stays as it was.
TEST(TextTest, ReturnedTuplesRoundTrip) {
  constexpr std::string_view text = R"(fn pair(a: Tensor[(4,), int64], b: Tensor[(2, 2), uint8]) -> Tuple[Tensor[(4,), int64], Tensor[(2, 2), uint8]] {
  return (a, b)
}

fn one(a: Tensor[(4,), int64]) -> Tuple[Tensor[(4,), int64]] {
  return (a,)
}

fn single(a: Tensor[(4,), int64]) -> Tensor[(4,), int64] {
  return a
}
)";
  Module m = parse_ok(text);
  EXPECT_EQ(print_module(m), text);
  EXPECT_EQ(parse_ok(print_module(m)), m);
  ASSERT_EQ(m.functions.size(), 3u);
  EXPECT_TRUE(m.functions[0].returns_tuple);
  EXPECT_EQ(m.functions[0].returns, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.functions[0].ret_loc.line, 2u);
  EXPECT_EQ(m.functions[0].ret_loc.col, 3u);
  EXPECT_TRUE(m.functions[1].returns_tuple);
  EXPECT_EQ(m.functions[1].returns, (std::vector<std::string>{"a"}));
  EXPECT_EQ(print_returned(m.functions[1]), "(a,)");
  EXPECT_FALSE(m.functions[2].returns_tuple);
  EXPECT_EQ(m.functions[2].returns, (std::vector<std::string>{"a"}));
  // A tuple of one and a single return are different modules.
  EXPECT_NE(m.functions[1].returns_tuple, m.functions[2].returns_tuple);

  // Split over lines, with a trailing comma: read as the same tuple, printed on one line.
  Module split = parse_ok("fn f(a: int, b: int) -> int {\n  return (a,\n          b,)\n}\n");
  EXPECT_EQ(print_module(split), "fn f(a: int, b: int) -> int {\n  return (a, b)\n}\n");
}

TEST(TextTest, BodyHelperErrors) {
  EXPECT_EQ(parse_error(body("  call_kernel(k, [x], grid=[1, ])")),
            "t.stir:2:32: error: expected an integer in grid, found ']'");
  EXPECT_EQ(parse_error(body("  call_kernel(k, [x], grid=[1], local=(1))")),
            "t.stir:2:39: error: expected '[' to open the local size, found '('");
}

TEST(TextTest, DeepNestingIsAnErrorNotACrash) {
  std::string text = "fn f(x: ";
  for (int i = 0; i < 100000; ++i) text += "Tuple[";
  EXPECT_EQ(parse_error(text), "t.stir:1:393: error: types nest deeper than 64 levels");
  std::string brackets = "fn f(x: int) -> int {\n  t = empty(" + std::string(100000, '[');
  EXPECT_EQ(parse_error(brackets), "t.stir:2:14: error: expected an integer in shape, found '['");
}

TEST(TextTest, LongTokensAreShortenedInMessages) {
  std::string text = "fn f(x: int) -> int {\n  t = empty([4], " + std::string(100, 'q') + ")\n";
  EXPECT_EQ(parse_error(text), "t.stir:2:18: error: unknown dtype 'qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq...'");
}

// Any bytes give a module or one error; a module that comes back round-trips.
void expect_no_crash(std::string_view text) {
  Expected<Module> m = parse_module(text);
  if (!m) {
    EXPECT_EQ(m.error().message().rfind("<input>:", 0), 0u) << m.error().message();
    EXPECT_NE(m.error().message().find(": error: "), std::string::npos);
    return;
  }
  Expected<Module> again = parse_module(print_module(*m));
  ASSERT_TRUE(again.has_value()) << again.error().message() << "\n" << print_module(*m);
  EXPECT_EQ(*again, *m);
}

TEST(TextTest, TruncationsAndByteFlipsNeverCrash) {
  std::string text = read_example("add_mul.stir") + std::string(kEveryForm);
  for (size_t n = 0; n <= text.size(); ++n) expect_no_crash(std::string_view(text).substr(0, n));
  constexpr std::string_view kFlips("\0\"([])=,\n#-9e.x\xff", 16);
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : kFlips) {
      std::string mutated = text;
      mutated[i] = c;
      expect_no_crash(mutated);
    }
  }
}

}  // namespace
}  // namespace stowage::ir

namespace stowage::ir {
namespace {

// docs/ir.md's table of ops has a row for every op of op_table.h, in its order.
TEST(OpTable, TheReferenceListsEveryOpInOrder) {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/docs/ir.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  size_t last = 0;
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    size_t at = doc.find(fmt::format("\n| {} | `", info.name));
    ASSERT_NE(at, std::string::npos) << "no row for " << info.name;
    EXPECT_GT(at, last) << info.name << " is out of order";
    last = at;
    EXPECT_EQ(parse_op(info.name), static_cast<Op>(i));
  }
}

}  // namespace
}  // namespace stowage::ir
