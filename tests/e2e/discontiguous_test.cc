// Discontiguous tensors end to end on the default device: the Relax proposal's two
// programs (examples/discontiguous/) from the text form and from the C++ builder,
// the tables the VM writes, copies in every direction, repeated invocations, and
// the bytecode round trip.
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "stowage/ir/builder.h"
#include "source_files.h"
#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/bytecode/file.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

using testing::read_source_file;

const TargetDesc& target() {
  static const TargetDesc t = TargetDesc::load("opencl").value_or_throw();
  return t;
}

Executable compile_module(ir::Module module) {
  auto compiled = ir::compile_module(std::move(module), target());
  if (!compiled) throw StowageError(compiled.error());
  return compiled->executable;
}

Executable compile_text(const std::string& text) {
  auto compiled = ir::compile_text(text, "test.stir", target());
  if (!compiled) throw StowageError(compiled.error());
  return compiled->executable;
}

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUInt32;
  return DType::kFloat32;
}

template <typename T>
vm::Value host(std::vector<int64_t> shape, const std::vector<T>& data) {
  return vm::Value::from(vm::host_tensor(std::move(shape), dtype_of<T>(), std::as_bytes(std::span(data))));
}

template <typename T>
std::vector<T> run(const Executable& exe, const std::vector<vm::Value>& args) {
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  return machine->invoke("main", args).as_tensor().to_vector<T>();
}

std::vector<int32_t> iota_i32(size_t n, int32_t start, int32_t step) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<int32_t>(i) * step;
  return v;
}

// The proposal's rank-2 program: c = a + b over [4, 64] int32.
void check_rank2(const Executable& exe) {
  std::vector<int32_t> x = iota_i32(256, 0, 1), y = iota_i32(256, -100, 7), expected(256);
  for (size_t i = 0; i < 256; ++i) expected[i] = x[i] + y[i];
  EXPECT_EQ(run<int32_t>(exe, {host({4, 64}, x), host({4, 64}, y)}), expected);
}

// The proposal's rank-3 program: the int16 [4, 2, 16] tensor doubled in place.
void check_rank3(const Executable& exe) {
  std::vector<int16_t> x(128), expected(128);
  for (size_t i = 0; i < 128; ++i) {
    x[i] = static_cast<int16_t>(static_cast<int>(i) * 37 - 2000);
    expected[i] = static_cast<int16_t>(x[i] * 2);
  }
  EXPECT_EQ(run<int16_t>(exe, {host({4, 2, 16}, x)}), expected);
}

TEST(DiscontiguousExample, Rank2FromTextMatchesTheHost) {
  check_rank2(compile_text(read_source_file("examples/discontiguous/rank2.stir")));
}

TEST(DiscontiguousExample, Rank3FromTextMatchesTheHost) {
  check_rank3(compile_text(read_source_file("examples/discontiguous/rank3.stir")));
}

// The kernel units of an example, so the builder's module can equal the parsed one.
std::string example_kernels(const std::string& file) {
  auto parsed = ir::parse_module(read_source_file("examples/discontiguous/" + file), file).value_or_throw();
  return parsed.units.at(0).source;
}

ir::Module parsed_example(const std::string& file) {
  return ir::parse_module(read_source_file("examples/discontiguous/" + file), file).value_or_throw();
}

TEST(DiscontiguousExample, Rank2FromTheCppBuilderEqualsTheTextAndMatchesTheHost) {
  ir::ModuleBuilder mb;
  mb.add_kernels("vtcm_ops", example_kernels("rank2.stir"));
  ir::FunctionBuilder fb = mb.function("main");
  auto type = ir::Type::tensor({4, 64}, DType::kInt32);
  std::string x = fb.param("x", type), y = fb.param("y", type);
  std::string tables = fb.alloc_storage({48}, 0, DType::kUInt8, "global", "tables");
  std::string vtcm = fb.alloc_storage({4096}, 0, DType::kUInt8, "global.vtcm", "vtcm");
  std::string a = fb.alloc_discontiguous_tensor(tables, {0}, vtcm, {768, 256, 2304, 3072}, {4, 64}, DType::kInt32, "a");
  fb.copy_tensor(x, a);
  std::string b =
      fb.alloc_discontiguous_tensor(tables, {16}, vtcm, {1536, 1280, 3328, 2560}, {4, 64}, DType::kInt32, "b");
  fb.copy_tensor(y, b);
  std::string c = fb.alloc_discontiguous_tensor(tables, {32}, vtcm, {512, 0, 2048, 3840}, {4, 64}, DType::kInt32, "c");
  fb.call_kernel("compute_add_in_vtcm", {ir::Arg::variable(a), ir::Arg::variable(b), ir::Arg::variable(c)}, {4, 64});
  fb.kill_object(a);
  fb.kill_object(b);
  std::string out = fb.alloc_storage({1024}, 0, DType::kUInt8, "global", "out");
  std::string result = fb.alloc_tensor(out, 0, {4, 64}, DType::kInt32, "result");
  fb.copy_tensor(c, result);
  mb.add_function(fb.ret(result));
  ir::Module module = mb.module();
  EXPECT_EQ(module, parsed_example("rank2.stir"));
  check_rank2(compile_module(std::move(module)));
}

TEST(DiscontiguousExample, Rank3FromTheCppBuilderEqualsTheTextAndMatchesTheHost) {
  ir::ModuleBuilder mb;
  mb.add_kernels("blocks3", example_kernels("rank3.stir"));
  ir::FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", ir::Type::tensor({4, 2, 16}, DType::kInt16));
  std::string tables = fb.alloc_storage({48}, 0, DType::kUInt8, "global", "tables");
  std::string vtcm = fb.alloc_storage({256}, 0, DType::kUInt8, "global.vtcm", "vtcm");
  std::string d = fb.alloc_discontiguous_tensor(tables, {0, 16, 24, 32, 40}, vtcm, {224, 0, 96, 32, 192, 64, 160, 128},
                                                {4, 2, 16}, DType::kInt16, "d");
  fb.copy_tensor(x, d);
  fb.call_kernel("double_in_place", {ir::Arg::variable(d)}, {4, 2, 16});
  std::string out = fb.alloc_storage({256}, 0, DType::kUInt8, "global", "out");
  std::string result = fb.alloc_tensor(out, 0, {4, 2, 16}, DType::kInt16, "result");
  fb.copy_tensor(d, result);
  mb.add_function(fb.ret(result));
  ir::Module module = mb.module();
  EXPECT_EQ(module, parsed_example("rank3.stir"));
  check_rank3(compile_module(std::move(module)));
}

TEST(DiscontiguousExample, BytecodeRoundTripDeclaresVersion1Point1AndRuns) {
  Executable exe = compile_text(read_source_file("examples/discontiguous/rank3.stir"));
  EXPECT_EQ(write_bytecode(exe)[10], 3);  // minor version: its memory layout section needs 1.3
  exe.memory_layouts.clear();
  exe.minor_version = exe.required_minor_version();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(file[10] | (file[11] << 8), 1);  // without it, the opcode needs 1.1
  Executable back = read_bytecode(file).value_or_throw();
  EXPECT_EQ(back, exe);
  check_rank3(back);
}

// A kernel that copies the table storage out shows what the VM wrote there.
constexpr const char* kDumpTables = R"(
kernels dump """
#include <stowage/discontiguous.cl.h>
__kernel void dump(STOWAGE_DISCONTIGUOUS_CONST(short, d), __global uint* out) {
  size_t i = get_global_id(0);
  out[i] = d_tables[i];
  if (i == 0) out[12] = d_root;
}
"""
fn main(x: Tensor[(4, 2, 16), int16]) -> Tensor[(13,), uint32] {
  tables = alloc_storage([48], device=0, dtype=uint8, scope="global")
  vtcm = alloc_storage([256], device=0, dtype=uint8, scope="global.vtcm")
  d = alloc_discontiguous_tensor(tables, [0, 16, 24, 32, 40], vtcm, [224, 0, 96, 32, 192, 64, 160, 128], [4, 2, 16], int16)
  out = alloc_storage([52], device=0, dtype=uint8, scope="global")
  o = alloc_tensor(out, 0, [13], uint32)
  call_kernel(dump, [d, o], grid=[12])
  return o
}
)";

TEST(DiscontiguousVm, WritesTablesBreadthFirstAsByteOffsets) {
  std::vector<int16_t> x(128, 0);
  std::vector<uint32_t> got = run<uint32_t>(compile_text(kDumpTables), {host({4, 2, 16}, x)});
  // Root: the byte offsets of the four level-1 tables; then each level-1 table's two
  // block offsets; the last value is the root offset the kernel received.
  std::vector<uint32_t> expected = {16, 24, 32, 40, 224, 0, 96, 32, 192, 64, 160, 128, 0};
  EXPECT_EQ(got, expected);
}

// Host -> device buffer -> discontiguous -> another discontiguous (other offsets,
// same storage) -> device buffer -> host, and the same machine invoked again.
constexpr const char* kCopies = R"(
fn main(x: Tensor[(8, 32), float32]) -> Tensor[(8, 32), float32] {
  g = alloc_storage([2048], device=0, dtype=uint8, scope="global")
  t = alloc_tensor(g, 0, [8, 32], float32)
  copy_tensor(x, t)
  tables = alloc_storage([64], device=0, dtype=uint8, scope="global")
  vtcm = alloc_storage([2048], device=0, dtype=uint8, scope="global.vtcm")
  d = alloc_discontiguous_tensor(tables, 0, vtcm, [896, 0, 128, 384, 256, 640, 512, 768], [8, 32], float32)
  copy_tensor(t, d)
  e = alloc_discontiguous_tensor(tables, 32, vtcm, [1024, 1152, 1280, 1408, 1536, 1664, 1920, 1792], [8, 32], float32)
  copy_tensor(d, e)
  r = alloc_tensor(g, 1024, [8, 32], float32)
  copy_tensor(e, r)
  return r
}
)";

TEST(DiscontiguousVm, CopiesInEveryDirectionAndAgainOnASecondInvoke) {
  auto machine =
      vm::VirtualMachine::create(std::make_shared<const Executable>(compile_text(kCopies))).value_or_throw();
  for (int round = 0; round < 2; ++round) {
    std::vector<float> x(256);
    std::iota(x.begin(), x.end(), static_cast<float>(round * 1000));
    EXPECT_EQ(machine->invoke("main", {host({8, 32}, x)}).as_tensor().to_vector<float>(), x) << "round " << round;
  }
}

TEST(DiscontiguousVm, SecondInvokeOfTheExampleMakesNoDeviceAllocation) {
  auto exe = std::make_shared<const Executable>(compile_text(read_source_file("examples/discontiguous/rank2.stir")));
  auto machine = vm::VirtualMachine::create(exe).value_or_throw();
  std::vector<int32_t> x = iota_i32(256, 5, 3), y = iota_i32(256, 9, -2), expected(256);
  for (size_t i = 0; i < 256; ++i) expected[i] = x[i] + y[i];
  EXPECT_EQ(machine->invoke("main", {host({4, 64}, x), host({4, 64}, y)}).as_tensor().to_vector<int32_t>(), expected);
  uint64_t allocations = machine->profile().device_allocations;
  EXPECT_EQ(machine->invoke("main", {host({4, 64}, x), host({4, 64}, y)}).as_tensor().to_vector<int32_t>(), expected);
  EXPECT_EQ(machine->profile().device_allocations, allocations);
}

// Planned: contiguous tensors and discontiguous ones whose blocks the planner puts
// into the space the others leave, in one on-chip storage. r = 2 * (x + y).
constexpr const char* kPlanned = R"(
kernels ops """
#include <stowage/discontiguous.cl.h>
__kernel void add(__global const float* a, __global const float* b, __global float* c) {
  size_t i = get_global_id(0) * 64 + get_global_id(1);
  c[i] = a[i] + b[i];
}
__kernel void add_blocks(STOWAGE_DISCONTIGUOUS_CONST(float, a), STOWAGE_DISCONTIGUOUS_CONST(float, b),
                         STOWAGE_DISCONTIGUOUS(float, c)) {
  size_t i = get_global_id(0), j = get_global_id(1);
  *STOWAGE_AT2(float, c, i, j) = *STOWAGE_AT2(float, a, i, j) + *STOWAGE_AT2(float, b, i, j);
}
"""
fn main(x: Tensor[(16, 64), float32], y: Tensor[(16, 64), float32]) -> Tensor[(16, 64), float32] {
  p = empty([16, 64], float32, scope="global.vtcm")
  copy_tensor(x, p)
  q = empty([16, 64], float32, scope="global.vtcm")
  copy_tensor(y, q)
  s = empty([16, 64], float32, scope="global.vtcm")
  call_kernel(add, [p, q, s], grid=[16, 64])
  d = empty_discontiguous([16, 64], float32, scope="global.vtcm", table_scope="global")
  copy_tensor(s, d)
  e = empty_discontiguous([16, 64], float32, scope="global.vtcm", table_scope="global")
  call_kernel(add_blocks, [d, d, e], grid=[16, 64])
  r = empty([16, 64], float32)
  copy_tensor(e, r)
  return r
}
)";

TEST(DiscontiguousPlanned, PlannedBlocksRunAndMatchTheHost) {
  auto compiled = ir::compile_text(kPlanned, "planned.stir", target());
  ASSERT_TRUE(compiled) << compiled.error().message();
  // Every tensor of the on-chip scope lives in one storage no larger than the bound.
  bool found = false;
  for (const auto& scope : compiled->memory.scopes) {
    if (scope.scope != "global.vtcm") continue;
    found = true;
    EXPECT_EQ(scope.planned_bytes, scope.lower_bound);
  }
  EXPECT_TRUE(found);
  std::vector<float> x(1024), y(1024), expected(1024);
  for (size_t i = 0; i < 1024; ++i) {
    x[i] = static_cast<float>(i) * 0.5f;
    y[i] = 100.0f - static_cast<float>(i);
    expected[i] = 2 * (x[i] + y[i]);
  }
  EXPECT_EQ(run<float>(compiled->executable, {host({16, 64}, x), host({16, 64}, y)}), expected);
}

}  // namespace
}  // namespace stowage
