#include "stowage/ir/builder.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "e2e/source_files.h"
#include "stowage/ir/printer.h"
#include "stowage/support/error.h"

namespace stowage::ir {
namespace {

// examples/kernels/add_mul.cl, after a blank line as this test always had it.
const std::string kVtcmOpsSource = "\n" + testing::read_source_file("examples/kernels/add_mul.cl");

const Type kT = Type::tensor({4, 64}, DType::kInt32);

// The message of the StowageError `action` must throw, checking its kind.
std::string error_of(const std::function<void()>& action, ErrorKind kind = ErrorKind::kVerify) {
  try {
    action();
  } catch (const StowageError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error was thrown";
  return "";
}

std::vector<Arg> vars(std::initializer_list<const char*> names) {
  std::vector<Arg> args;
  for (const char* name : names) args.push_back(Arg::variable(name));
  return args;
}

// ---- the add_mul example, built both ways -----------------------------------

Binding binding(Op op, std::string result = "") {
  Binding b;
  b.op = op;
  b.result = std::move(result);
  return b;
}

Binding alloc_tensor_binding(std::string result, std::string storage, int64_t offset) {
  Binding b = binding(Op::kAllocTensor, std::move(result));
  b.vars = {std::move(storage)};
  b.offset = offset;
  b.shape = {4, 64};
  b.dtype = DType::kInt32;
  return b;
}

Binding var_binding(Op op, std::vector<std::string> operands) {
  Binding b = binding(op);
  b.vars = std::move(operands);
  return b;
}

Binding kernel_binding(std::string kernel, std::vector<Arg> args) {
  Binding b = binding(Op::kCallKernel);
  b.callee = std::move(kernel);
  b.args = std::move(args);
  b.grid = {256};
  return b;
}

Module hand_built_add_mul() {
  Module m;
  KernelSourceUnit unit;
  unit.name = "vtcm_ops";
  unit.source = kVtcmOpsSource;
  m.units.push_back(unit);

  Function f;
  f.name = "main";
  f.params = {{"x", kT, {}}, {"y", kT, {}}, {"z", kT, {}}};
  f.ret_type = kT;
  f.returns = {"e"};
  Binding vtcm = binding(Op::kAllocStorage, "vtcm");
  vtcm.shape = {4096};
  vtcm.device = 0;
  vtcm.dtype = DType::kUInt8;
  vtcm.scope = "global.vtcm";
  f.bindings = {vtcm,
                alloc_tensor_binding("a", "vtcm", 0),
                var_binding(Op::kCopyTensor, {"x", "a"}),
                alloc_tensor_binding("b", "vtcm", 1024),
                var_binding(Op::kCopyTensor, {"y", "b"}),
                alloc_tensor_binding("c", "vtcm", 2048),
                kernel_binding("compute_add_in_vtcm", vars({"a", "b", "c"})),
                var_binding(Op::kKillObject, {"a"}),
                var_binding(Op::kKillObject, {"b"}),
                alloc_tensor_binding("d", "vtcm", 0),
                var_binding(Op::kCopyTensor, {"z", "d"}),
                alloc_tensor_binding("e", "vtcm", 1024),
                kernel_binding("compute_mul_in_vtcm", vars({"c", "d", "e"}))};
  m.functions.push_back(f);
  return m;
}

ModuleBuilder built_add_mul() {
  ModuleBuilder mb;
  mb.add_kernels("vtcm_ops", kVtcmOpsSource);
  FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", kT);
  std::string y = fb.param("y", kT);
  std::string z = fb.param("z", kT);
  std::string vtcm = fb.alloc_storage({4096}, 0, DType::kUInt8, "global.vtcm", "vtcm");
  std::string a = fb.alloc_tensor(vtcm, 0, {4, 64}, DType::kInt32, "a");
  fb.copy_tensor(x, a);
  std::string b = fb.alloc_tensor(vtcm, 1024, {4, 64}, DType::kInt32, "b");
  fb.copy_tensor(y, b);
  std::string c = fb.alloc_tensor(vtcm, 2048, {4, 64}, DType::kInt32, "c");
  fb.call_kernel("compute_add_in_vtcm", vars({"a", "b", "c"}), {256});
  fb.kill_object(a);
  fb.kill_object(b);
  std::string d = fb.alloc_tensor(vtcm, 0, {4, 64}, DType::kInt32, "d");
  fb.copy_tensor(z, d);
  std::string e = fb.alloc_tensor(vtcm, 1024, {4, 64}, DType::kInt32, "e");
  fb.call_kernel("compute_mul_in_vtcm", vars({"c", "d", "e"}), {256});
  mb.add_function(fb.ret(e));
  return mb;
}

TEST(Builder, BuildsTheAddMulExample) {
  Module built = built_add_mul().module();
  EXPECT_EQ(built, hand_built_add_mul());
  // The kernels were read when the unit was added.
  ASSERT_EQ(built.units[0].signatures.size(), 2u);
  const KernelSignature* add = built.find_kernel("compute_add_in_vtcm");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->params.size(), 3u);
  EXPECT_TRUE(add->params[2].writes());
}

TEST(Builder, ModuleComparisonSeesADifference) {
  Module built = built_add_mul().module();
  Module other = hand_built_add_mul();
  other.functions[0].bindings[3].offset = 512;
  EXPECT_NE(built, other);
}

// ---- results and names -------------------------------------------------------

TEST(Builder, TypesOfResults) {
  ModuleBuilder mb;
  FunctionBuilder fb = mb.function("f");
  std::string n = fb.param("n", Type::of(Type::Kind::kInt));
  std::string s = fb.alloc_storage({64, 32}, 1, DType::kFloat16, "global.texture");
  std::string t = fb.alloc_tensor(s, 0, {2, 8, 4}, DType::kFloat16);
  std::string u = fb.empty({7}, DType::kFloat32);
  EXPECT_EQ(fb.type_of(n), Type::of(Type::Kind::kInt));
  EXPECT_EQ(fb.type_of(s), Type::of(Type::Kind::kStorage));
  EXPECT_EQ(fb.type_of(t), Type::tensor({2, 8, 4}, DType::kFloat16));
  EXPECT_EQ(fb.type_of(u), Type::tensor({7}, DType::kFloat32));
  Function f = fb.ret(u);
  EXPECT_EQ(f.returns, std::vector<std::string>{u});
  EXPECT_EQ(f.ret_type, Type::tensor({7}, DType::kFloat32));
  ASSERT_EQ(f.bindings.size(), 3u);
  EXPECT_EQ(f.bindings[2].op, Op::kEmpty);
  EXPECT_EQ(f.bindings[2].scope, "global");
  EXPECT_EQ(f.bindings[0].shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(f.bindings[0].device, 1);
}

TEST(Builder, FreshNamesSkipNamesInUse) {
  FunctionBuilder fb("f");
  EXPECT_EQ(fb.param("t1", kT), "t1");
  EXPECT_EQ(fb.empty({4, 64}, DType::kInt32), "t0");
  EXPECT_EQ(fb.empty({4, 64}, DType::kInt32), "t2");
  EXPECT_EQ(fb.empty({4, 64}, DType::kInt32, "global", "t3"), "t3");
  EXPECT_EQ(fb.empty({4, 64}, DType::kInt32), "t4");
  EXPECT_EQ(error_of([&] { fb.empty({1}, DType::kInt8, "global", "t0"); }), "empty: name 't0' is already defined");
}

TEST(Builder, NameRules) {
  FunctionBuilder fb("f");
  EXPECT_EQ(fb.param("x.1", kT), "x.1");
  EXPECT_EQ(fb.param("_y", kT), "_y");
  EXPECT_EQ(error_of([&] { fb.param("x.1", kT); }), "param: name 'x.1' is already defined");
  EXPECT_EQ(error_of([&] { fb.empty({1}, DType::kInt8, "global", "1x"); }),
            "empty: name '1x' is not a valid name (expected [A-Za-z_][A-Za-z0-9_.]*)");
  EXPECT_EQ(error_of([&] { fb.empty({1}, DType::kInt8, "global", "a-b"); }),
            "empty: name 'a-b' is not a valid name (expected [A-Za-z_][A-Za-z0-9_.]*)");
  EXPECT_EQ(error_of([&] { fb.empty({1}, DType::kInt8, "global", "return"); }),
            "empty: name 'return' is a reserved word");
  EXPECT_EQ(error_of([&] { fb.alloc_storage({8}, 0, DType::kUInt8, "global", "int32"); }),
            "alloc_storage: name 'int32' is a reserved word");
  EXPECT_EQ(error_of([] { FunctionBuilder bad("Tensor"); }), "function: name 'Tensor' is a reserved word");
}

// ---- misuse, op by op ---------------------------------------------------------

// A function with a tensor parameter x, a storage s and a tensor a in it.
struct Fixture {
  FunctionBuilder fb{"main"};
  std::string x = fb.param("x", kT);
  std::string s = fb.alloc_storage({4096}, 0, DType::kUInt8, "global", "s");
  std::string a = fb.alloc_tensor(s, 0, {4, 64}, DType::kInt32, "a");
};

TEST(Builder, AllocTensorMisuse) {
  Fixture f;
  EXPECT_EQ(error_of([&] { f.fb.alloc_tensor("x", 0, {4}, DType::kInt32); }),
            "alloc_tensor: argument 'storage': 'x' is a Tensor, not a Storage");
  EXPECT_EQ(error_of([&] { f.fb.alloc_tensor("nope", 0, {4}, DType::kInt32); }),
            "alloc_tensor: argument 'storage': 'nope' is not defined");
  EXPECT_EQ(error_of([&] { f.fb.alloc_tensor("s", -8, {4}, DType::kInt32); }),
            "alloc_tensor: argument 'offset': -8 is negative");
  EXPECT_EQ(error_of([&] { f.fb.alloc_tensor("s", 0, {4, -1}, DType::kInt32); }),
            "alloc_tensor: argument 'shape': extent 1 is -1; extents must not be negative");
  EXPECT_EQ(error_of([&] { f.fb.alloc_tensor("s", 0, {4}, DType::kInt32, "a"); }),
            "alloc_tensor: name 'a' is already defined");
  f.fb.kill_object("s");
  EXPECT_EQ(error_of([&] { f.fb.alloc_tensor("s", 0, {4}, DType::kInt32); }),
            "alloc_tensor: argument 'storage': 's' was killed by kill_object");
}

// In an image storage a tensor is placed at a pixel: its ImageOffset, [y, x] in text.
TEST(Builder, AllocTensorAtAnImageOffset) {
  FunctionBuilder fb("main");
  std::string x = fb.param("x", kT);
  std::string img = fb.alloc_storage({8, 16}, 0, DType::kFloat32, "global.texture", "img");
  fb.alloc_tensor(img, ImageOffset{5, 2}, {2, 4, 4}, DType::kFloat32, "a");
  EXPECT_EQ(error_of([&] { fb.alloc_tensor(img, ImageOffset{uint64_t{1} << 31, 0}, {4}, DType::kFloat32); }),
            "alloc_tensor: argument 'offset': image offset [0, 2147483648] is out of range: row and column must be "
            "below 2^31");
  Function f = fb.ret(x);
  ASSERT_EQ(f.bindings.size(), 2u);
  EXPECT_EQ(f.bindings[1].image_offset, (ImageOffset{5, 2}));
  EXPECT_EQ(f.bindings[1].offset, 0);
  EXPECT_EQ(print_binding(f.bindings[1]), "a = alloc_tensor(img, [2, 5], [2, 4, 4], float32)");
}

TEST(Builder, AllocStorageMisuse) {
  Fixture f;
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({}, 0, DType::kUInt8, "global"); }),
            "alloc_storage: argument 'size': expected [nbytes] or [height, width], got 0 extents");
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({1, 2, 3}, 0, DType::kUInt8, "global"); }),
            "alloc_storage: argument 'size': expected [nbytes] or [height, width], got 3 extents");
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({-4}, 0, DType::kUInt8, "global"); }),
            "alloc_storage: argument 'size': extent 0 is -4; extents must not be negative");
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({4}, -1, DType::kUInt8, "global"); }),
            "alloc_storage: argument 'device': -1 is negative");
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({4}, 0, DType::kUInt8, ""); }),
            "alloc_storage: argument 'scope': '' is not a scope name (letters, digits, '_', '.', '-')");
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({4}, 0, DType::kUInt8, "glo\"bal"); }),
            "alloc_storage: argument 'scope': 'glo\"bal' is not a scope name (letters, digits, '_', '.', '-')");
  EXPECT_EQ(error_of([&] { f.fb.alloc_storage({4}, 0, DType::kUInt8, "global", "s"); }),
            "alloc_storage: name 's' is already defined");
}

TEST(Builder, EmptyMisuse) {
  Fixture f;
  EXPECT_EQ(error_of([&] { f.fb.empty({-2}, DType::kInt32); }),
            "empty: argument 'shape': extent 0 is -2; extents must not be negative");
  EXPECT_EQ(error_of([&] { f.fb.empty({2}, DType::kInt32, "global texture"); }),
            "empty: argument 'scope': 'global texture' is not a scope name (letters, digits, '_', '.', '-')");
}

TEST(Builder, KillObjectMisuse) {
  Fixture f;
  EXPECT_EQ(error_of([&] { f.fb.kill_object("q"); }), "kill_object: argument 'var': 'q' is not defined");
  f.fb.kill_object("a");
  EXPECT_EQ(error_of([&] { f.fb.kill_object("a"); }), "kill_object: argument 'var': 'a' was killed by kill_object");
  EXPECT_EQ(f.fb.type_of("a"), kT);  // a killed variable keeps its type
}

TEST(Builder, CopyTensorMisuse) {
  Fixture f;
  std::string small = f.fb.alloc_tensor(f.s, 1024, {4, 32}, DType::kInt32, "small");
  std::string floats = f.fb.alloc_tensor(f.s, 2048, {4, 64}, DType::kFloat32, "floats");
  std::string vec = f.fb.alloc_tensor(f.s, 3072, {4}, DType::kInt32, "vec");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor("x", small); }),
            "copy_tensor: 'x' is Tensor[(4, 64), int32] but 'small' is Tensor[(4, 32), int32]; shapes and dtypes "
            "must be equal");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor(floats, "a"); }),
            "copy_tensor: 'floats' is Tensor[(4, 64), float32] but 'a' is Tensor[(4, 64), int32]; shapes and "
            "dtypes must be equal");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor(vec, "a"); }),
            "copy_tensor: 'vec' is Tensor[(4,), int32] but 'a' is Tensor[(4, 64), int32]; shapes and dtypes must "
            "be equal");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor("x", "s"); }),
            "copy_tensor: argument 'dst': 's' is a Storage, not a Tensor");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor("x", "nope"); }), "copy_tensor: argument 'dst': 'nope' is not defined");
  f.fb.kill_object("a");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor("a", "x"); }),
            "copy_tensor: argument 'src': 'a' was killed by kill_object");
  EXPECT_EQ(error_of([&] { f.fb.copy_tensor("x", "a"); }),
            "copy_tensor: argument 'dst': 'a' was killed by kill_object");
}

TEST(Builder, CallKernelMisuse) {
  ModuleBuilder mb;
  mb.add_kernels("vtcm_ops", kVtcmOpsSource);
  FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", kT);
  std::string n = fb.param("n", Type::of(Type::Kind::kInt));
  std::string s = fb.alloc_storage({4096}, 0, DType::kUInt8, "global", "s");
  EXPECT_EQ(error_of([&] { fb.call_kernel("a.b", vars({"x"}), {256}); }),
            "call_kernel: argument 'kernel': 'a.b' is not a kernel name");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x", "s", "x"}), {256}); }),
            "call_kernel: argument 'args[1]': 's' is a Storage; kernels take tensors and scalars");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x", "x", "y"}), {256}); }),
            "call_kernel: argument 'args[2]': 'y' is not defined");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {}); }),
            "call_kernel: argument 'grid': expected 1 to 3 extents, got 0");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {1, 1, 1, 1}); }),
            "call_kernel: argument 'grid': expected 1 to 3 extents, got 4");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {16, 0}); }),
            "call_kernel: argument 'grid': extent 1 is 0; extents must be positive");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {16, 16}, {4}); }),
            "call_kernel: argument 'local': expected 2 extents like 'grid', got 1");
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {16}, {-4}); }),
            "call_kernel: argument 'local': extent 0 is -4; extents must be positive");
  // Scalars, literals and a local size are accepted; signatures are the verifier's.
  fb.call_kernel("compute_add_in_vtcm", {Arg::variable(x), Arg::variable(n), Arg::integer(3), Arg::floating(0.5)},
                 {256}, {64});
  fb.kill_object(x);
  EXPECT_EQ(error_of([&] { fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {256}); }),
            "call_kernel: argument 'args[0]': 'x' was killed by kill_object");
  Function f = fb.ret(n);
  EXPECT_EQ(f.bindings[1].op, Op::kCallKernel);
  EXPECT_EQ(f.bindings[1].local, (std::vector<int64_t>{64}));
  EXPECT_EQ(f.bindings[1].args.size(), 4u);
}

TEST(Builder, StandaloneBuilderKnowsNoModule) {
  // Without a module, kernel names are only checked to be names.
  FunctionBuilder fb("f");
  fb.param("x", kT);
  fb.call_kernel("any_kernel", vars({"x"}), {4});
  EXPECT_EQ(error_of([&] { fb.call("g", {}); }), "call: argument 'function': no function 'g' in the module");
}

ModuleBuilder module_with_helper() {
  ModuleBuilder mb;
  FunctionBuilder helper = mb.function("helper");
  helper.param("t", kT);
  helper.param("k", Type::of(Type::Kind::kInt));
  helper.param("w", Type::of(Type::Kind::kFloat));
  std::string out = helper.empty({8}, DType::kFloat32, "global", "out");
  mb.add_function(helper.ret(out));
  return mb;
}

TEST(Builder, CallTakesTheCalleesReturnType) {
  ModuleBuilder mb = module_with_helper();
  FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", kT);
  std::string r = fb.call("helper", {Arg::variable(x), Arg::integer(2), Arg::floating(1.5)});
  EXPECT_EQ(r, "t0");
  EXPECT_EQ(fb.type_of(r), Type::tensor({8}, DType::kFloat32));
  mb.add_function(fb.ret(r));
  Module m = mb.module();
  ASSERT_EQ(m.functions.size(), 2u);
  const Binding& call = m.functions[1].bindings[0];
  EXPECT_EQ(call.op, Op::kCall);
  EXPECT_EQ(call.callee, "helper");
  EXPECT_EQ(call.result, "t0");
  EXPECT_EQ(call.args.size(), 3u);
}

TEST(Builder, CallMisuse) {
  ModuleBuilder mb = module_with_helper();
  FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", kT);
  std::string k = fb.param("k", Type::of(Type::Kind::kInt));
  EXPECT_EQ(error_of([&] { fb.call("nope", vars({"x"})); }),
            "call: argument 'function': no function 'nope' in the module");
  EXPECT_EQ(error_of([&] { fb.call("helper", vars({"x"})); }), "call: function 'helper' takes 3 arguments, got 1");
  EXPECT_EQ(error_of([&] { fb.call("helper", {Arg::variable(k), Arg::integer(1), Arg::floating(1)}); }),
            "call: argument 'args[0]': 'k' is int but parameter 't' of 'helper' is Tensor[(4, 64), int32]");
  EXPECT_EQ(error_of([&] { fb.call("helper", {Arg::variable(x), Arg::floating(1), Arg::floating(1)}); }),
            "call: argument 'args[1]': a float literal but parameter 'k' of 'helper' is int");
  EXPECT_EQ(error_of([&] { fb.call("helper", {Arg::variable(x), Arg::integer(1), Arg::integer(1)}); }),
            "call: argument 'args[2]': an int literal but parameter 'w' of 'helper' is float");
  EXPECT_EQ(error_of([&] { fb.call("helper", {Arg::variable(x), Arg::variable(x), Arg::floating(1)}); }),
            "call: argument 'args[1]': 'x' is Tensor[(4, 64), int32] but parameter 'k' of 'helper' is int");
  EXPECT_EQ(error_of([&] { fb.call("helper", {Arg::variable(x), Arg::integer(1), Arg::floating(1)}, "x"); }),
            "call: name 'x' is already defined");
  fb.kill_object(x);
  EXPECT_EQ(error_of([&] { fb.call("helper", {Arg::variable(x), Arg::integer(1), Arg::floating(1)}); }),
            "call: argument 'args[0]': 'x' was killed by kill_object");
}

TEST(Builder, ParamsComeFirst) {
  FunctionBuilder fb("f");
  EXPECT_EQ(error_of([&] { fb.param("x", Type::tensor({3, -1}, DType::kInt8)); }),
            "param: argument 'type': extent 1 is -1; extents must not be negative");
  fb.empty({1}, DType::kInt8);
  EXPECT_EQ(error_of([&] { fb.param("x", kT); }), "param: parameters must come before the first binding");
}

TEST(Builder, RetFinishesTheFunction) {
  Fixture f;
  EXPECT_EQ(error_of([&] { f.fb.ret("nope"); }), "ret: argument 'var': 'nope' is not defined");
  f.fb.kill_object("a");
  EXPECT_EQ(error_of([&] { f.fb.ret("a"); }), "ret: argument 'var': 'a' was killed by kill_object");
  Function fn = f.fb.ret("x");
  EXPECT_EQ(fn.ret_type, kT);
  EXPECT_EQ(error_of([&] { f.fb.empty({1}, DType::kInt8); }), "empty: function 'main' was already finished by ret");
  EXPECT_EQ(error_of([&] { f.fb.ret("x"); }), "ret: function 'main' was already finished by ret");
}

TEST(Builder, RetOfSeveralReturnsATupleOfTensors) {
  Fixture f;
  std::string b = f.fb.empty({8}, DType::kInt64, "global", "b");
  Function fn = f.fb.ret(std::vector<std::string>{f.a, b, f.x});
  EXPECT_TRUE(fn.returns_tuple);
  EXPECT_EQ(fn.returns, (std::vector<std::string>{"a", "b", "x"}));
  Type tuple = Type::of(Type::Kind::kTuple);
  tuple.fields = {kT, Type::tensor({8}, DType::kInt64), kT};
  EXPECT_EQ(fn.ret_type, tuple);
  EXPECT_EQ(error_of([&] { f.fb.ret(std::vector<std::string>{"a"}); }),
            "ret: function 'main' was already finished by ret");

  // One name in a vector is a tuple of one; the single form stays as it was.
  Fixture one;
  Function single_field = one.fb.ret(std::vector<std::string>{"a"});
  EXPECT_TRUE(single_field.returns_tuple);
  Type of_one = Type::of(Type::Kind::kTuple);
  of_one.fields = {kT};
  EXPECT_EQ(single_field.ret_type, of_one);
  Fixture plain;
  Function single = plain.fb.ret("a");
  EXPECT_FALSE(single.returns_tuple);
  EXPECT_EQ(single.returns, (std::vector<std::string>{"a"}));
  EXPECT_EQ(single.ret_type, kT);
}

TEST(Builder, RetTupleMisuse) {
  Fixture f;
  EXPECT_EQ(error_of([&] { f.fb.ret(std::vector<std::string>{}); }),
            "ret: argument 'vars': a returned tuple needs at least one variable");
  EXPECT_EQ(error_of([&] { f.fb.ret(std::vector<std::string>{"a", "nope"}); }),
            "ret: argument 'vars[1]': 'nope' is not defined");
  EXPECT_EQ(error_of([&] { f.fb.ret(std::vector<std::string>{"a", "s"}); }),
            "ret: argument 'vars[1]': 's' is a Storage, not a Tensor");
  EXPECT_EQ(error_of([&] { f.fb.ret(std::vector<std::string>{"a", "x", "a"}); }),
            "ret: argument 'vars[2]': 'a' is returned twice (vars[0] too); return a copy of it");
  f.fb.kill_object("a");
  EXPECT_EQ(error_of([&] { f.fb.ret(std::vector<std::string>{"x", "a"}); }),
            "ret: argument 'vars[1]': 'a' was killed by kill_object");
  // A failed ret leaves the function open.
  Function fn = f.fb.ret(std::vector<std::string>{"x"});
  EXPECT_EQ(fn.returns, (std::vector<std::string>{"x"}));
}

TEST(Builder, TypeOfUnknown) {
  FunctionBuilder fb("f");
  EXPECT_EQ(error_of([&] { fb.type_of("q"); }), "type_of: 'q' is not defined");
}

TEST(Builder, FailedOpRecordsNothing) {
  Fixture f;
  std::string small = f.fb.alloc_tensor(f.s, 1024, {4}, DType::kInt32, "small");
  error_of([&] { f.fb.copy_tensor("x", small); });
  error_of([&] { f.fb.alloc_tensor("x", 0, {4}, DType::kInt32, "never"); });
  error_of([&] { f.fb.call_kernel("k", vars({"x", "s"}), {4}); });
  EXPECT_EQ(error_of([&] { f.fb.type_of("never"); }), "type_of: 'never' is not defined");
  Function fn = f.fb.ret("x");
  EXPECT_EQ(fn.bindings.size(), 3u);  // s, a, small
}

// ---- the module builder -------------------------------------------------------

TEST(Builder, AddKernelsMisuse) {
  ModuleBuilder mb;
  mb.add_kernels("vtcm_ops", kVtcmOpsSource);
  EXPECT_EQ(error_of([&] { mb.add_kernels("vtcm_ops", "kernel void other() {}"); }),
            "add_kernels: kernel unit 'vtcm_ops' is already in the module");
  EXPECT_EQ(error_of([&] { mb.add_kernels("more", "kernel void compute_mul_in_vtcm(__global int* a) {}"); }),
            "add_kernels: kernel unit 'more': kernel 'compute_mul_in_vtcm' is already defined in kernel unit "
            "'vtcm_ops'");
  EXPECT_EQ(error_of([&] { mb.add_kernels("quoted", "// \"\"\"\nkernel void q() {}"); }),
            "add_kernels: kernel unit 'quoted': the source contains \"\"\", which the text form cannot hold");
  EXPECT_EQ(error_of([&] { mb.add_kernels("bad", "kernel void b() { oops }"); }, ErrorKind::kInvalidInput),
            "add_kernels: kernel unit 'bad' 1:19: error: use of undeclared identifier 'oops'");
  EXPECT_EQ(error_of([&] { mb.add_kernels("9units", ""); }),
            "add_kernels: name '9units' is not a valid name (expected [A-Za-z_][A-Za-z0-9_.]*)");
  Module m = mb.module();
  ASSERT_EQ(m.units.size(), 1u);  // the failed units were not added
  mb.add_kernels("more", "kernel void other(float s) {}");
  m = mb.module();
  ASSERT_EQ(m.units.size(), 2u);
  ASSERT_NE(m.find_kernel("other"), nullptr);
  EXPECT_EQ(m.find_kernel("other")->unit, 1u);
}

TEST(Builder, AddFunctionMisuse) {
  ModuleBuilder mb = module_with_helper();
  EXPECT_EQ(error_of([&] { mb.function("helper"); }), "function: function 'helper' is already in the module");
  EXPECT_EQ(error_of([&] { mb.function("fn"); }), "function: name 'fn' is a reserved word");
  FunctionBuilder again("helper");
  std::string x = again.param("x", kT);
  Function dup = again.ret(x);
  EXPECT_EQ(error_of([&] { mb.add_function(dup); }), "add_function: function 'helper' is already in the module");
  Function unfinished;
  unfinished.name = "g";
  EXPECT_EQ(error_of([&] { mb.add_function(unfinished); }),
            "add_function: function 'g' has no return; finish it with ret");
  unfinished.name = "bad name";
  EXPECT_EQ(error_of([&] { mb.add_function(unfinished); }),
            "add_function: name 'bad name' is not a valid name (expected [A-Za-z_][A-Za-z0-9_.]*)");
}

TEST(Builder, FunctionBuildersSeeLaterAdditions) {
  ModuleBuilder mb;
  FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", kT);
  // Kernels may come after the functions that call them, as in a Python script.
  fb.call_kernel("compute_add_in_vtcm", vars({"x"}), {4});
  fb.call_kernel("no_such_kernel", vars({"x"}), {4});
  mb.add_function(fb.ret(x));
  EXPECT_EQ(error_of([&] { mb.module(); }),
            "module: function 'main' calls kernel 'compute_add_in_vtcm', which no kernel unit defines (add it with "
            "add_kernels)");
  mb.add_kernels("vtcm_ops", kVtcmOpsSource);
  EXPECT_EQ(error_of([&] { mb.module(); }),
            "module: function 'main' calls kernel 'no_such_kernel', which no kernel unit defines (add it with "
            "add_kernels)");
}

TEST(Builder, ModuleBuilderCopiesAreIndependent) {
  ModuleBuilder first = module_with_helper();
  ModuleBuilder second = first;
  second.add_kernels("vtcm_ops", kVtcmOpsSource);
  EXPECT_TRUE(first.module().units.empty());
  EXPECT_EQ(second.module().units.size(), 1u);
  EXPECT_EQ(second.module().functions, first.module().functions);
}

}  // namespace
}  // namespace stowage::ir
