// Texture memory end to end, on the default device against references computed
// here: the examples of examples/textures/ (the RFC's add-one; conv2d with NCHW4c
// activations and OIHW4o weights in textures and in buffers), the conv2d kernels of
// examples/kernels/conv2d_3x3.cl under every launch shape their contract allows, and
// tensors of disjoint lifetimes sharing one image.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "conv2d_program.h"
#include "source_files.h"
#include "stowage/ir/compiler.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

using examples::Conv2dLayout;
using examples::Conv2dShape;
using examples::conv2d_kernel_unit;
using examples::conv2d_launch;
using examples::conv2d_program;
using testing::read_source_file;

Executable compile(const std::string& text, const std::string& name) {
  auto target = TargetDesc::load("opencl").value_or_throw();
  auto compiled = ir::compile_text(text, name, target);
  if (!compiled) throw StowageError(compiled.error());
  return compiled->executable;
}

Executable compile_example(const std::string& name) {
  return compile(read_source_file("examples/textures/" + name), name);
}

struct RunResult {
  std::vector<float> y;
  vm::Profile profile;
};

RunResult run(const Executable& exe, const std::vector<vm::Value>& args) {
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  std::vector<float> y = machine->invoke("main", args).as_tensor().to_vector<float>();
  return {std::move(y), machine->profile()};
}

vm::Value tensor(std::vector<int64_t> shape, const std::vector<float>& data) {
  return vm::Value::from(vm::host_tensor(std::move(shape), DType::kFloat32, std::as_bytes(std::span(data))));
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// x [Cin/4, H, W, 4] (NCHW4c), w [Cout/4, Cin, 3, 3, 4] (OIHW4o) -> y [Cout/4, H, W, 4],
// 3x3, pad 1, accumulated in float64.
std::vector<float> reference_conv(const std::vector<float>& x, const std::vector<float>& w, int cin, int cout, int h,
                                  int wd) {
  std::vector<float> y(static_cast<size_t>(cout) * h * wd, 0.0f);
  auto at_x = [&](int ci, int iy, int ix) {
    return x[((static_cast<size_t>(ci / 4) * h + iy) * wd + ix) * 4 + ci % 4];
  };
  auto at_w = [&](int co, int ci, int ky, int kx) {
    return w[(((static_cast<size_t>(co / 4) * cin + ci) * 3 + ky) * 3 + kx) * 4 + co % 4];
  };
  for (int co = 0; co < cout; ++co)
    for (int oy = 0; oy < h; ++oy)
      for (int ox = 0; ox < wd; ++ox) {
        double sum = 0;
        for (int ci = 0; ci < cin; ++ci)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = oy + ky - 1, ix = ox + kx - 1;
              if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
              sum += static_cast<double>(at_x(ci, iy, ix)) * at_w(co, ci, ky, kx);
            }
        y[((static_cast<size_t>(co / 4) * h + oy) * wd + ox) * 4 + co % 4] = static_cast<float>(sum);
      }
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << what << ", element " << i;
  }
}

TEST(TextureTest, AddOneExampleAddsExactlyOne) {
  std::vector<float> x = random_floats(32 * 32 * 4, 1);
  for (float& v : x) v *= 1000.0f;
  RunResult r = run(compile_example("add_one.stir"), {tensor({32, 32, 4}, x)});
  ASSERT_EQ(r.y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(r.y[i], x[i] + 1.0f) << i;
}

TEST(TextureTest, Conv2dExamplesMatchTheReferenceAndEachOther) {
  const int c = 8, h = 16, wd = 16;
  for (uint32_t seed : {5u, 6u}) {
    std::vector<float> x = random_floats(static_cast<size_t>(c) * h * wd, seed);
    std::vector<float> w = random_floats(static_cast<size_t>(c) * c * 9, seed + 100);
    std::vector<float> expected = reference_conv(x, w, c, c, h, wd);
    std::vector<vm::Value> args = {tensor({c / 4, h, wd, 4}, x), tensor({c / 4, c, 3, 3, 4}, w)};
    RunResult texture = run(compile_example("conv2d_texture.stir"), args);
    RunResult buffer = run(compile_example("conv2d_buffer.stir"), args);
    expect_close(texture.y, expected, fmt::format("texture, seed {}", seed));
    expect_close(buffer.y, expected, fmt::format("buffer, seed {}", seed));
    // Same arithmetic in the same order: the two layouts agree to the bit.
    EXPECT_EQ(texture.y, buffer.y) << "seed " << seed;
  }
}

// One conv2d launch of examples/kernels/conv2d_3x3.cl at storage level, in the
// programs of examples/textures/conv2d_program.h.
struct ConvCase {
  int cin, cout, h, w;
  int lx, ly, slices;
};

Conv2dLayout layout_of(bool texture) { return texture ? Conv2dLayout::kTexture : Conv2dLayout::kBuffer; }

std::string conv_program(bool texture, const ConvCase& k) {
  const Conv2dShape shape{k.cin, k.cout, k.h, k.w};
  return conv2d_program(layout_of(texture), shape, conv2d_launch(shape, k.lx, k.ly, k.slices),
                        read_source_file("examples/kernels/conv2d_3x3.cl"), {{"main", 1}});
}

RunResult run_conv(bool texture, const ConvCase& k, const std::vector<float>& x, const std::vector<float>& w) {
  Executable exe = compile(conv_program(texture, k), texture ? "conv_texture.stir" : "conv_buffer.stir");
  return run(exe, {tensor({k.cin / 4, k.h, k.w, 4}, x), tensor({k.cout / 4, k.cin, 3, 3, 4}, w)});
}

// The checked-in examples are what the generator writes (conv2d_program texture|buffer
// 8 16 16 1), so their kernels are those of examples/kernels/ and cannot drift.
TEST(TextureTest, Conv2dExamplesAreTheGeneratorsPrograms) {
  const Conv2dShape shape{8, 8, 16, 16};
  const std::string source = read_source_file("examples/kernels/conv2d_3x3.cl");
  for (bool texture : {true, false}) {
    const std::string name = texture ? "conv2d_texture.stir" : "conv2d_buffer.stir";
    EXPECT_EQ(read_source_file("examples/textures/" + name),
              conv2d_program(layout_of(texture), shape, conv2d_launch(shape), source, {{"main", 1}}))
        << name;
  }
}

// Slices that share planes unevenly or have none, widths that are not a multiple of
// 4 pixels, rows and columns of work-items past the tensor, Cin != Cout.
TEST(TextureTest, Conv2dKernelsAreRightUnderEveryLaunchShape) {
  const ConvCase cases[] = {
      {8, 8, 16, 16, 4, 16, 1},  {12, 8, 9, 13, 4, 9, 2},  {12, 16, 9, 13, 2, 5, 4},
      {8, 8, 7, 20, 5, 3, 8},    {16, 8, 10, 6, 1, 4, 3},  {4, 16, 5, 5, 2, 8, 8},
  };
  uint32_t seed = 40;
  for (const ConvCase& k : cases) {
    const std::string what = fmt::format("Cin {} Cout {} H {} W {} local [{}, {}, {}]", k.cin, k.cout, k.h, k.w,
                                         k.lx, k.ly, k.slices);
    std::vector<float> x = random_floats(static_cast<size_t>(k.cin) * k.h * k.w, ++seed);
    std::vector<float> w = random_floats(static_cast<size_t>(k.cout) * k.cin * 9, ++seed);
    std::vector<float> expected = reference_conv(x, w, k.cin, k.cout, k.h, k.w);
    RunResult texture = run_conv(true, k, x, w);
    RunResult buffer = run_conv(false, k, x, w);
    expect_close(texture.y, expected, "texture, " + what);
    expect_close(buffer.y, expected, "buffer, " + what);
    EXPECT_EQ(texture.y, buffer.y) << what;
  }
}

TEST(TextureTest, Conv2dLaunchOverTheLocalLimitsWritesNaN) {
  // 4 x 8 x 8 = 256 work-items per group, over the kernels' 128.
  const ConvCase k{8, 8, 8, 16, 4, 8, 8};
  std::vector<float> x = random_floats(8 * 8 * 16, 3), w = random_floats(8 * 8 * 9, 4);
  for (bool texture : {true, false}) {
    RunResult r = run_conv(texture, k, x, w);
    ASSERT_EQ(r.y.size(), x.size());
    for (size_t i = 0; i < r.y.size(); ++i) ASSERT_TRUE(std::isnan(r.y[i])) << (texture ? "texture " : "buffer ") << i;
  }
}

// Two activation tensors of disjoint lifetimes in ONE image: `a` (16 pixels wide)
// and, after a's kill, `b` (12 wide). Columns 12..15 of the image still hold a's
// data while b is convolved, so the kernel must read them as padding, not data.
constexpr const char* kSharedImageProgram = R"(
fn main(x: Tensor[(2, 16, 16, 4), float32], w: Tensor[(2, 8, 3, 3, 4), float32],
        v: Tensor[(2, 16, 12, 4), float32]) -> Tensor[(2, 16, 12, 4), float32] {
  img = alloc_storage([32, 16], device=0, dtype=float32, scope="global.texture")
  a = alloc_tensor(img, 0, [2, 16, 16, 4], float32)
  copy_tensor(x, a)
  ws = alloc_storage([2, 72], device=0, dtype=float32, scope="global.texture-weight")
  wt = alloc_tensor(ws, 0, [2, 8, 3, 3, 4], float32)
  copy_tensor(w, wt)
  ys = alloc_storage([32, 16], device=0, dtype=float32, scope="global.texture")
  y = alloc_tensor(ys, 0, [2, 16, 16, 4], float32)
  call_kernel(conv2d_texture, [a, wt, y, 8, 16, 16], grid=[4, 16, 2], local=[4, 16, 2])
  kill_object(a)
  b = alloc_tensor(img, 0, [2, 16, 12, 4], float32)
  copy_tensor(v, b)
  zs = alloc_storage([32, 12], device=0, dtype=float32, scope="global.texture")
  z = alloc_tensor(zs, 0, [2, 16, 12, 4], float32)
  call_kernel(conv2d_texture, [b, wt, z, 8, 16, 12], grid=[3, 16, 2], local=[3, 16, 2])
  os = alloc_storage([12288], device=0, dtype=uint8, scope="global")
  out = alloc_tensor(os, 0, [2, 16, 12, 4], float32)
  copy_tensor(z, out)
  return out
}
)";

TEST(TextureTest, TensorsOfDisjointLifetimesShareOneImage) {
  const std::string text =
      conv2d_kernel_unit(Conv2dLayout::kTexture, read_source_file("examples/kernels/conv2d_3x3.cl")) +
      kSharedImageProgram;
  Executable exe = compile(text, "shared_image.stir");
  std::vector<float> x = random_floats(8 * 16 * 16, 7), w = random_floats(8 * 8 * 9, 8);
  std::vector<float> v = random_floats(8 * 16 * 12, 9);
  for (float& f : x) f += 10.0f;  // far from v's values: a leak of x into b's padding shows
  RunResult r = run(exe, {tensor({2, 16, 16, 4}, x), tensor({2, 8, 3, 3, 4}, w), tensor({2, 16, 12, 4}, v)});
  expect_close(r.y, reference_conv(v, w, 8, 8, 16, 12), "b, convolved in a's image");
  // img, ws, ys, zs, os (img served a, then b), and the buffers the three arguments were uploaded into.
  EXPECT_EQ(r.profile.device_allocations, 8u);
}

}  // namespace
}  // namespace stowage
