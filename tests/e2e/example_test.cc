// The example programs from text to results: compile, write and read the bytecode
// file, run on the default OpenCL device, compare with values computed on the host.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/bytecode/file.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ir::CompileResult compile_example(const std::string& name) {
  auto target = TargetDesc::load("opencl").value_or_throw();
  std::string path = std::string(STOWAGE_SOURCE_DIR) + "/examples/" + name;
  return ir::compile_text(read_text(path), name, target).value_or_throw();
}

vm::Value int_input(int seed) {
  std::vector<int32_t> v(256);
  for (int i = 0; i < 256; ++i) v[i] = (i * 37 + seed * 11) % 201 - 100;
  return vm::Value::from(vm::host_tensor({4, 64}, DType::kInt32, std::as_bytes(std::span(v))));
}

std::vector<int32_t> host_add_mul(const vm::Value& x, const vm::Value& y, const vm::Value& z) {
  auto xs = x.as_tensor().to_vector<int32_t>();
  auto ys = y.as_tensor().to_vector<int32_t>();
  auto zs = z.as_tensor().to_vector<int32_t>();
  std::vector<int32_t> out(256);
  for (int i = 0; i < 256; ++i) out[i] = (xs[i] + ys[i]) * zs[i];
  return out;
}

// The text form holds kernels inline (a unit may name no file), so the .stir examples
// carry copies of examples/kernels/: these must stay the files.
TEST(ExampleTest, InlineKernelUnitsAreTheKernelFiles) {
  const struct {
    const char* example;
    const char* unit;
    const char* file;
  } cases[] = {
      {"add_mul.stir", "vtcm_ops", "add_mul.cl"},
      {"add_mul_planned.stir", "vtcm_ops", "add_mul.cl"},
      {"textures/add_one.stir", "tex", "add_one.cl"},
  };
  for (const auto& c : cases) {
    ir::Module module =
        ir::parse_module(read_text(std::string(STOWAGE_SOURCE_DIR) + "/examples/" + c.example), c.example)
            .value_or_throw();
    const std::string file = read_text(std::string(STOWAGE_SOURCE_DIR) + "/examples/kernels/" + c.file);
    ASSERT_FALSE(file.empty()) << c.file;
    bool found = false;
    for (const ir::KernelSourceUnit& unit : module.units) {
      if (unit.name != c.unit) continue;
      found = true;
      EXPECT_EQ(unit.source, file) << c.example << " holds another " << c.file;
    }
    EXPECT_TRUE(found) << c.example << " has no unit " << c.unit;
  }
}

TEST(ExampleTest, AddMulFromTextRunsThroughTheBytecodeFile) {
  ir::CompileResult compiled = compile_example("add_mul.stir");
  std::vector<uint8_t> bytes = write_bytecode(compiled.executable);
  auto loaded = read_bytecode(bytes);
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(*loaded, compiled.executable);
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(loaded.take())).value_or_throw();
  vm::Value x = int_input(1), y = int_input(2), z = int_input(3);
  vm::Value out = machine->invoke("main", {x, y, z});
  EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), host_add_mul(x, y, z));
  EXPECT_EQ(out.as_tensor().scope(), "global.vtcm");
}

TEST(ExampleTest, TheExecutableDescribesWhatItNeeds) {
  const Executable& exe = compile_example("add_mul.stir").executable;
  ASSERT_EQ(exe.functions.size(), 1u);
  const Function& main = exe.functions[0];
  EXPECT_EQ(main.params.size(), 3u);
  EXPECT_EQ(main.params[1].name, "y");
  EXPECT_EQ(main.result.shape, (std::vector<int64_t>{4, 64}));
  ASSERT_EQ(exe.kernels.size(), 2u);
  EXPECT_EQ(exe.kernels[0].name, "compute_add_in_vtcm");
  EXPECT_TRUE(exe.kernels[0].params[0].is_const);
  EXPECT_FALSE(exe.kernels[0].params[2].is_const);
  ASSERT_EQ(exe.requirements.scopes.size(), 1u);
  const ScopeRequirement& vtcm = exe.requirements.scopes[0];
  EXPECT_EQ(vtcm.scope, "global.vtcm");
  EXPECT_TRUE(vtcm.onchip);
  EXPECT_EQ(vtcm.capacity, 262144u);
  EXPECT_EQ(vtcm.max_storage_bytes, 4096u);
  EXPECT_EQ(vtcm.offset_alignment, 1024u);
  EXPECT_NE(exe.debug_text.find("fn main("), std::string::npos);
}

TEST(ExampleTest, RepeatedInvokesReuseStorageAndStayCorrect) {
  ir::CompileResult compiled = compile_example("add_mul.stir");
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(compiled.executable)).value_or_throw();
  for (int round = 0; round < 5; ++round) {
    vm::Value x = int_input(round), y = int_input(round + 10), z = int_input(round + 20);
    vm::Value out = machine->invoke("main", {x, y, z});
    EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), host_add_mul(x, y, z)) << "round " << round;
    if (round == 0) machine->reset_profile();
  }
  EXPECT_EQ(machine->profile().device_allocations, 0u);
  EXPECT_EQ(machine->profile().sub_buffers_created, 0u);
}

}  // namespace
}  // namespace stowage
