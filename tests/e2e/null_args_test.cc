// Null buffer arguments (bytecode version 1.7): `null` in call_kernel's argument list
// passes a null pointer to a buffer parameter the launch leaves unread. The text
// form, the verifier's and the loader's rules, and runs with SVM pointers and with
// buffers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "opencl_target.h"
#include "bytecode/bytecode_test_util.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

const TargetDesc& opencl() { return testing::opencl_target(); }

// y = 2 x (+ bias where use_bias): bias is read only where use_bias says so.
constexpr const char* kKernels = R"(kernels ops """
__kernel void twice(__global const float* x, __global const float* bias, __global float* y, int use_bias) {
  size_t i = get_global_id(0);
  y[i] = 2.0f * x[i] + (use_bias ? bias[i] : 0.0f);
}
"""
)";

constexpr const char* kProgram = R"(
fn main(x: Tensor[(64,), float32], b: Tensor[(64,), float32]) -> Tensor[(2, 64), float32] {
  both = empty([2, 64], float32, scope="global")
  plain = view(both, 0, [64], float32)
  biased = view(both, 256, [64], float32)
  call_kernel(twice, [x, null, plain, 0], grid=[64])
  call_kernel(twice, [x, b, biased, 1], grid=[64])
  return both
}
)";

vm::Value host(const std::vector<float>& values) {
  return vm::Value::from(vm::host_tensor({static_cast<int64_t>(values.size())}, DType::kFloat32,
                                         std::as_bytes(std::span(values))));
}

TEST(NullArgs, TheTextFormKeepsNullAndTheKernelRunsWithoutTheOperand) {
  const std::string text = std::string(kKernels) + kProgram;
  auto parsed = ir::parse_module(text, "null.stir");
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(ir::print_module(*parsed), text);  // the text form is canonical
  auto compiled = ir::compile_text(text, "null.stir", opencl());
  ASSERT_TRUE(compiled) << compiled.error().message();
  // Through a bytecode file and back, as vm-run loads it.
  auto loaded = read_bytecode(write_bytecode(compiled->executable));
  ASSERT_TRUE(loaded) << loaded.error().message();
  const auto exe = std::make_shared<const Executable>(std::move(*loaded));
  std::vector<float> x(64), b(64);
  for (int i = 0; i < 64; ++i) {
    x[i] = static_cast<float>(i) - 20.0f;
    b[i] = 0.5f * static_cast<float>(i);
  }
  for (bool svm : {true, false}) {
    vm::VmOptions options;
    options.svm = svm;
    auto machine = vm::VirtualMachine::create(exe, options).value_or_throw();
    for (int run = 0; run < 2; ++run) {  // the second launch of each site keeps its arguments
      std::vector<float> y = machine->invoke("main", {host(x), host(b)}).as_tensor().to_vector<float>();
      ASSERT_EQ(y.size(), 128u);
      for (int i = 0; i < 64; ++i) {
        EXPECT_EQ(y[i], 2.0f * x[i]) << "svm " << svm << ", element " << i;
        EXPECT_EQ(y[64 + i], 2.0f * x[i] + b[i]) << "svm " << svm << ", element " << i;
      }
    }
  }
}

std::string compile_error(const std::string& body) {
  const std::string text = std::string(kKernels) +
                           "fn f(v: Tensor[(64,), float32]) -> Tensor[(64,), float32] {\n  return v\n}\n"
                           "fn main(x: Tensor[(64,), float32]) -> Tensor[(64,), float32] {\n" +
                           body + "  return x\n}\n";
  auto compiled = ir::compile_text(text, "v.stir", opencl());
  return compiled ? "ok" : compiled.error().message();
}

TEST(NullArgs, NullIsOnlyForBufferParameters) {
  EXPECT_EQ(compile_error("  call_kernel(twice, [x, null, x, 0], grid=[64])\n"), "ok");
  EXPECT_EQ(compile_error("  call_kernel(twice, [x, x, x, null], grid=[64])\n"),
            "v.stir:11:3: error: function 'main', binding 'call_kernel(twice, [x, x, x, null], grid=[64])': "
            "parameter 'use_bias' of kernel 'twice' is a scalar, but argument 4 is null, which only a buffer "
            "parameter takes");
  EXPECT_EQ(compile_error("  y = call(f, [null])\n"),
            "v.stir:11:3: error: function 'main', binding 'y = call(f, [null])': argument 1 is null, which only "
            "a kernel's buffer parameter takes");
  EXPECT_EQ(compile_error("  null = empty([64], float32, scope=\"global\")\n"),
            "v.stir:11:3: error: 'null' is a reserved word and cannot name a variable");
}

// The loader's rules: a null stands only in call_kernel's list, only where the
// kernel's parameter is a buffer, and only in a file of version 1.7 or later;
// anywhere else it is a register out of range.
TEST(NullArgs, TheLoaderRefusesNullWhereNoBufferParameterIs) {
  using testing::code_byte;
  const std::string text = std::string(kKernels) + kProgram;
  Executable exe = ir::compile_text(text, "null.stir", opencl()).value_or_throw().executable;
  size_t launch = 0;
  while (exe.functions[0].code.at(launch).op != Opcode::kCallKernel) ++launch;
  ASSERT_EQ(exe.functions[0].code[launch].list.size(), 4u);
  ASSERT_EQ(exe.functions[0].code[launch].list[1], kNullRegister);
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(testing::get_le<uint16_t>(file, bytecode::HeaderField::kMinor), 7u);
  // List entry k of call_kernel is word 5 + k (opcode, kernel, grid, local, count).
  const auto where = [&](const std::vector<uint8_t>& f, const Executable& e, size_t word) {
    return fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction {} (call_kernel): ",
                       code_byte(f, e, 0, launch, word), launch);
  };
  testing::put_le<uint16_t>(file, bytecode::HeaderField::kMinor, 6);
  testing::reseal(file);
  EXPECT_EQ(testing::refusal_message(file),
            where(file, exe, 6) + "argument 2 is null, which needs version 1.7; the file declares 1.6");

  Executable scalar = exe;
  scalar.functions[0].code[launch].list[3] = kNullRegister;
  file = write_bytecode(scalar);
  EXPECT_EQ(testing::refusal_message(file),
            where(file, scalar, 8) + "argument 4 is null, but parameter 'use_bias' of kernel 'twice' is a scalar; "
                                     "only a buffer parameter takes null");

  Executable returned = exe;
  for (Instruction& ins : returned.functions[0].code) {
    if (ins.op == Opcode::kRet) ins.ops[operands::Ret::kReg] = kNullRegister;
  }
  const std::string message = testing::refusal_message(write_bytecode(returned));
  EXPECT_NE(message.find("(ret): register 4294967295 out of range"), std::string::npos) << message;
}

}  // namespace
}  // namespace stowage
