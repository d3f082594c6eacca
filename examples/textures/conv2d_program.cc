// Prints a conv2d example program (text IR) of examples/textures/conv2d_program.h:
//
//   conv2d_program VARIANT C H W REPS [SLICES] [--kernels DIR] > conv.stir
//   VARIANT: texture | buffer; C: input and output channels (a multiple of 8);
//   REPS: how many times the convolution runs; SLICES: input-channel slices per
//   work-group (default: chosen from the size); DIR: where conv2d_3x3.cl is
//   (default examples/kernels).
//
// examples/textures/conv2d_texture.stir and conv2d_buffer.stir are
// `conv2d_program texture 8 16 16 1` and `conv2d_program buffer 8 16 16 1`.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "conv2d_program.h"

namespace {

using namespace stowage::examples;

constexpr const char* kUsage = "usage: conv2d_program texture|buffer C H W REPS [SLICES] [--kernels DIR]";

bool parse_int(std::string_view text, int64_t lo, int64_t hi, int64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && out >= lo && out <= hi;
}

int fail(const std::string& message) {
  fmt::print(stderr, "conv2d_program: {}\n{}\n", message, kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> positional;
  std::string kernels = "examples/kernels";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--kernels") {
      if (i + 1 >= argc) return fail("--kernels needs a folder");
      kernels = argv[++i];
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() < 5 || positional.size() > 6) return fail("expected 5 or 6 arguments");
  if (positional[0] != "texture" && positional[0] != "buffer") {
    return fail(fmt::format("variant '{}' is neither texture nor buffer", positional[0]));
  }
  const Conv2dLayout layout = positional[0] == "texture" ? Conv2dLayout::kTexture : Conv2dLayout::kBuffer;
  int64_t c = 0, h = 0, w = 0, reps = 0, slices = 0;
  if (!parse_int(positional[1], 8, 1024, c) || c % 8 != 0) return fail("C must be a multiple of 8 in [8, 1024]");
  if (!parse_int(positional[2], 1, 4096, h)) return fail("H must be in [1, 4096]");
  if (!parse_int(positional[3], 1, 4096, w)) return fail("W must be in [1, 4096]");
  if (!parse_int(positional[4], 0, 1000, reps)) return fail("REPS must be in [0, 1000]");
  if (positional.size() == 6 && !parse_int(positional[5], 1, kConv2dMaxSlices, slices)) {
    return fail(fmt::format("SLICES must be in [1, {}]", kConv2dMaxSlices));
  }
  const std::string path = kernels + "/conv2d_3x3.cl";
  std::ifstream in(path);
  if (!in) return fail(fmt::format("cannot read {}", path));
  std::stringstream source;
  source << in.rdbuf();
  const Conv2dShape shape{c, c, h, w};
  const Conv2dLaunch launch = conv2d_launch(shape, static_cast<int>(slices));
  fmt::print("{}", conv2d_program(layout, shape, launch, source.str(), {{"main", static_cast<int>(reps)}}));
  return 0;
}
