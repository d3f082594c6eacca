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

// Image offset parameters: call_kernel lists only the images, the VM passes each
// image tensor's top-left pixel as (int2)(x, y) in the parameter after it.
constexpr const char* kOffsetProgram = R"(kernels tex """
#include <stowage/image_offset.cl.h>
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void shift(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                    stowage_image_offset y_off) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  float4 v = read_imagef(x, kSampler, p + x_off);
  write_imagef(y, p + y_off, v + (float4)(1.0f + x_off.x, 2.0f + x_off.y, 3.0f + y_off.x, 4.0f + y_off.y));
}
"""

fn main(x: Tensor[(3, 5, 4), float32]) -> Tensor[(3, 5, 4), float32] {
  t0 = alloc_storage([3, 5], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(t0, 0, [3, 5, 4], float32)
  copy_tensor(x, a)
  t1 = alloc_storage([3, 5], device=0, dtype=float32, scope="global.texture")
  b = alloc_tensor(t1, 0, [3, 5, 4], float32)
  call_kernel(shift, [a, b], grid=[5, 3])
  out = alloc_storage([240], device=0, dtype=uint8, scope="global")
  y = alloc_tensor(out, 0, [3, 5, 4], float32)
  copy_tensor(b, y)
  return y
}
)";

TEST(ImageRuntimeTest, ImageOffsetParametersReceiveTheTensorsOrigin) {
  auto target = TargetDesc::load("opencl").value_or_throw();
  auto compiled = ir::compile_text(kOffsetProgram, "offsets.stir", target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  const Executable& exe = compiled->executable;
  ASSERT_EQ(exe.kernels.size(), 1u);
  ASSERT_EQ(exe.kernels[0].params.size(), 4u);
  EXPECT_EQ(exe.kernels[0].params[1].kind, KernelParamKind::kImageOffset);
  EXPECT_EQ(exe.kernels[0].params[3].kind, KernelParamKind::kImageOffset);
  EXPECT_EQ(exe.minor_version, 6);
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  std::vector<float> x(3 * 5 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  vm::Value in = vm::Value::from(vm::host_tensor({3, 5, 4}, DType::kFloat32, std::as_bytes(std::span(x))));
  std::vector<float> y = machine->invoke("main", {in}).as_tensor().to_vector<float>();
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] + static_cast<float>(i % 4 + 1)) << i;
}

}  // namespace
}  // namespace stowage
