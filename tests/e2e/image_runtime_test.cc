// The runtime's image2d support: texture storages, copies between host, buffer
// and texture tensors in both directions, and image kernel arguments.
#include <gtest/gtest.h>

#include "stowage/bytecode/storage_rules.h"
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

// Several tensors in one image storage, each at its own offset: a host upload, a
// kernel reading and writing at offsets, an image-to-image copy, a view of whole
// rows copied out to a buffer, and an image tensor returned (read at its offset).
constexpr const char* kAtlasProgram = R"(kernels tex """
#include <stowage/image_offset.cl.h>
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void shift(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                    stowage_image_offset y_off) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  float4 v = read_imagef(x, kSampler, p + x_off);
  write_imagef(y, p + y_off, v + (float4)(1.0f + x_off.x, 2.0f + x_off.y, 3.0f + y_off.x, 4.0f + y_off.y));
}
"""

fn main(x: Tensor[(3, 5, 4), float32]) -> Tuple[Tensor[(3, 5, 4), float32], Tensor[(2, 5, 4), float32]] {
  atlas = alloc_storage([7, 11], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(atlas, [1, 2], [3, 5, 4], float32)
  copy_tensor(x, a)
  other = alloc_storage([8, 9], device=0, dtype=float32, scope="global.texture")
  b = alloc_tensor(other, [4, 3], [3, 5, 4], float32)
  call_kernel(shift, [a, b], grid=[5, 3])
  c = alloc_tensor(atlas, [4, 6], [3, 5, 4], float32)
  copy_tensor(b, c)
  band = view(c, 80, [2, 5, 4], float32)
  out = alloc_storage([160], device=0, dtype=uint8, scope="global")
  z = alloc_tensor(out, 0, [2, 5, 4], float32)
  copy_tensor(band, z)
  return (c, z)
}
)";

std::vector<float> iota_image() {
  std::vector<float> x(3 * 5 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return x;
}

TEST(ImageRuntimeTest, TensorsAtOffsetsShareAnImage) {
  auto target = TargetDesc::load("opencl").value_or_throw();
  auto compiled = ir::compile_text(kAtlasProgram, "atlas.stir", target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  EXPECT_EQ(compiled->executable.minor_version, 6);
  auto machine =
      vm::VirtualMachine::create(std::make_shared<const Executable>(compiled->executable)).value_or_throw();
  std::vector<float> x = iota_image();
  vm::Value in = vm::Value::from(vm::host_tensor({3, 5, 4}, DType::kFloat32, std::as_bytes(std::span(x))));
  vm::Value out = machine->invoke("main", {in});
  ASSERT_EQ(out.fields.size(), 2u);
  // a is at [1, 2] and b at [4, 3]: the kernel saw x_off (2, 1) and y_off (3, 4).
  const float added[4] = {1.0f + 2, 2.0f + 1, 3.0f + 3, 4.0f + 4};
  std::vector<float> c = out.fields[0].as_tensor().to_vector<float>();
  ASSERT_EQ(c.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(c[i], x[i] + added[i % 4]) << i;
  // The view is rows 1 and 2 of c: bytes from 80 on.
  std::vector<float> z = out.fields[1].as_tensor().to_vector<float>();
  ASSERT_EQ(z.size(), 2u * 5 * 4);
  for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], x[20 + i] + added[i % 4]) << i;
}

// A program whose first image tensor the tests move after compiling, past what the
// verifier would let through, to see the VM's own checks.
constexpr const char* kPlainProgram = R"(kernels tex """
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void plain(read_only image2d_t x, write_only image2d_t y) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(y, p, read_imagef(x, kSampler, p));
}
"""

fn main(x: Tensor[(3, 5, 4), float32]) -> Tensor[(3, 5, 4), float32] {
  atlas = alloc_storage([3, 10], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(atlas, 0, [3, 5, 4], float32)
  copy_tensor(x, a)
  other = alloc_storage([3, 5], device=0, dtype=float32, scope="global.texture")
  b = alloc_tensor(other, 0, [3, 5, 4], float32)
  call_kernel(plain, [a, b], grid=[5, 3])
  out = alloc_storage([240], device=0, dtype=uint8, scope="global")
  y = alloc_tensor(out, 0, [3, 5, 4], float32)
  copy_tensor(b, y)
  return y
}
)";

// The VM's message when main runs `exe`, or "" when it runs.
std::string vm_refusal(const Executable& exe) {
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  std::vector<float> x = iota_image();
  try {
    machine->invoke("main", {vm::Value::from(vm::host_tensor({3, 5, 4}, DType::kFloat32, std::as_bytes(std::span(x))))});
  } catch (const StowageError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime) << e.what();
    return e.what();
  }
  return "";
}

// Main's alloc_tensor instructions, in order.
std::vector<Instruction*> alloc_tensors(Executable& exe) {
  std::vector<Instruction*> found;
  for (Instruction& ins : exe.functions[0].code) {
    if (ins.op == Opcode::kAllocTensor) found.push_back(&ins);
  }
  return found;
}

TEST(ImageRuntimeTest, VmChecksImageOffsetsItself) {
  auto target = TargetDesc::load("opencl").value_or_throw();
  const Executable compiled = ir::compile_text(kPlainProgram, "plain.stir", target).value_or_throw().executable;
  using O = operands::AllocTensor;
  EXPECT_EQ(vm_refusal(compiled), "");

  // `plain` has no offset parameters: it takes tensors at [0, 0] only.
  Executable exe = compiled;
  alloc_tensors(exe)[0]->ops[O::kOffset] = pack_image_offset(ImageOffset{5, 0});
  EXPECT_EQ(vm_refusal(exe), "function 'main' instruction 5 (call_kernel): kernel 'plain' parameter 0 'x' has no "
                             "image offset parameter after it, so it takes only tensors at [0, 0]; the tensor (3, 5, "
                             "4) is at [0, 5] of its image");
  // The rectangle lies inside the storage.
  alloc_tensors(exe)[0]->ops[O::kOffset] = pack_image_offset(ImageOffset{6, 0});
  EXPECT_EQ(vm_refusal(exe), "function 'main' instruction 1 (alloc_tensor): tensor (3, 5, 4) needs an image of "
                             "height 3 and width 5 at [0, 6], but the storage is [3, 10]");
  alloc_tensors(exe)[0]->ops[O::kOffset] = uint64_t{1} << 63;
  EXPECT_EQ(vm_refusal(exe), "function 'main' instruction 1 (alloc_tensor): tensor (3, 5, 4): image offset "
                             "[2147483648, 0] is out of range: row and column must be below 2^31 (offset "
                             "9223372036854775808)");

  // One image storage read through x and written through y in one launch.
  exe = compiled;
  std::vector<Instruction*> tensors = alloc_tensors(exe);
  tensors[1]->ops[O::kStorage] = tensors[0]->ops[O::kStorage];
  EXPECT_EQ(vm_refusal(exe), "function 'main' instruction 5 (call_kernel): kernel 'plain' parameters 0 'x' and 1 "
                             "'y': one image storage is bound to a read_only image2d_t and a write_only image2d_t "
                             "parameter; one kernel cannot read and write the same image");
}

}  // namespace
}  // namespace stowage
