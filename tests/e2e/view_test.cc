// Views: tensors sharing bytes of another, with no copy (reshapes, and the slices a
// concatenation's producers write into), planned, compiled and run.
#include <gtest/gtest.h>

#include "opencl_target.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

const TargetDesc& opencl() { return testing::opencl_target(); }

constexpr const char* kKernels = R"(kernels ops """
__kernel void scale(__global const float* x, __global float* y, float k) {
  size_t i = get_global_id(0);
  y[i] = x[i] * k;
}
"""
)";

// x (2 x 64) flattened into a vector, each half scaled into its slice of `both`.
constexpr const char* kProgram = R"(
fn main(x: Tensor[(2, 64), float32]) -> Tensor[(4, 64), float32] {
  flat = view(x, 0, [128], float32)
  both = empty([4, 64], float32, scope="global")
  first = view(both, 0, [128], float32)
  second = view(both, 512, [128], float32)
  call_kernel(scale, [flat, first, 2.0], grid=[128])
  call_kernel(scale, [flat, second, -1.0], grid=[128])
  out = view(both, 0, [4, 64], float32)
  return out
}
)";

TEST(Views, ReshapesAndSlicesRunWithoutCopies) {
  std::string text = std::string(kKernels) + kProgram;
  auto parsed = ir::parse_module(text, "views.stir");
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(ir::print_module(*parsed), text.substr(0, text.size()));  // the text form is canonical
  auto compiled = ir::compile_text(text, "views.stir", opencl());
  ASSERT_TRUE(compiled) << compiled.error().message();
  // `both` is returned through its view: it gets a storage of its own, and no copy is made.
  const std::string planned = ir::print_module(compiled->module);
  EXPECT_NE(planned.find("both = alloc_tensor(result0, 0, [4, 64], float32)"), std::string::npos) << planned;
  EXPECT_EQ(planned.find("copy_tensor"), std::string::npos);
  auto machine =
      vm::VirtualMachine::create(std::make_shared<const Executable>(compiled->executable)).value_or_throw();
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>(i) - 50.0f;
  vm::Value out =
      machine->invoke("main", {vm::Value::from(vm::host_tensor({2, 64}, DType::kFloat32, std::as_bytes(std::span(x))))});
  std::vector<float> y = out.as_tensor().to_vector<float>();
  ASSERT_EQ(y.size(), 256u);
  for (int i = 0; i < 128; ++i) {
    EXPECT_EQ(y[i], 2.0f * x[i]) << i;
    EXPECT_EQ(y[128 + i], -x[i]) << i;
  }
  EXPECT_EQ(machine->profile().device_to_host, 1u);
}

std::string verify_body(const std::string& body) {
  std::string text = std::string(kKernels) + "fn main(x: Tensor[(2, 64), float32]) -> Tensor[(2, 64), float32] {\n" +
                     body + "  return x\n}\n";
  auto compiled = ir::compile_text(text, "v.stir", opencl());
  return compiled ? "ok" : compiled.error().message();
}

TEST(Views, VerifierRules) {
  EXPECT_EQ(verify_body("  v = view(x, 0, [65], float32)\n"), "ok");
  EXPECT_EQ(verify_body("  v = view(x, 256, [65], float32)\n"),
            "v.stir:8:3: error: function 'main', binding 'v = view(x, 256, [65], float32)': bytes [256, 516) lie "
            "outside 'x', which has 512 bytes");
  EXPECT_EQ(verify_body("  v = view(x, 4, [64], float32)\n"),
            "v.stir:8:3: error: function 'main', binding 'v = view(x, 4, [64], float32)': offset 4 is not a multiple "
            "of 128, the alignment of scope 'global'");
  EXPECT_EQ(verify_body("  t = empty([32, 4], float32, scope=\"global.texture\")\n  v = view(t, 0, [128], float32)\n"),
            "v.stir:9:3: error: function 'main', binding 'v = view(t, 0, [128], float32)': shape [128] is not an "
            "image shape (last extent 4, rank at most 5), so it cannot view 't' in image scope 'global.texture'");
  // A view of a tensor in an image is whole rows of it (docs/textures.md).
  EXPECT_EQ(verify_body("  t = empty([32, 4], float32, scope=\"global.texture\")\n  v = view(t, 0, [8, 4], float32)\n"),
            "v.stir:9:3: error: function 'main', binding 'v = view(t, 0, [8, 4], float32)': a view of 't' in image "
            "scope 'global.texture' is whole rows of it: the view is 8 pixels wide, 't' 32");
  EXPECT_EQ(verify_body("  t = empty([2, 32, 4], float32, scope=\"global.texture\")\n"
                        "  v = view(t, 512, [1, 32, 4], float32)\n"),
            "ok");
  EXPECT_EQ(verify_body("  t = empty([128], float32, scope=\"global\")\n  v = view(t, 0, [2, 64], float32)\n"
                        "  w = view(v, 0, [64], float32)\n  kill_object(t)\n  call_kernel(scale, [w, x, 1.0], "
                        "grid=[64])\n"),
            "v.stir:12:3: error: function 'main', binding 'call_kernel(scale, [w, x, 1.0], grid=[64])': 'w' is a view "
            "of 't', which was killed at 11:3");
}

// check_bounds: a kernel that writes one element past its storage is named; the
// same program within bounds runs, and without the option nothing is checked.
TEST(CheckBounds, AKernelWritingPastItsStorageIsNamed) {
  auto program = [](int grid) {
    return std::string(R"(kernels ops """
__kernel void fill(__global float* y) { y[get_global_id(0)] = 1.0f; }
"""
fn main(x: Tensor[(2, 64), float32]) -> Tensor[(2, 64), float32] {
  s = alloc_storage([256], device=0, dtype=uint8, scope="global")
  t = alloc_tensor(s, 0, [64], float32)
  call_kernel(fill, [t], grid=[)") +
           std::to_string(grid) + R"(])
  return x
}
)";
  };
  auto run = [&](int grid, bool check) {
    auto compiled = ir::compile_text(program(grid), "over.stir", opencl()).value_or_throw();
    vm::VmOptions options;
    options.check_bounds = check;
    auto machine =
        vm::VirtualMachine::create(std::make_shared<const Executable>(compiled.executable), options).value_or_throw();
    std::vector<float> x(128, 0.0f);
    machine->invoke("main", {vm::Value::from(vm::host_tensor({2, 64}, DType::kFloat32, std::as_bytes(std::span(x))))});
  };
  EXPECT_NO_THROW(run(64, true));
  try {
    run(65, true);
    FAIL() << "the write past the storage went unnoticed";
  } catch (const StowageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "function 'main' instruction 2 (call_kernel): kernel 'fill' wrote past the end of a storage of 256 "
              "bytes in scope 'global': byte 0 of the guard zone behind it changed");
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
  }
}

}  // namespace
}  // namespace stowage
