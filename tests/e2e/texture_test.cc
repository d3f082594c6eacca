// The texture examples on the default device against references computed here:
// the texture-memory RFC's add-one, and conv2d with NCHW4c activations and OIHW4o
// weights in textures and in buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "stowage/ir/compiler.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

Executable compile_example(const std::string& name) {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/examples/textures/" + name);
  std::stringstream text;
  text << in.rdbuf();
  auto target = TargetDesc::load("opencl").value_or_throw();
  return ir::compile_text(text.str(), name, target).value_or_throw().executable;
}

std::vector<float> run(const Executable& exe, const std::vector<vm::Value>& args) {
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  return machine->invoke("main", args).as_tensor().to_vector<float>();
}

vm::Value tensor(std::vector<int64_t> shape, const std::vector<float>& data) {
  return vm::Value::from(vm::host_tensor(std::move(shape), DType::kFloat32, std::as_bytes(std::span(data))));
}

TEST(TextureExampleTest, AddOneOnA32x32x4Texture) {
  std::vector<float> x(32 * 32 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.25f;
  std::vector<float> y = run(compile_example("add_one.stir"), {tensor({32, 32, 4}, x)});
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + 1.0f) << i;
}

// NCHW4c activations [C/4, H, W, 4], OIHW4o weights [C/4, C, 3, 3, 4].
std::vector<float> reference_conv(const std::vector<float>& x, const std::vector<float>& w, int c, int h, int wd) {
  std::vector<float> y(x.size(), 0.0f);
  auto at_x = [&](int ci, int iy, int ix) { return x[((static_cast<size_t>(ci / 4) * h + iy) * wd + ix) * 4 + ci % 4]; };
  auto at_w = [&](int co, int ci, int ky, int kx) {
    return w[(((static_cast<size_t>(co / 4) * c + ci) * 3 + ky) * 3 + kx) * 4 + co % 4];
  };
  for (int co = 0; co < c; ++co)
    for (int oy = 0; oy < h; ++oy)
      for (int ox = 0; ox < wd; ++ox) {
        double sum = 0;
        for (int ci = 0; ci < c; ++ci)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              int iy = oy + ky - 1, ix = ox + kx - 1;
              if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
              sum += static_cast<double>(at_x(ci, iy, ix)) * at_w(co, ci, ky, kx);
            }
        y[((static_cast<size_t>(co / 4) * h + oy) * wd + ox) * 4 + co % 4] = static_cast<float>(sum);
      }
  return y;
}

TEST(TextureExampleTest, Conv2dOnTexturesAndOnBuffersMatchTheReference) {
  const int c = 8, h = 16, wd = 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(c) * h * wd), w(static_cast<size_t>(c) * c * 9);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  std::vector<float> expected = reference_conv(x, w, c, h, wd);
  for (const char* name : {"conv2d_texture.stir", "conv2d_buffer.stir"}) {
    std::vector<float> y = run(compile_example(name), {tensor({c / 4, h, wd, 4}, x), tensor({c / 4, c, 3, 3, 4}, w)});
    ASSERT_EQ(y.size(), expected.size());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_NEAR(y[i], expected[i], 1e-4f * (1.0f + std::fabs(expected[i]))) << name << " element " << i;
    }
  }
}

}  // namespace
}  // namespace stowage
