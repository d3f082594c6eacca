// The conv2d programs (text IR) around examples/kernels/conv2d_3x3.cl: NCHW4c
// activations and OIHW4o weights either in textures (global.texture /
// global.texture-weight) or in buffers, every tensor at offset 0 of its own storage,
// the result copied into a buffer. The one generator of these programs: the example
// tool (conv2d_program.cc), the benchmark (benchmarks/conv2d_programs.cc) and the
// texture tests use it.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stowage::examples {

enum class Conv2dLayout { kTexture, kBuffer };

// Batch 1, 3x3, pad 1: cin a multiple of 4, cout of 8.
struct Conv2dShape {
  int64_t cin, cout, h, w;
};

struct Conv2dLaunch {
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> local;  // [LX, LY, S]: S input-channel slices per work-group
};

// The kernels' launch contract: LX * LY * S <= 128, S <= 8.
inline constexpr int64_t kConv2dMaxGroup = 128;
inline constexpr int kConv2dMaxSlices = 8;
// Work-items a launch should reach by splitting input channels: on an H100 at
// 64x64, 65536 was best or within a few percent of best for C = 16 .. 256 (a sweep
// of S = 1, 2, 4, 8; docs/textures.md).
inline constexpr int64_t kConv2dWantedItems = 65536;

inline int64_t conv2d_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Input-channel slices per work-group: doubled while the launch stays within
// kConv2dWantedItems work-items and every slice keeps at least one input plane.
inline int conv2d_default_slices(const Conv2dShape& s) {
  const int64_t items = (s.w + 3) / 4 * s.h * (s.cout / 8);
  int slices = 1;
  while (slices < kConv2dMaxSlices && slices * 2 <= s.cin / 4 && items * slices * 2 <= kConv2dWantedItems) {
    slices *= 2;
  }
  return slices;
}

// The launch for local [lx, ly, slices]: grid = [ceil(W/4) rounded up to LX, H
// rounded up to LY, Cout/8 * S].
inline Conv2dLaunch conv2d_launch(const Conv2dShape& s, int64_t lx, int64_t ly, int64_t slices) {
  return {{conv2d_round_up((s.w + 3) / 4, lx), conv2d_round_up(s.h, ly), s.cout / 8 * slices}, {lx, ly, slices}};
}

// The default launch: rows of up to 16 work-items, as many rows as the group
// allows; `slices` 0 lets conv2d_default_slices choose.
inline Conv2dLaunch conv2d_launch(const Conv2dShape& s, int slices = 0) {
  if (slices == 0) slices = conv2d_default_slices(s);
  const int64_t lx = std::min<int64_t>((s.w + 3) / 4, 16);
  const int64_t ly = std::clamp<int64_t>(kConv2dMaxGroup / (lx * slices), 1, s.h);
  return conv2d_launch(s, lx, ly, slices);
}

inline const char* conv2d_kernel_name(Conv2dLayout layout) {
  return layout == Conv2dLayout::kTexture ? "conv2d_texture" : "conv2d_nchw4c";
}

inline std::string conv2d_ints(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// One function `name` of parameters x, w: copies them into the layout's storages,
// runs the convolution `reps` times (straight-line code) and returns y in a buffer.
inline std::string conv2d_function(Conv2dLayout layout, const Conv2dShape& s, const Conv2dLaunch& launch,
                                   std::string_view name, int reps) {
  const int64_t ci4 = s.cin / 4, co4 = s.cout / 4;
  const std::string xshape = conv2d_ints({ci4, s.h, s.w, 4}), wshape = conv2d_ints({co4, s.cin, 3, 3, 4});
  const std::string yshape = conv2d_ints({co4, s.h, s.w, 4});
  auto type = [](const std::vector<int64_t>& shape) {
    return fmt::format("Tensor[({}), float32]", fmt::join(shape, ", "));
  };
  std::vector<std::string> lines;
  auto tensor = [&](const char* v, const std::string& size, const char* dtype, const char* scope,
                    const std::string& shape) {
    lines.push_back(fmt::format(R"({}s = alloc_storage({}, device=0, dtype={}, scope="{}"))", v, size, dtype, scope));
    lines.push_back(fmt::format("{}t = alloc_tensor({}s, 0, {}, float32)", v, v, shape));
  };
  if (layout == Conv2dLayout::kTexture) {
    tensor("x", conv2d_ints({ci4 * s.h, s.w}), "float32", "global.texture", xshape);
    tensor("w", conv2d_ints({co4, s.cin * 9}), "float32", "global.texture-weight", wshape);
    tensor("y", conv2d_ints({co4 * s.h, s.w}), "float32", "global.texture", yshape);
  } else {
    tensor("x", conv2d_ints({ci4 * s.h * s.w * 16}), "uint8", "global", xshape);
    tensor("w", conv2d_ints({co4 * s.cin * 9 * 16}), "uint8", "global", wshape);
    tensor("y", conv2d_ints({co4 * s.h * s.w * 16}), "uint8", "global", yshape);
  }
  lines.push_back("copy_tensor(x, xt)");
  lines.push_back("copy_tensor(w, wt)");
  const std::string call = fmt::format(
      "call_kernel({}, [xt, wt, yt, {}, {}, {}], grid={}, local={})", conv2d_kernel_name(layout), s.cin, s.h, s.w,
      conv2d_ints({launch.grid.begin(), launch.grid.end()}), conv2d_ints({launch.local.begin(), launch.local.end()}));
  for (int i = 0; i < reps; ++i) lines.push_back(call);
  lines.push_back(
      fmt::format(R"(os = alloc_storage([{}], device=0, dtype=uint8, scope="global"))", co4 * s.h * s.w * 16));
  lines.push_back(fmt::format("out = alloc_tensor(os, 0, {}, float32)", yshape));
  lines.push_back("copy_tensor(yt, out)");
  lines.push_back("return out");
  std::string body;
  for (const std::string& line : lines) body += "  " + line + "\n";
  return fmt::format("fn {}(x: {}, w: {}) -> {} {{\n{}}}\n", name, type({ci4, s.h, s.w, 4}),
                     type({co4, s.cin, 3, 3, 4}), type({co4, s.h, s.w, 4}), body);
}

// The kernel unit `conv`: `source` (the text of conv2d_3x3.cl) for the layout.
inline std::string conv2d_kernel_unit(Conv2dLayout layout, std::string_view source) {
  return fmt::format("kernels conv \"\"\"\n{}{}\"\"\"\n",
                     layout == Conv2dLayout::kTexture ? "#define CONV2D_TEXTURE\n" : "", source);
}

// A module of the kernel unit and one function per (name, reps).
inline std::string conv2d_program(Conv2dLayout layout, const Conv2dShape& s, const Conv2dLaunch& launch,
                                  std::string_view source, const std::vector<std::pair<std::string, int>>& functions) {
  std::string text = conv2d_kernel_unit(layout, source);
  for (const auto& [name, reps] : functions) text += "\n" + conv2d_function(layout, s, launch, name, reps);
  return text;
}

}  // namespace stowage::examples
