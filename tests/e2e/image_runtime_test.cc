// The runtime's image2d support: texture storages, copies between host, buffer
// and texture tensors in both directions, and image kernel arguments.
#include <gtest/gtest.h>

#include "stowage/ir/compiler.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

constexpr const char* kProgram = R"(kernels tex """
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void add_one(read_only image2d_t in, write_only image2d_t out) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p, read_imagef(in, kSampler, p) + 1.0f);
}
"""

fn main(x: Tensor[(2, 8, 6, 4), float32]) -> Tensor[(2, 8, 6, 4), float32] {
  buf = alloc_storage([1536], device=0, dtype=uint8, scope="global")
  xb = alloc_tensor(buf, 0, [2, 8, 6, 4], float32)
  copy_tensor(x, xb)
  t0 = alloc_storage([16, 6], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(t0, 0, [2, 8, 6, 4], float32)
  copy_tensor(xb, a)
  t1 = alloc_storage([16, 6], device=0, dtype=float32, scope="global.texture")
  b = alloc_tensor(t1, 0, [2, 8, 6, 4], float32)
  call_kernel(add_one, [a, b], grid=[6, 16])
  kill_object(a)
  c = alloc_tensor(t0, 0, [2, 8, 6, 4], float32)
  call_kernel(add_one, [b, c], grid=[6, 16])
  kill_object(b)
  out = alloc_storage([1536], device=0, dtype=uint8, scope="global")
  y = alloc_tensor(out, 0, [2, 8, 6, 4], float32)
  copy_tensor(c, y)
  return y
}
)";

TEST(ImageRuntimeTest, CopiesThroughTexturesAndRunsImageKernels) {
  auto target = TargetDesc::load("opencl").value_or_throw();
  auto compiled = ir::compile_text(kProgram, "tex.stir", target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  const Executable& exe = compiled->executable;
  EXPECT_TRUE(exe.requirements.features & kFeatureImages);
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  std::vector<float> x(2 * 8 * 6 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 7.0f;
  vm::Value in = vm::Value::from(vm::host_tensor({2, 8, 6, 4}, DType::kFloat32, std::as_bytes(std::span(x))));
  vm::Value out = machine->invoke("main", {in});
  std::vector<float> y = out.as_tensor().to_vector<float>();
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] + 2.0f) << i;
  vm::Profile p = machine->profile();
  // Two buffers, two images (t0 serves a and then c), and the buffer x was uploaded into.
  EXPECT_EQ(p.device_allocations, 5u);
  EXPECT_EQ(p.host_to_device, 1u);
}

}  // namespace
}  // namespace stowage
