// Each verifier rule, broken by a small program, with the exact message.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "stowage/ir/parser.h"
#include "stowage/ir/verifier.h"
#include "stowage/ir/compiler.h"

namespace stowage::ir {
namespace {

const TargetDesc& opencl() {
  static const TargetDesc target = TargetDesc::load("opencl").value_or_throw();
  return target;
}

KernelParam buffer(std::string name, DType dtype, bool is_const = false, uint8_t lanes = 1) {
  return {std::move(name), KernelParamKind::kGlobalBuffer, dtype, lanes, is_const};
}
KernelParam param(std::string name, KernelParamKind kind, DType dtype = DType::kFloat32, uint8_t lanes = 1) {
  return {std::move(name), kind, dtype, lanes, false};
}

// What the kernel reader would learn from the unit `ops` of the test programs.
std::vector<KernelSignature> ops_signatures() {
  using K = KernelParamKind;
  return {
      {"add", 0, {buffer("a", DType::kInt32, true), buffer("b", DType::kInt32, true), buffer("c", DType::kInt32)}},
      {"scale4", 0, {buffer("x", DType::kFloat32, false, 4), param("s", K::kScalar)}},
      {"fill_char", 0, {buffer("x", DType::kInt8), param("v", K::kScalar, DType::kInt8)}},
      {"fill_ulong", 0, {buffer("x", DType::kUInt64), param("v", K::kScalar, DType::kUInt64)}},
      {"img_copy", 0, {param("src", K::kImage2dRead), param("dst", K::kImage2dWrite)}},
      {"img_add", 0, {param("a", K::kImage2dRead), param("b", K::kImage2dRead), param("c", K::kImage2dWrite)}},
      {"img_scale", 0, {param("src", K::kImage2dRead), param("dst", K::kImage2dWrite), param("s", K::kScalar)}},
      {"with_local", 0, {buffer("x", DType::kFloat32), param("tmp", K::kLocal)}},
      {"vec_scalar", 0, {param("v", K::kScalar, DType::kFloat32, 4)}},
      {"img_off_copy",
       0,
       {param("src", K::kImage2dRead), param("src_off", K::kImageOffset, DType::kInt32, 2),
        param("dst", K::kImage2dWrite), param("dst_off", K::kImageOffset, DType::kInt32, 2)}},
      {"img_off_add",
       0,
       {param("a", K::kImage2dRead), param("a_off", K::kImageOffset, DType::kInt32, 2), param("b", K::kImage2dRead),
        param("b_off", K::kImageOffset, DType::kInt32, 2), param("c", K::kImage2dWrite)}},
  };
}

void add_signatures(Module& m) {
  for (auto& unit : m.units) {
    if (unit.name == "ops") unit.signatures = ops_signatures();
  }
}

// "ok", or the verifier's message.
std::string verify_text(std::string_view text) {
  Expected<Module> m = parse_module(text, "v.stir");
  if (!m) return "parse error: " + m.error().message();
  add_signatures(*m);
  Status s = verify_module(*m, opencl(), "v.stir");
  if (s) return "ok";
  EXPECT_EQ(s.error().kind(), ErrorKind::kVerify);
  return s.error().message();
}

// A module with the unit `ops` (lines 1-3) and `fn main(PARAMS) -> RET {` on line 5:
// body line i is on line 6 + i.
std::string program(const std::vector<std::string>& body, const std::string& params = "x: Tensor[(64,), int32]",
                    const std::string& ret_type = "Tensor[(64,), int32]", const std::string& ret = "x") {
  std::string text = "kernels ops \"\"\"\n// the tests set the signatures\n\"\"\"\n\nfn main(" + params + ") -> " +
                     ret_type + " {\n";
  for (const auto& line : body) text += "  " + line + "\n";
  return text + "  return " + ret + "\n}\n";
}

std::string verify_body(const std::vector<std::string>& body, const std::string& params = "x: Tensor[(64,), int32]",
                        const std::string& ret_type = "Tensor[(64,), int32]", const std::string& ret = "x") {
  return verify_text(program(body, params, ret_type, ret));
}

std::string read_example() {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/examples/add_mul.stir", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string verify_example(const std::string& text) {
  Expected<Module> m = parse_module(text, "add_mul.stir");
  if (!m) return m.error().message();
  KernelParam a = buffer("a", DType::kInt32, true), b = buffer("b", DType::kInt32, true), c = buffer("c", DType::kInt32);
  m->units[0].signatures = {{"compute_add_in_vtcm", 0, {a, b, c}}, {"compute_mul_in_vtcm", 0, {a, b, c}}};
  Status s = verify_module(*m, opencl(), "add_mul.stir");
  return s ? "ok" : s.error().message();
}

const std::string kStorage = "s = alloc_storage([4096], device=0, dtype=uint8, scope=\"global\")";

const std::string kImage = "img = alloc_storage([16, 8], device=0, dtype=float32, scope=\"global.texture\")";
const std::string kImage2 = "img2 = alloc_storage([16, 8], device=0, dtype=float32, scope=\"global.texture\")";

// --- Each rule, broken by a small program --------------------------------------

// A program and the verifier's exact answer ("ok" when it accepts the program): a
// whole module in `text`, or else `body` as the body of main in program().
struct VerifierCase {
  std::string name{};
  std::string text{};
  std::vector<std::string> body{};
  std::string params = "x: Tensor[(64,), int32]";
  std::string ret_type = "Tensor[(64,), int32]";
  std::string ret = "x";
  std::string expected{};
};

void PrintTo(const VerifierCase& c, std::ostream* os) { *os << c.name; }

class VerifierRuleTest : public testing::TestWithParam<VerifierCase> {};

TEST_P(VerifierRuleTest, GivesTheExactMessage) {
  const VerifierCase& c = GetParam();
  EXPECT_EQ(c.text.empty() ? verify_body(c.body, c.params, c.ret_type, c.ret) : verify_text(c.text), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, VerifierRuleTest,
    testing::Values(
        // Module-level rules
        VerifierCase{.name = "DuplicateFunction",
                     .text = "fn f(x: int) -> int {\n  return x\n}\n\nfn f(x: int) -> int {\n  return x\n}\n",
                     .expected = "v.stir:5:1: error: function 'f': defined twice (first at 1:1)"},
        VerifierCase{.name = "DuplicateUnit",
                     .text = "kernels a \"\"\"\n\"\"\"\nkernels a \"\"\"\n\"\"\"\n",
                     .expected = "v.stir:4:1: error: kernels 'a': defined twice (first at 2:1)"},
        VerifierCase{
            .name = "UnknownFunction",
            .body = {"r = call(nowhere, [x])"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 'r = call(nowhere, [x])': unknown function 'nowhere'"},
        VerifierCase{.name = "UnknownKernel",
                     .body = {"call_kernel(nowhere, [x], grid=[1])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(nowhere, [x], grid=[1])': "
                                 "unknown kernel 'nowhere'"},

        // Definitions, kills, return
        VerifierCase{
            .name = "UseBeforeDefinition",
            .body = {"copy_tensor(x, later)", "later = empty([64], int32)"},
            .expected = "v.stir:6:3: error: function 'main', binding 'copy_tensor(x, later)': 'later' is not defined"},
        VerifierCase{.name = "DefinedTwice",
                     .body = {kStorage, "s = alloc_storage([64], device=0, dtype=uint8, scope=\"global\")"},
                     .expected = "v.stir:7:3: error: function 'main', binding 's = alloc_storage([64], device=0, "
                                 "dtype=uint8, scope=\"global\")': 's' is already defined at 6:3"},
        VerifierCase{.name = "ShadowsParameter",
                     .body = {"x = empty([64], int32)"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'x = empty([64], int32, "
                                 "scope=\"global\")': 'x' is already defined as a parameter"},
        VerifierCase{
            .name = "ParameterDeclaredTwice",
            .text = "fn f(x: int,\n     x: float) -> int {\n  return x\n}\n",
            .expected = "v.stir:2:6: error: function 'f', parameter 'x': 'x' is declared twice (first at 1:6)"},
        VerifierCase{
            .name = "ParameterTypeWithNegativeExtent",
            .text = "fn f(x: Tensor[(4, -1), int8]) -> int {\n  return x\n}\n",
            .expected = "v.stir:1:6: error: function 'f', parameter 'x': Tensor[(4, -1), int8] has a negative extent"},
        VerifierCase{.name = "ReturnTypeTooLarge",
                     .text = "fn f(x: int) -> Tuple[Tensor[(4611686018427387904, 4), int8]] {\n  return x\n}\n",
                     .expected = "v.stir:1:1: error: function 'f': return type Tensor[(4611686018427387904, 4), int8] "
                                 "is larger than 2^64 bytes"},
        VerifierCase{.name = "UseAfterKill",
                     .body = {kStorage, "kill_object(s)", "t = alloc_tensor(s, 0, [4], int8)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 't = alloc_tensor(s, 0, [4], int8)': 's' "
                                 "is used after its kill_object at 7:3"},
        VerifierCase{
            .name = "DoubleKill",
            .body = {kStorage, "kill_object(s)", "kill_object(s)"},
            .expected =
                "v.stir:8:3: error: function 'main', binding 'kill_object(s)': 's' is killed twice (first at 7:3)"},
        VerifierCase{.name = "KillOfNonObject",
                     .body = {"kill_object(n)"},
                     .params = "x: Tensor[(64,), int32], n: int",
                     .expected = "v.stir:6:3: error: function 'main', binding 'kill_object(n)': 'n' is int; only "
                                 "tensors and storages can be killed"},
        VerifierCase{.name = "ReturnOfKilled",
                     .body = {"kill_object(x)"},
                     .expected = "v.stir:7:3: error: function 'main', 'return x': 'x' was killed at 6:3"},
        VerifierCase{.name = "ReturnOfUndefined",
                     .body = {},
                     .ret = "y",
                     .expected = "v.stir:6:3: error: function 'main', 'return y': 'y' is not defined"},
        VerifierCase{.name = "ReturnTypeMismatch",
                     .ret_type = "Tensor[(64,), float32]",
                     .expected = "v.stir:6:3: error: function 'main', 'return x': 'x' is Tensor[(64,), int32], but the "
                                 "function returns Tensor[(64,), float32]"},
        // Returned tuples: each field a tensor of its own, defined and alive, of its type
        VerifierCase{.name = "TupleReturnIsValid",
                     .body = {"e = empty([8], int64)"},
                     .ret_type = "Tuple[Tensor[(64,), int32], Tensor[(8,), int64]]",
                     .ret = "(x, e)",
                     .expected = "ok"},
        VerifierCase{.name = "TupleOfOneIsValid",
                     .ret_type = "Tuple[Tensor[(64,), int32]]",
                     .ret = "(x,)",
                     .expected = "ok"},
        VerifierCase{.name = "TupleReturnOfUndefined",
                     .ret_type = "Tuple[Tensor[(64,), int32], Tensor[(64,), int32]]",
                     .ret = "(x, y)",
                     .expected = "v.stir:6:3: error: function 'main', 'return (x, y)': 'y' is not defined"},
        VerifierCase{.name = "TupleReturnOfKilled",
                     .body = {"e = empty([64], int32)", "kill_object(e)"},
                     .ret_type = "Tuple[Tensor[(64,), int32], Tensor[(64,), int32]]",
                     .ret = "(x, e)",
                     .expected = "v.stir:8:3: error: function 'main', 'return (x, e)': 'e' was killed at 7:3"},
        VerifierCase{.name = "TupleReturnsAVariableTwice",
                     .ret_type = "Tuple[Tensor[(64,), int32], Tensor[(64,), int32]]",
                     .ret = "(x, x)",
                     .expected = "v.stir:6:3: error: function 'main', 'return (x, x)': 'x' is returned twice (fields 0 "
                                 "and 1); return a copy of it instead"},
        VerifierCase{.name = "TupleFieldIsNotATensor",
                     .params = "x: Tensor[(64,), int32], n: int",
                     .ret_type = "Tuple[Tensor[(64,), int32], int]",
                     .ret = "(x, n)",
                     .expected = "v.stir:6:3: error: function 'main', 'return (x, n)': field 1 'n' is int; a returned "
                                 "tuple holds tensors"},
        VerifierCase{.name = "TupleFieldTypeMismatch",
                     .body = {"e = empty([8], int64)"},
                     .ret_type = "Tuple[Tensor[(64,), int32], Tensor[(8,), int32]]",
                     .ret = "(x, e)",
                     .expected = "v.stir:7:3: error: function 'main', 'return (x, e)': field 1 'e' is Tensor[(8,), "
                                 "int64], but the return type has Tensor[(8,), int32] there"},
        VerifierCase{.name = "TupleReturnTypeIsNotATuple",
                     .ret = "(x,)",
                     .expected = "v.stir:6:3: error: function 'main', 'return (x,)': the function returns a tuple of 1 "
                                 "value, but its return type is Tensor[(64,), int32]"},
        VerifierCase{.name = "TupleReturnTypeHasOtherArity",
                     .body = {"e = empty([8], int64)"},
                     .ret_type = "Tuple[Tensor[(64,), int32]]",
                     .ret = "(x, e)",
                     .expected = "v.stir:7:3: error: function 'main', 'return (x, e)': the function returns a tuple of "
                                 "2 values, but its return type is Tuple[Tensor[(64,), int32]]"},
        VerifierCase{.name = "TupleFieldIsDiscontiguous",
                     .body = {"e = empty_discontiguous([4, 16], int32)"},
                     .ret_type = "Tuple[Tensor[(64,), int32], Tensor[(4, 16), int32]]",
                     .ret = "(x, e)",
                     .expected = "v.stir:7:3: error: function 'main', 'return (x, e)': 'e' is a discontiguous tensor, "
                                 "which cannot be returned; copy_tensor it into a contiguous tensor first"},
        VerifierCase{.name = "TupleFieldIsAConstant",
                     .text = "const c: Tensor[(2,), int8] = [1, 2], scope=\"global\"\n\nfn f(x: Tensor[(2,), int8]) -> "
                             "Tuple[Tensor[(2,), int8], Tensor[(2,), int8]] {\n  return (x, c)\n}\n",
                     .expected = "v.stir:4:3: error: function 'f', 'return (x, c)': 'c' is a constant, which cannot be "
                                 "returned (the caller could write it); return a copy"},
        // A call of a function returning a tuple gives a Tuple variable, which may be returned as it is.
        VerifierCase{.name = "ACalledTupleIsReturnedWhole",
                     .text = "fn g(a: Tensor[(4,), int8]) -> Tuple[Tensor[(4,), int8]] {\n  return (a,)\n}\n\nfn "
                             "f(x: Tensor[(4,), int8]) -> Tuple[Tensor[(4,), int8]] {\n  r = call(g, [x])\n  return "
                             "r\n}\n",
                     .expected = "ok"},

        // alloc_storage
        VerifierCase{.name = "UnknownScope",
                     .body = {"s = alloc_storage([64], device=0, dtype=uint8, scope=\"shared\")"},
                     .expected = "v.stir:6:3: error: function 'main', binding 's = alloc_storage([64], device=0, "
                                 "dtype=uint8, scope=\"shared\")': unknown scope 'shared' (target 'opencl' has global, "
                                 "global.onchip, global.texture, global.texture-weight, global.texture-nhwc)"},
        VerifierCase{.name = "NegativeDevice",
                     .body = {"s = alloc_storage([64], device=-1, dtype=uint8, scope=\"global\")"},
                     .expected = "v.stir:6:3: error: function 'main', binding 's = alloc_storage([64], device=-1, "
                                 "dtype=uint8, scope=\"global\")': device -1 is negative"},
        VerifierCase{
            .name = "BufferStorageSizeIsOneNumber",
            .body = {"s = alloc_storage([8, 8], device=0, dtype=uint8, scope=\"global\")"},
            .expected = "v.stir:6:3: error: function 'main', binding 's = alloc_storage([8, 8], device=0, dtype=uint8, "
                        "scope=\"global\")': a storage in buffer scope 'global' has the size [nbytes], got [8, 8]"},
        VerifierCase{.name = "ImageStorageSizeIsHeightAndWidth",
                     .body = {"s = alloc_storage([64], device=0, dtype=float32, scope=\"global.texture\")"},
                     .expected = "v.stir:6:3: error: function 'main', binding 's = alloc_storage([64], device=0, "
                                 "dtype=float32, scope=\"global.texture\")': a storage in image scope 'global.texture' "
                                 "has the size [height, width], got [64]"},
        VerifierCase{.name = "StorageSizeMustBePositive",
                     .body = {"s = alloc_storage([0], device=0, dtype=uint8, scope=\"global\")"},
                     .expected = "v.stir:6:3: error: function 'main', binding 's = alloc_storage([0], device=0, "
                                 "dtype=uint8, scope=\"global\")': storage size [0] is not positive"},
        VerifierCase{
            .name = "ImageStorageDtype",
            .body = {"s = alloc_storage([4, 4], device=0, dtype=int32, scope=\"global.texture\")"},
            .expected = "v.stir:6:3: error: function 'main', binding 's = alloc_storage([4, 4], device=0, dtype=int32, "
                        "scope=\"global.texture\")': an image storage holds RGBA float32 or float16 pixels, not int32"},
        VerifierCase{
            .name = "ImageTallerThanTheTargetAllows",
            .body = {"s = alloc_storage([16385, 4], device=0, dtype=float16, scope=\"global.texture\")"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 's = alloc_storage([16385, 4], device=0, dtype=float16, "
                "scope=\"global.texture\")': image height 16385 exceeds the target's maximum of 16384"},
        VerifierCase{
            .name = "ImageWiderThanTheTargetAllows",
            .body = {"s = alloc_storage([4, 20000], device=0, dtype=float16, scope=\"global.texture\")"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 's = alloc_storage([4, 20000], device=0, dtype=float16, "
                "scope=\"global.texture\")': image width 20000 exceeds the target's maximum of 16384"},
        VerifierCase{
            .name = "OnchipStorageOverCapacity",
            .body = {"s = alloc_storage([262145], device=0, dtype=uint8, scope=\"global.vtcm\")"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 's = alloc_storage([262145], device=0, dtype=uint8, "
                "scope=\"global.vtcm\")': 262145 bytes exceed the capacity of scope 'global.onchip' (262144 bytes)"},
        VerifierCase{.name = "OnchipStoragesLiveAtOnceOverCapacity",
                     .body = {"s1 = alloc_storage([200000], device=0, dtype=uint8, scope=\"global.vtcm\")",
                              "s2 = alloc_storage([100000], device=0, dtype=uint8, scope=\"global.onchip\")"},
                     .expected = "v.stir:7:3: error: function 'main', binding 's2 = alloc_storage([100000], device=0, "
                                 "dtype=uint8, scope=\"global.onchip\")': scope 'global.onchip' would hold 300000 "
                                 "bytes at once (storages 's1', 's2'), over its capacity of 262144 bytes"},
        VerifierCase{
            .name = "OnchipStorageKilledFreesCapacity",
            .body = {"s1 = alloc_storage([200000], device=0, dtype=uint8, scope=\"global.vtcm\")", "kill_object(s1)",
                     "s2 = alloc_storage([100000], device=0, dtype=uint8, scope=\"global.onchip\")"},
            .expected = "ok"},

        // alloc_tensor in buffers
        VerifierCase{.name = "AllocTensorNeedsStorage",
                     .body = {"t = alloc_tensor(x, 0, [4], int8)"},
                     .expected = "v.stir:6:3: error: function 'main', binding 't = alloc_tensor(x, 0, [4], int8)': 'x' "
                                 "is Tensor[(64,), int32], not a Storage"},
        VerifierCase{.name = "NegativeOffset",
                     .body = {kStorage, "t = alloc_tensor(s, -128, [4], int8)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, -128, [4], int8)': "
                                 "offset -128 is negative"},
        VerifierCase{.name = "NegativeExtent",
                     .body = {kStorage, "t = alloc_tensor(s, 0, [4, -2], int8)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, 0, [4, -2], int8)': "
                                 "shape [4, -2] has a negative extent"},
        VerifierCase{
            .name = "TensorByteSizeOverflows",
            .body = {kStorage, "t = alloc_tensor(s, 0, [4294967296, 4294967296], int8)"},
            .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, 0, [4294967296, 4294967296], "
                        "int8)': shape [4294967296, 4294967296] of int8 is larger than 2^64 bytes"},
        VerifierCase{
            .name = "TensorOutsideStorage",
            .body = {kStorage, "t = alloc_tensor(s, 3968, [64], int32)"},
            .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, 3968, [64], int32)': tensor "
                        "'t' in storage 's': 256 bytes at offset 3968 do not fit in a storage of 4096 bytes"},
        // offset + nbytes would wrap around 2^64.
        VerifierCase{
            .name = "TensorOutsideStorageOffsetWraps",
            .body = {kStorage, "t = alloc_tensor(s, 9223372036854775807, [2305843009213693953], int32)"},
            .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, 9223372036854775807, "
                        "[2305843009213693953], int32)': tensor 't' in storage 's': 9223372036854775812 bytes at "
                        "offset 9223372036854775807 do not fit in a storage of 4096 bytes"},
        VerifierCase{.name = "MisalignedOffset",
                     .body = {kStorage, "t = alloc_tensor(s, 64, [4], int8)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, 64, [4], int8)': "
                                 "offset 64 is not a multiple of 128, the alignment of scope 'global'"},
        VerifierCase{.name = "StorageParametersHaveNoKnownSize",
                     .body = {"t = alloc_tensor(p, 4, [1000000], int32)"},
                     .params = "x: Tensor[(64,), int32], p: Storage",
                     .expected = "ok"},

        VerifierCase{
            .name = "LiveBufferTensorsOverlap",
            .body = {kStorage, "a = alloc_tensor(s, 128, [64], int32)", "b = alloc_tensor(s, 256, [4], int8)"},
            .expected = "v.stir:8:3: error: function 'main', binding 'b = alloc_tensor(s, 256, [4], int8)': tensor 'b' "
                        "(bytes [256, 260)) overlaps live tensor 'a' (bytes [128, 384)) in storage 's'"},
        // empty, copy_tensor, call
        VerifierCase{.name = "EmptyInUnknownScope",
                     .body = {"e = empty([4], int8, scope=\"local\")"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'e = empty([4], int8, scope=\"local\")': "
                                 "unknown scope 'local' (target 'opencl' has global, global.onchip, global.texture, "
                                 "global.texture-weight, global.texture-nhwc)"},
        VerifierCase{.name = "EmptyWithNegativeExtent",
                     .body = {"e = empty([-4], int8)"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'e = empty([-4], int8, "
                                 "scope=\"global\")': shape [-4] has a negative extent"},
        VerifierCase{
            .name = "CopyOfNonTensor",
            .body = {kStorage, "copy_tensor(s, x)"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 'copy_tensor(s, x)': source 's' is Storage, not a tensor"},
        VerifierCase{.name = "CopyIntoNonTensor",
                     .body = {kStorage, "copy_tensor(x, s)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 'copy_tensor(x, s)': destination 's' is "
                                 "Storage, not a tensor"},
        VerifierCase{
            .name = "CopyBetweenDifferentTensors",
            .body = {"e = empty([8, 8], int32)", "copy_tensor(x, e)"},
            .expected = "v.stir:7:3: error: function 'main', binding 'copy_tensor(x, e)': source is Tensor[(64,), "
                        "int32] but destination is Tensor[(8, 8), int32]; shapes and dtypes must be equal"},
        VerifierCase{
            .name = "CallArgumentCount",
            .text =
                "fn g(a: int) -> int {\n  return a\n}\n\nfn f(x: int) -> int {\n  r = call(g, [x, 1])\n  return r\n}\n",
            .expected =
                "v.stir:6:3: error: function 'f', binding 'r = call(g, [x, 1])': function 'g' takes 1 argument, got 2"},
        VerifierCase{.name = "CallArgumentType",
                     .text = "fn g(a: int, b: Tensor[(4,), int8]) -> int {\n  return a\n}\n\nfn f(x: int) -> int {\n  "
                             "r = call(g, [x, 1.5])\n  return r\n}\n",
                     .expected = "v.stir:6:3: error: function 'f', binding 'r = call(g, [x, 1.5])': argument 2 (the "
                                 "float 1.5) is float, but parameter 'b' of function 'g' is Tensor[(4,), int8]"},
        VerifierCase{
            .name = "CallResultHasTheCalleeType",
            .text =
                "fn g(a: int) -> int {\n  return a\n}\n\nfn f(x: int) -> float {\n  r = call(g, [3])\n  return r\n}\n",
            .expected = "v.stir:7:3: error: function 'f', 'return r': 'r' is int, but the function returns float"},

        // Images
        VerifierCase{.name = "ImageTensorAtNonZeroOffset",
                     .body = {kImage, "t = alloc_tensor(img, 16, [2, 8, 4], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, 16, [2, 8, 4], "
                                 "float32)': offset 16 in image storage 'img': a tensor in an image is placed at a "
                                 "pixel [y, x], not at a byte offset"},
        // Tensors at 2D offsets: rectangles inside the storage, apart while both live.
        VerifierCase{.name = "ImageTensorsShareAnImageSideBySide",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [4, 4, 4], float32)",
                              "b = alloc_tensor(img, [0, 4], [4, 4, 4], float32)",
                              "c = alloc_tensor(img, [4, 0], [2, 8, 4], float32)"},
                     .expected = "ok"},
        VerifierCase{.name = "ImageTensorsOverlapByOnePixel",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [4, 4, 4], float32)",
                              "b = alloc_tensor(img, [3, 3], [2, 2, 4], float32)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 'b = alloc_tensor(img, [3, 3], [2, 2, 4], "
                                 "float32)': tensor 'b' (rows 3 to 4, columns 3 to 4) overlaps live tensor 'a' (rows 0 "
                                 "to 3, columns 0 to 3) in image storage 'img'"},
        VerifierCase{.name = "ImageTensorTakesTheRectangleOfAKilledOne",
                     .body = {kImage, "a = alloc_tensor(img, [2, 2], [4, 4, 4], float32)", "kill_object(a)",
                              "b = alloc_tensor(img, [0, 0], [8, 8, 4], float32)"},
                     .expected = "ok"},
        VerifierCase{.name = "ImageTensorOutsideItsStorage",
                     .body = {kImage, "t = alloc_tensor(img, [15, 0], [2, 8, 4], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, [15, 0], [2, 8, 4], "
                                 "float32)': tensor 't' (activation layout) in storage 'img' needs an image of height 2 "
                                 "and width 8 at [15, 0], but the storage is [16, 8]"},
        VerifierCase{.name = "ImageTensorOneColumnTooFarRight",
                     .body = {kImage, "t = alloc_tensor(img, [0, 1], [2, 8, 4], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, [0, 1], [2, 8, 4], "
                                 "float32)': tensor 't' (activation layout) in storage 'img' needs an image of height 2 "
                                 "and width 8 at [0, 1], but the storage is [16, 8]"},
        VerifierCase{.name = "ImageOffsetBelowTwoToThe31",
                     .body = {kImage, "t = alloc_tensor(img, [2147483648, 0], [2, 8, 4], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, [2147483648, 0], "
                                 "[2, 8, 4], float32)': tensor 't': image offset [2147483648, 0] is out of range: row and "
                                 "column must be below 2^31"},
        VerifierCase{.name = "ImageOffsetInABufferStorage",
                     .body = {kStorage, "t = alloc_tensor(s, [0, 1], [4], int32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(s, [0, 1], [4], int32)': "
                                 "tensor 't' in buffer storage 's' has an image offset [0, 1]; a tensor in a buffer is "
                                 "placed at a byte offset"},
        // Image parameters and offsets.
        VerifierCase{.name = "ImageOffsetParametersTakeTensorsAnywhere",
                     .body = {kImage, kImage2, "a = alloc_tensor(img, [3, 4], [2, 4, 4], float32)",
                              "b = alloc_tensor(img2, [5, 0], [2, 4, 4], float32)",
                              "call_kernel(img_off_copy, [a, b], grid=[4, 2])"},
                     .expected = "ok"},
        VerifierCase{.name = "ImageParameterWithoutOffsetTakesOnlyTheOrigin",
                     .body = {kImage, kImage2, "a = alloc_tensor(img, [0, 4], [2, 4, 4], float32)",
                              "b = alloc_tensor(img2, [0, 0], [2, 4, 4], float32)",
                              "call_kernel(img_copy, [a, b], grid=[4, 2])"},
                     .expected = "v.stir:10:3: error: function 'main', binding 'call_kernel(img_copy, [a, b], grid=[4, "
                                 "2])': parameter 'src' of kernel 'img_copy' has no stowage_image_offset parameter "
                                 "after it, so it takes only tensors at [0, 0], but tensor 'a' is at [0, 4] in image "
                                 "storage 'img'"},
        VerifierCase{.name = "OneImageReadAndWrittenThroughTwoTensors",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [2, 4, 4], float32)",
                              "b = alloc_tensor(img, [0, 4], [2, 4, 4], float32)",
                              "call_kernel(img_off_copy, [a, b], grid=[4, 2])"},
                     .expected = "v.stir:9:3: error: function 'main', binding 'call_kernel(img_off_copy, [a, b], "
                                 "grid=[4, 2])': tensors 'a' and 'b' share image storage 'img' and are bound to "
                                 "parameters 'src' (read_only image2d_t) and 'dst' (write_only image2d_t) of kernel "
                                 "'img_off_copy': one kernel cannot read and write the same image"},
        VerifierCase{.name = "OneImageReadThroughTwoTensors",
                     .body = {kImage, kImage2, "a = alloc_tensor(img, [0, 0], [8, 4], float32)",
                              "b = alloc_tensor(img, [1, 0], [8, 4], float32)",
                              "c = alloc_tensor(img2, 0, [8, 4], float32)", "call_kernel(img_off_add, [a, b, c], grid=[8])"},
                     .expected = "ok"},
        // Views of tensors in images: bands of whole rows.
        VerifierCase{.name = "ImageViewOfWholeRows",
                     .body = {kImage, kImage2, "a = alloc_tensor(img, [4, 0], [4, 8, 4], float32)",
                              "v = view(a, 256, [2, 8, 4], float32)", "b = alloc_tensor(img2, 0, [2, 8, 4], float32)",
                              "call_kernel(img_off_copy, [v, b], grid=[8, 2])"},
                     .expected = "ok"},
        VerifierCase{.name = "ImageViewStartsWithinARow",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [4, 8, 4], float32)",
                              "v = view(a, 64, [2, 8, 4], float32)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 'v = view(a, 64, [2, 8, 4], float32)': a "
                                 "view of 'a' in image scope 'global.texture' is whole rows of it: offset 64 is not a "
                                 "multiple of its rows' 128 bytes"},
        VerifierCase{.name = "ImageViewOfOtherWidth",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [4, 8, 4], float32)",
                              "v = view(a, 0, [8, 4, 4], float32)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 'v = view(a, 0, [8, 4, 4], float32)': a "
                                 "view of 'a' in image scope 'global.texture' is whole rows of it: the view is 4 pixels "
                                 "wide, 'a' 8"},
        VerifierCase{.name = "ImageViewRowsOutsideTheTensor",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [4, 8, 4], float32)",
                              "v = view(a, 384, [2, 8, 4], float32)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 'v = view(a, 384, [2, 8, 4], float32)': "
                                 "rows [3, 5) lie outside 'a', which has 4 rows in image scope 'global.texture'"},
        VerifierCase{.name = "ImageViewKeepsTheDtype",
                     .body = {kImage, "a = alloc_tensor(img, [0, 0], [4, 8, 4], float32)",
                              "v = view(a, 0, [4, 8, 4], int32)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 'v = view(a, 0, [4, 8, 4], int32)': 'a' "
                                 "is in image scope 'global.texture': a view of it keeps its dtype float32, not int32"},
        VerifierCase{.name = "ImageViewIsAtItsBandsRows",
                     .body = {kImage, kImage2, "a = alloc_tensor(img, [2, 0], [4, 8, 4], float32)",
                              "v = view(a, 128, [1, 8, 4], float32)", "b = alloc_tensor(img2, 0, [1, 8, 4], float32)",
                              "call_kernel(img_copy, [v, b], grid=[8])"},
                     .expected = "v.stir:11:3: error: function 'main', binding 'call_kernel(img_copy, [v, b], "
                                 "grid=[8])': parameter 'src' of kernel 'img_copy' has no stowage_image_offset "
                                 "parameter after it, so it takes only tensors at [0, 0], but tensor 'v' is at [3, 0] "
                                 "in image storage 'img'"},
        VerifierCase{.name = "ImageTensorMustEndInFour",
                     .body = {kImage, "t = alloc_tensor(img, 0, [8, 3], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, 0, [8, 3], "
                                 "float32)': shape [8, 3] in image storage 'img' must end in 4 (the RGBA channels)"},
        VerifierCase{.name = "ImageTensorOfRankZero",
                     .body = {kImage, "t = alloc_tensor(img, 0, [], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, 0, [], float32)': "
                                 "shape [] in image storage 'img' must end in 4 (the RGBA channels)"},
        VerifierCase{
            .name = "ImageTensorRankAtMostFive",
            .body = {kImage, "t = alloc_tensor(img, 0, [1, 1, 1, 1, 1, 4], float32)"},
            .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, 0, [1, 1, 1, 1, 1, 4], "
                        "float32)': shape [1, 1, 1, 1, 1, 4] in image storage 'img' has more than 5 dimensions"},
        VerifierCase{
            .name = "ImageTensorDtypeMatchesPixels",
            .body = {kImage, "t = alloc_tensor(img, 0, [8, 4], float16)"},
            .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, 0, [8, 4], float16)': "
                        "tensor dtype float16 differs from the float32 pixels of image storage 'img'"},
        // [A, B, C, D, 4] -> height A*B*C, width D; [4, 4, 16, 4] counts A as 1.
        VerifierCase{.name = "ImageExtentActivationLayout",
                     .body = {kImage, "t = alloc_tensor(img, 0, [4, 4, 16, 4], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(img, 0, [4, 4, 16, 4], "
                                 "float32)': tensor 't' (activation layout) in storage 'img' needs an image of height "
                                 "16 and width 16, but the storage is [16, 8]"},
        VerifierCase{.name = "ImageExtentActivationLayoutFits",
                     .body = {kImage, "t = alloc_tensor(img, 0, [2, 2, 4, 8, 4], float32)"},
                     .expected = "ok"},
        // [A, B, C, D, 4] -> height A, width B*C*D.
        VerifierCase{.name = "ImageExtentWeightLayout",
                     .body = {"w = alloc_storage([4, 64], device=0, dtype=float16, scope=\"global.texture-weight\")",
                              "t = alloc_tensor(w, 0, [8, 2, 2, 2, 4], float16)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(w, 0, [8, 2, 2, 2, 4], "
                                 "float16)': tensor 't' (weight layout) in storage 'w' needs an image of height 8 and "
                                 "width 8, but the storage is [4, 64]"},
        VerifierCase{.name = "ImageExtentWeightLayoutFits",
                     .body = {"w = alloc_storage([4, 64], device=0, dtype=float16, scope=\"global.texture-weight\")",
                              "t = alloc_tensor(w, 0, [4, 2, 4, 8, 4], float16)"},
                     .expected = "ok"},
        // [A, B, C, D, 4] -> height A*B, width C*D.
        VerifierCase{.name = "ImageExtentNhwcLayout",
                     .body = {"n = alloc_storage([8, 8], device=0, dtype=float32, scope=\"global.texture-nhwc\")",
                              "t = alloc_tensor(n, 0, [2, 4, 3, 3, 4], float32)"},
                     .expected = "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(n, 0, [2, 4, 3, 3, 4], "
                                 "float32)': tensor 't' (nhwc layout) in storage 'n' needs an image of height 8 and "
                                 "width 9, but the storage is [8, 8]"},
        // No elements, so its byte size is 0, but the nhwc width C*D wraps around.
        VerifierCase{
            .name = "ImageExtentOverflows",
            .body = {"n = alloc_storage([8, 8], device=0, dtype=float32, scope=\"global.texture-nhwc\")",
                     "t = alloc_tensor(n, 0, [0, 4294967296, 4294967296, 4], float32)"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 't = alloc_tensor(n, 0, [0, 4294967296, 4294967296, 4], "
                "float32)': the image extent of shape [0, 4294967296, 4294967296, 4] overflows 64 bits"},
        VerifierCase{
            .name = "LiveImageTensorsOverlap",
            .body = {kImage, "a = alloc_tensor(img, 0, [2, 8, 4], float32)",
                     "b = alloc_tensor(img, 0, [8, 4], float32)"},
            .expected = "v.stir:8:3: error: function 'main', binding 'b = alloc_tensor(img, 0, [8, 4], float32)': "
                        "tensor 'b' (rows 0 to 0, columns 0 to 7) overlaps live tensor 'a' (rows 0 to 1, columns 0 to 7) "
                        "in image storage 'img'"},

        // call_kernel
        VerifierCase{.name = "KernelArgumentCount",
                     .body = {"call_kernel(add, [x, x], grid=[64])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x], grid=[64])': "
                                 "kernel 'add' takes 3 arguments, got 2"},
        VerifierCase{
            .name = "BufferParameterGivenALiteral",
            .body = {"call_kernel(add, [x, 3, x], grid=[64])"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, 3, x], grid=[64])': parameter 'b' "
                "of kernel 'add' is a global buffer, but argument 2 (the integer 3) is a literal, not a tensor"},
        VerifierCase{
            .name = "BufferParameterGivenAStorage",
            .body = {kStorage, "call_kernel(add, [x, x, s], grid=[64])"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 'call_kernel(add, [x, x, s], grid=[64])': parameter 'c' "
                "of kernel 'add' is a global buffer, but argument 3 ('s') is Storage, not a tensor"},
        VerifierCase{
            .name = "BufferParameterGivenAnImageTensor",
            .body = {"e = empty([64], int32, scope=\"global.texture\")", "call_kernel(add, [x, e, x], grid=[64])"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 'call_kernel(add, [x, e, x], grid=[64])': parameter 'b' "
                "of kernel 'add' is a global buffer, but tensor 'e' is in image scope 'global.texture'"},
        VerifierCase{
            .name = "BufferElementType",
            .body = {"e = empty([64], uint32)", "call_kernel(add, [x, x, e], grid=[64])"},
            .expected = "v.stir:7:3: error: function 'main', binding 'call_kernel(add, [x, x, e], grid=[64])': "
                        "parameter 'c' of kernel 'add' points to int, but tensor 'e' holds uint32"},
        VerifierCase{
            .name = "VectorBufferElementCount",
            .body = {"e = empty([6], float32)", "call_kernel(scale4, [e, 1.0], grid=[1])"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 'call_kernel(scale4, [e, 1.0], grid=[1])': parameter 'x' "
                "of kernel 'scale4' points to float4, but tensor 'e' has 6 elements, not a multiple of 4"},
        VerifierCase{
            .name = "ImageParameterGivenABufferTensor",
            .body = {kImage, "t = alloc_tensor(img, 0, [8, 4], float32)", "e = empty([8, 4], float32)",
                     "call_kernel(img_copy, [t, e], grid=[8])"},
            .expected =
                "v.stir:9:3: error: function 'main', binding 'call_kernel(img_copy, [t, e], grid=[8])': parameter "
                "'dst' of kernel 'img_copy' is a write_only image2d_t, but tensor 'e' is not in an image scope"},
        VerifierCase{.name = "ImageReadAndWritten",
                     .body = {"e = empty([8, 4], float32, scope=\"global.texture\")",
                              "call_kernel(img_scale, [e, e, 2.0], grid=[8])"},
                     .expected = "v.stir:7:3: error: function 'main', binding 'call_kernel(img_scale, [e, e, 2.0], "
                                 "grid=[8])': tensor 'e' is bound to parameters 'src' and 'dst' of kernel 'img_scale': "
                                 "it would be read and written through an image"},
        // Image offset parameters take no argument: the runtime sets them.
        VerifierCase{.name = "ImageOffsetParametersTakeNoArgument",
                     .body = {"a = empty([8, 4], float32, scope=\"global.texture\")",
                              "b = empty([8, 4], float32, scope=\"global.texture\")",
                              "call_kernel(img_off_copy, [a, b], grid=[8])"},
                     .expected = "ok"},
        VerifierCase{.name = "ImageOffsetParametersCountNoArgument",
                     .body = {"a = empty([8, 4], float32, scope=\"global.texture\")",
                              "call_kernel(img_off_copy, [a, 0, a], grid=[8])"},
                     .expected = "v.stir:7:3: error: function 'main', binding 'call_kernel(img_off_copy, [a, 0, a], "
                                 "grid=[8])': kernel 'img_off_copy' takes 2 arguments, got 3"},
        VerifierCase{
            .name = "ScalarParameterType",
            .body = {"call_kernel(fill_char, [x, 2.5], grid=[64])"},
            .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(fill_char, [x, 2.5], grid=[64])': "
                        "parameter 'x' of kernel 'fill_char' points to char, but tensor 'x' holds int32"},
        VerifierCase{
            .name = "ScalarCharGivenAFloat",
            .body = {"e = empty([8], int8)", "call_kernel(fill_char, [e, 2.5], grid=[8])"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 'call_kernel(fill_char, [e, 2.5], grid=[8])': parameter "
                "'v' of kernel 'fill_char' is a scalar char, but argument 2 (the float 2.5) is float"},
        VerifierCase{.name = "ScalarFloatGivenAnInt",
                     .body = {"e = empty([4], float32)", "call_kernel(scale4, [e, n], grid=[1])"},
                     .params = "x: Tensor[(64,), int32], n: int",
                     .expected = "v.stir:7:3: error: function 'main', binding 'call_kernel(scale4, [e, n], grid=[1])': "
                                 "parameter 's' of kernel 'scale4' is a scalar float, but argument 2 ('n') is int"},
        VerifierCase{
            .name = "ScalarIntegerRange",
            .body = {"e = empty([8], int8)", "call_kernel(fill_char, [e, 128], grid=[8])"},
            .expected = "v.stir:7:3: error: function 'main', binding 'call_kernel(fill_char, [e, 128], grid=[8])': the "
                        "integer 128 does not fit parameter 'v' of kernel 'fill_char', a char"},
        VerifierCase{
            .name = "ScalarIntegerRangeUnsigned",
            .body = {"e = empty([8], uint64)", "call_kernel(fill_ulong, [e, -1], grid=[8])"},
            .expected = "v.stir:7:3: error: function 'main', binding 'call_kernel(fill_ulong, [e, -1], grid=[8])': the "
                        "integer -1 does not fit parameter 'v' of kernel 'fill_ulong', a ulong"},
        VerifierCase{
            .name = "LocalParameterNotSupported",
            .body = {"e = empty([8], float32)", "call_kernel(with_local, [e, e], grid=[8])"},
            .expected =
                "v.stir:7:3: error: function 'main', binding 'call_kernel(with_local, [e, e], grid=[8])': parameter "
                "'tmp' of kernel 'with_local' is a local buffer, which call_kernel does not support yet"},
        VerifierCase{
            .name = "VectorScalarNotSupported",
            .body = {"call_kernel(vec_scalar, [1.0], grid=[1])"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 'call_kernel(vec_scalar, [1.0], grid=[1])': parameter 'v' "
                "of kernel 'vec_scalar' is a vector scalar float4, which call_kernel does not support yet"},
        VerifierCase{.name = "GridRank",
                     .body = {"call_kernel(add, [x, x, x], grid=[])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[])': "
                                 "grid [] must have 1 to 3 dimensions"},
        VerifierCase{.name = "GridRankFour",
                     .body = {"call_kernel(add, [x, x, x], grid=[1, 2, 4, 8])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[1, 2, "
                                 "4, 8])': grid [1, 2, 4, 8] must have 1 to 3 dimensions"},
        VerifierCase{.name = "GridExtentsPositive",
                     .body = {"call_kernel(add, [x, x, x], grid=[64, 0])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[64, "
                                 "0])': grid [64, 0] has an extent that is not positive"},
        // Images are copied pixel for pixel: layouts that reshape the same tensor to other
        // extents cannot be copied into each other (the VM refused it only at run time).
        VerifierCase{.name = "CopiesBetweenImagesNeedEqualExtents",
                     .body = {"a = empty([2, 8, 4], float32, scope=\"global.texture\")",
                              "b = empty([2, 8, 4], float32, scope=\"global.texture-nhwc\")", "copy_tensor(a, b)"},
                     .expected = "v.stir:8:3: error: function 'main', binding 'copy_tensor(a, b)': copy_tensor between "
                                 "images of 2x8 pixels (scope 'global.texture') and 1x16 pixels (scope "
                                 "'global.texture-nhwc') is not supported; copy through a buffer tensor"},
        VerifierCase{.name = "CopiesBetweenImagesOfEqualExtents",
                     .body = {"a = empty([2, 8, 4], float32, scope=\"global.texture-weight\")",
                              "b = empty([2, 8, 4], float32, scope=\"global.texture-nhwc\")", "copy_tensor(a, b)"},
                     .expected = "ok"},
        // The issue's grid: its product wraps 64 bits, and once ran 4 work items.
        VerifierCase{
            .name = "GridWorkItemsAreBounded",
            .body = {"call_kernel(add, [x, x, x], grid=[9223372036854775807, 9223372036854775807, 4])"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[9223372036854775807, "
                "9223372036854775807, 4])': grid [9223372036854775807, 9223372036854775807, 4] has 2^64 or more work "
                "items, more than the limit of 1099511627776 (2^40)"},
        VerifierCase{
            .name = "GridWorkItemsOverTheLimit",
            .body = {"call_kernel(add, [x, x, x], grid=[1048576, 1048577])"},
            .expected =
                "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[1048576, 1048577])': "
                "grid [1048576, 1048577] has 1099512676352 work items, more than the limit of 1099511627776 (2^40)"},
        VerifierCase{.name = "GridWorkItemsAtTheLimit",
                     .body = {"call_kernel(add, [x, x, x], grid=[1048576, 1048576])"},
                     .expected = "ok"},
        VerifierCase{.name = "LocalSizeRank",
                     .body = {"call_kernel(add, [x, x, x], grid=[64], local=[8, 1])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[64], "
                                 "local=[8, 1])': local size [8, 1] has 2 dimensions, but grid [64] has 1"},
        VerifierCase{.name = "LocalSizePositive",
                     .body = {"call_kernel(add, [x, x, x], grid=[64], local=[-8])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[64], "
                                 "local=[-8])': local size [-8] has an extent that is not positive"},
        VerifierCase{.name = "LocalSizeDividesGrid",
                     .body = {"call_kernel(add, [x, x, x], grid=[64, 6], local=[8, 4])"},
                     .expected = "v.stir:6:3: error: function 'main', binding 'call_kernel(add, [x, x, x], grid=[64, "
                                 "6], local=[8, 4])': local size [8, 4] does not divide grid [64, 6] in dimension 1"}),
    [](const testing::TestParamInfo<VerifierCase>& info) { return info.param.name; });

// --- Programs that obey every rule -------------------------------------------

TEST(VerifierTest, ExampleIsValid) { EXPECT_EQ(verify_example(read_example()), "ok"); }

constexpr std::string_view kValidProgram = R"(kernels ops """
"""

fn helper(t: Tensor[(64,), int32], n: int) -> Tensor[(64,), int32] {
  return t
}

fn main(x: Tensor[(64,), int32], f: float) -> Tensor[(64,), int32] {
  s = alloc_storage([1024], device=0, dtype=uint8, scope="global")
  a = alloc_tensor(s, 0, [64], int32)
  b = alloc_tensor(s, 256, [64], int32)
  nothing = alloc_tensor(s, 128, [0, 5], int32)
  edge = alloc_tensor(s, 1024, [0], int8)
  copy_tensor(x, a)
  call_kernel(add, [x, a, b], grid=[64], local=[16])
  kill_object(a)
  c = alloc_tensor(s, 0, [64], int32)
  call_kernel(add, [b, b, c], grid=[8, 8], local=[2, 4])
  v = alloc_storage([262144], device=0, dtype=uint8, scope="global.vtcm")
  kill_object(v)
  w = alloc_storage([262144], device=0, dtype=uint8, scope="global.onchip")
  q = alloc_tensor(w, 128, [16], float32)
  call_kernel(scale4, [q, 2.5], grid=[4])
  call_kernel(scale4, [q, f], grid=[4])
  cs = alloc_tensor(w, 1024, [16], int8)
  call_kernel(fill_char, [cs, -128], grid=[16])
  u = empty([2], uint64)
  call_kernel(fill_ulong, [u, 9223372036854775807], grid=[1])
  img = alloc_storage([16, 8], device=0, dtype=float32, scope="global.texture")
  i1 = alloc_tensor(img, 0, [2, 8, 4], float32)
  i0 = alloc_tensor(img, 0, [0, 8, 4], float32)
  img2 = alloc_storage([16, 8], device=0, dtype=float32, scope="global.texture")
  i2 = alloc_tensor(img2, 0, [16, 8, 4], float32)
  call_kernel(img_copy, [i1, i2], grid=[8, 16])
  call_kernel(img_add, [i1, i1, i2], grid=[8, 16])
  kill_object(i1)
  i3 = alloc_tensor(img, 0, [1, 16, 8, 4], float32)
  e = empty([4, 4], float16, scope="global.texture")
  r = call(helper, [c, 7])
  return r
}
)";

TEST(VerifierTest, ValidProgramUsingEveryOp) { EXPECT_EQ(verify_text(kValidProgram), "ok"); }

// Whatever a mutated program parses into, the verifier accepts it or gives one
// located error, and never crashes.
TEST(VerifierTest, MutatedProgramsNeverCrash) {
  std::string text(kValidProgram);
  size_t verified = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : {'0', '9', '-', 'a', 'x', 'i'}) {
      std::string mutated = text;
      mutated[i] = c;
      std::string result = verify_text(mutated);
      if (result.rfind("parse error: ", 0) == 0) continue;
      ++verified;
      if (result == "ok") continue;
      EXPECT_EQ(result.rfind("v.stir:", 0), 0u) << result;
      EXPECT_NE(result.find(": error: function '"), std::string::npos) << result;
    }
  }
  EXPECT_GT(verified, text.size());
}

TEST(VerifierTest, BuiltModuleWithoutLocations) {
  Module m;
  Function fn;
  fn.name = "f";
  fn.params = {{"x", Type::of(Type::Kind::kInt), {}}};
  fn.ret_type = Type::of(Type::Kind::kInt);
  Binding b;
  b.op = Op::kKillObject;
  b.vars = {"x"};
  fn.bindings.push_back(b);
  fn.returns = {"x"};
  m.functions.push_back(fn);
  Status s = verify_module(m, opencl());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(),
            "error: function 'f', binding 'kill_object(x)': 'x' is int; only tensors and storages can be killed");
  EXPECT_EQ(verify_function(m, m.functions[0], opencl(), "f.stir").error().message(),
            "f.stir: error: function 'f', binding 'kill_object(x)': 'x' is int; only tensors and storages can be "
            "killed");
}

// What the text form cannot write: an empty tuple, and a single return of two names.
TEST(VerifierTest, BuiltReturnsAreOneVariableOrANonEmptyTuple) {
  Module m;
  Function fn;
  fn.name = "f";
  fn.params = {{"x", Type::tensor({4}, DType::kInt8), {}}, {"y", Type::tensor({4}, DType::kInt8), {}}};
  fn.ret_type = Type::of(Type::Kind::kTuple);
  fn.returns_tuple = true;
  m.functions.push_back(fn);
  EXPECT_EQ(verify_module(m, opencl()).error().message(),
            "error: function 'f', 'return ()': the function returns an empty tuple; return at least one tensor");
  m.functions[0].returns_tuple = false;
  m.functions[0].returns = {"x", "y"};
  m.functions[0].ret_type = Type::tensor({4}, DType::kInt8);
  EXPECT_EQ(verify_module(m, opencl()).error().message(),
            "error: function 'f', 'return x, y': a return that is not a tuple names one variable, not 2");
}

// --- Module-level rules --------------------------------------------------------

TEST(VerifierTest, DuplicateKernelAcrossUnits) {
  Module m = parse_module("kernels a \"\"\"\n\"\"\"\nkernels b \"\"\"\n\"\"\"\n").take();
  m.units[0].signatures = {{"k", 0, {}}};
  m.units[1].signatures = {{"k", 1, {}}};
  EXPECT_EQ(verify_module(m, opencl(), "v.stir").error().message(),
            "v.stir:4:1: error: kernels 'b': kernel 'k' is also defined in kernels 'a'");
}

TEST(VerifierTest, UnprintableKernelSource) {
  Module m;
  m.units.push_back({"u", "s = \"\"\"", {}, {}});
  EXPECT_EQ(verify_module(m, opencl()).error().message(),
            "error: kernels 'u': the source contains '\"\"\"', which the text form cannot hold");
}

TEST(VerifierTest, NamesMustBeIdentifiers) {
  Module m;
  m.units.push_back({"u", "", {}, {{"not a name", 0, {}}}});
  EXPECT_EQ(verify_module(m, opencl()).error().message(),
            "error: kernels 'u': kernel name 'not a name' is not an identifier");
  m.units.clear();
  Function fn;
  fn.name = "my fn";
  fn.returns = {"x"};
  m.functions.push_back(fn);
  EXPECT_EQ(verify_module(m, opencl()).error().message(), "error: function 'my fn': the name is not an identifier");
  m.functions[0].name = "f";
  m.functions[0].params = {{"inf", Type::of(Type::Kind::kInt), {}}};
  EXPECT_EQ(verify_module(m, opencl()).error().message(),
            "error: function 'f', parameter 'inf': 'inf' is not a valid variable name");
}

// --- Binding form (modules built in code) --------------------------------------

Module one_binding_module(Binding b) {
  Module m;
  Function fn;
  fn.name = "f";
  fn.params = {{"x", Type::tensor({4}, DType::kInt8), {}}};
  fn.ret_type = Type::tensor({4}, DType::kInt8);
  fn.bindings.push_back(std::move(b));
  fn.returns = {"x"};
  m.functions.push_back(std::move(fn));
  return m;
}

std::string verify_built(Binding b) {
  Status s = verify_module(one_binding_module(std::move(b)), opencl());
  return s ? "ok" : s.error().message();
}

// A binding built in code and the verifier's exact message.
struct BuiltCase {
  std::string name;
  void (*build)(Binding& b);  // sets the fields the case needs
  std::string expected;
};

void PrintTo(const BuiltCase& c, std::ostream* os) { *os << c.name; }

class BuiltBindingTest : public testing::TestWithParam<BuiltCase> {};

TEST_P(BuiltBindingTest, GivesTheExactMessage) {
  Binding b;
  GetParam().build(b);
  EXPECT_EQ(verify_built(b), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Form, BuiltBindingTest,
    testing::Values(
        BuiltCase{"UnusedFieldMustStayDefault",
                  [](Binding& b) { b.op = Op::kKillObject; b.vars = {"x"}; b.grid = {4}; },
                  "error: function 'f', binding 'kill_object(x)': kill_object does not take 'grid'; leave that field "
                  "at its default"},
        BuiltCase{"VariableOperandCount", [](Binding& b) { b.op = Op::kCopyTensor; b.vars = {"x"}; },
                  "error: function 'f', binding 'copy_tensor(x)': copy_tensor takes 2 variable operands, got 1"},
        BuiltCase{"ResultMissing", [](Binding& b) { b.op = Op::kEmpty; b.shape = {4}; b.scope = "global"; },
                  "error: function 'f', binding 'empty([4], uint8, scope=\"global\")': empty produces a value but "
                  "binds no variable"},
        BuiltCase{"ResultNotAllowed", [](Binding& b) { b.result = "y"; b.op = Op::kKillObject; b.vars = {"x"}; },
                  "error: function 'f', binding 'y = kill_object(x)': kill_object produces no value to bind to 'y'"},
        BuiltCase{"ResultNameMustBeValid",
                  [](Binding& b) { b.result = "a b"; b.op = Op::kEmpty; b.shape = {4}; b.scope = "global"; },
                  "error: function 'f', binding 'a b = empty([4], uint8, scope=\"global\")': 'a b' is not a valid "
                  "variable name"}),
    [](const testing::TestParamInfo<BuiltCase>& info) { return info.param.name; });

// The example with one kill_object removed (the table has the same rule in a small program).
TEST(VerifierTest, LiveTensorsOverlapInTheExample) {
  std::string text = read_example();
  std::string kill_a = "  kill_object(a)\n";
  text.erase(text.find(kill_a), kill_a.size());
  EXPECT_EQ(verify_example(text),
            "add_mul.stir:22:3: error: function 'main', binding 'd = alloc_tensor(vtcm, 0, [4, 64], int32)': tensor "
            "'d' (bytes [0, 1024)) overlaps live tensor 'a' (bytes [0, 1024)) in storage 'vtcm'");
}

// compile_text names the file in every error at a line:col, as the parser does:
// verifier and kernel errors too.
TEST(VerifierTest, CompileTextNamesTheFileInEveryError) {
  const std::string kernels = "kernels k \"\"\"\n__kernel void f(__global int* a) { a[0] = 1; }\n\"\"\"\n";
  auto verify_failure = compile_text(kernels + "fn main(x: Tensor[(4,), int32]) -> Tensor[(4,), int32] {\n"
                                               "  kill_object(x)\n  return x\n}\n",
                                     "prog.stir", opencl());
  ASSERT_FALSE(verify_failure);
  EXPECT_EQ(verify_failure.error().message(),
            "prog.stir:6:3: error: function 'main', 'return x': 'x' was killed at 5:3");
  auto kernel_failure = compile_text("kernels k \"\"\"\n__kernel void f(__global int* a) { a[0] = q; }\n\"\"\"\n",
                                     "prog.stir", opencl());
  ASSERT_FALSE(kernel_failure);
  EXPECT_EQ(kernel_failure.error().message(),
            "prog.stir:2:43: error: in kernel unit 'k' (1:43): use of undeclared identifier 'q'");
}

}  // namespace
}  // namespace stowage::ir
