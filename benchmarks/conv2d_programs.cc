// Writes the conv2d benchmark programs for conv2d_run: per C, one bytecode file
// with the convolution on textures and one with it on buffers (batch 1, C in =
// C out, H x W, 3x3, pad 1, float32; kernels from examples/kernels/). Each file
// has two functions of the same parameters (x [C/4, H, W, 4], w [C/4, C, 3, 3, 4])
// and result (y [C/4, H, W, 4], copied into a buffer):
//   conv_r0   copies x and w in, runs no convolution, copies y out;
//   conv_rN   the same with N convolutions back to back (straight-line code),
// so that (t(conv_rN) - t(conv_r0)) / N is the time of one convolution.
//
//   conv2d_programs --out DIR [--channels 16,32,64,128,256] [--size 64] [--reps 20]
//                   [--slices S] [--kernels examples/kernels] [--target opencl]
//
// Every tensor sits at offset 0 of its own storage and the largest image (C = 256:
// 4096 x 64 activations, 64 x 2304 weights) is within every target's limits, so the
// files load on any OpenCL device with images, NVIDIA's included.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "stowage/ir/compiler.h"
#include "stowage/bytecode/file.h"

namespace {

using namespace stowage;

struct Options {
  std::string out;
  std::vector<int64_t> channels = {16, 32, 64, 128, 256};
  int64_t size = 64;
  int reps = 20;
  int slices = 0;  // 0: default_slices decides
  std::string kernels = "examples/kernels";
  std::string target = "opencl";
};

enum class Variant { kTexture, kBuffer };

// The kernels' launch contract (examples/kernels/conv2d_*.cl): local = [LX, LY, S]
// with LX * LY * S <= 128, S <= 8; grid = [ceil(W/4) rounded up to LX, H rounded up
// to LY, Cout/8 * S].
constexpr int64_t kConvMaxGroup = 128;
constexpr int kConvMaxSlices = 8;
// Work-items a launch should reach by splitting input channels: on an H100 at
// 64x64, 65536 was best or within a few percent of best for C = 16 .. 256 (a sweep
// of S = 1, 2, 4, 8; docs/textures.md).
constexpr int64_t kConvWantedItems = 65536;

struct ConvLaunch {
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> local;
};

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Input-channel slices per work-group: doubled while the launch stays within
// kConvWantedItems work-items and every slice keeps at least one input plane.
int default_slices(int64_t c, int64_t h, int64_t w) {
  const int64_t items = (w + 3) / 4 * h * (c / 8);
  int slices = 1;
  while (slices < kConvMaxSlices && slices * 2 <= c / 4 && items * slices * 2 <= kConvWantedItems) slices *= 2;
  return slices;
}

ConvLaunch conv_launch(int64_t c, int64_t h, int64_t w, int slices) {
  if (slices == 0) slices = default_slices(c, h, w);
  const int64_t across = (w + 3) / 4;
  const int64_t lx = std::min<int64_t>(across, 16);
  const int64_t ly = std::clamp<int64_t>(kConvMaxGroup / (lx * slices), 1, h);
  return {{round_up(across, lx), round_up(h, ly), c / 8 * slices}, {lx, ly, slices}};
}

const char* variant_name(Variant v) { return v == Variant::kTexture ? "texture" : "buffer"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw StowageError(Error(ErrorKind::kIo, fmt::format("cannot read {}", path)));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ints(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// The storages and tensors x, w, y of one variant, at storage level.
std::vector<std::string> conv_storages(Variant variant, int64_t c, int64_t h, int64_t w) {
  const int64_t c4 = c / 4;
  const std::string act = ints({c4, h, w, 4}), wgt = ints({c4, c, 3, 3, 4});
  std::vector<std::string> lines;
  auto tensor = [&](const std::string& name, const std::string& size, const char* dtype, const char* scope,
                    const std::string& shape) {
    lines.push_back(
        fmt::format(R"({}s = alloc_storage({}, device=0, dtype={}, scope="{}"))", name, size, dtype, scope));
    lines.push_back(fmt::format("{}t = alloc_tensor({}s, 0, {}, float32)", name, name, shape));
  };
  if (variant == Variant::kTexture) {
    tensor("x", ints({c4 * h, w}), "float32", "global.texture", act);
    tensor("w", ints({c4, c * 9}), "float32", "global.texture-weight", wgt);
    tensor("y", ints({c4 * h, w}), "float32", "global.texture", act);
  } else {
    tensor("x", ints({c4 * h * w * 16}), "uint8", "global", act);
    tensor("w", ints({c4 * c * 9 * 16}), "uint8", "global", wgt);
    tensor("y", ints({c4 * h * w * 16}), "uint8", "global", act);
  }
  return lines;
}

std::string conv_function(Variant variant, int64_t c, int64_t h, int64_t w, int reps, const ConvLaunch& launch) {
  const int64_t c4 = c / 4;
  const std::string act_type = fmt::format("Tensor[({}, {}, {}, 4), float32]", c4, h, w);
  const std::string wgt_type = fmt::format("Tensor[({}, {}, 3, 3, 4), float32]", c4, c);
  std::vector<std::string> lines = conv_storages(variant, c, h, w);
  lines.push_back("copy_tensor(x, xt)");
  lines.push_back("copy_tensor(w, wt)");
  const std::string call =
      fmt::format("call_kernel({}, [xt, wt, yt, {}, {}, {}], grid={}, local={})",
                  variant == Variant::kTexture ? "conv2d_texture" : "conv2d_nchw4c", c, h, w,
                  ints({launch.grid.begin(), launch.grid.end()}), ints({launch.local.begin(), launch.local.end()}));
  for (int i = 0; i < reps; ++i) lines.push_back(call);
  lines.push_back(fmt::format(R"(os = alloc_storage([{}], device=0, dtype=uint8, scope="global"))", c4 * h * w * 16));
  lines.push_back(fmt::format("out = alloc_tensor(os, 0, {}, float32)", ints({c4, h, w, 4})));
  lines.push_back("copy_tensor(yt, out)");
  lines.push_back("return out");
  std::string body;
  for (const auto& line : lines) body += "  " + line + "\n";
  return fmt::format("fn conv_r{}(x: {}, w: {}) -> {} {{\n{}}}\n", reps, act_type, wgt_type, act_type, body);
}

std::string conv_program(Variant variant, int64_t c, int64_t size, int reps, const std::string& source,
                         const ConvLaunch& launch) {
  return fmt::format("kernels conv \"\"\"\n{}\"\"\"\n\n{}\n{}", source,
                     conv_function(variant, c, size, size, 0, launch),
                     conv_function(variant, c, size, size, reps, launch));
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');) out.push_back(std::stoll(item));
  return out;
}

void usage_error(const std::string& what) {
  fmt::print(stderr,
             "conv2d_programs: {}\nusage: conv2d_programs --out DIR [--channels 16,32,64,128,256] [--size 64] "
             "[--reps 20] [--slices S] [--kernels examples/kernels] [--target opencl]\n",
             what);
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    try {
      if (arg == "--out") opt.out = value();
      else if (arg == "--channels") opt.channels = parse_list(value());
      else if (arg == "--size") opt.size = std::stoll(value());
      else if (arg == "--reps") opt.reps = std::stoi(value());
      else if (arg == "--slices") opt.slices = std::stoi(value());
      else if (arg == "--kernels") opt.kernels = value();
      else if (arg == "--target") opt.target = value();
      else usage_error(fmt::format("unknown argument '{}'", arg));
    } catch (const std::logic_error&) {
      usage_error(fmt::format("{} needs a number", arg));
    }
  }
  if (opt.out.empty()) usage_error("--out is required");
  if (opt.size < 1 || opt.size > 4096) usage_error("--size must be in [1, 4096]");
  if (opt.reps < 1 || opt.reps > 1000) usage_error("--reps must be in [1, 1000]");
  if (opt.slices < 0 || opt.slices > kConvMaxSlices) usage_error("--slices must be in [0, 8]");
  for (int64_t c : opt.channels)
    if (c < 8 || c > 1024 || c % 8 != 0) usage_error(fmt::format("C = {} is not a multiple of 8 in [8, 1024]", c));
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_options(argc, argv);
  try {
    TargetDesc target = TargetDesc::load(opt.target).value_or_throw();
    const std::string texture_source = read_file(opt.kernels + "/conv2d_texture.cl");
    const std::string buffer_source = read_file(opt.kernels + "/conv2d_nchw4c.cl");
    std::filesystem::create_directories(opt.out);
    for (int64_t c : opt.channels) {
      const ConvLaunch launch = conv_launch(c, opt.size, opt.size, opt.slices);
      for (Variant variant : {Variant::kTexture, Variant::kBuffer}) {
        const std::string name = fmt::format("{}_c{}", variant_name(variant), c);
        const std::string text = conv_program(variant, c, opt.size, opt.reps,
                                              variant == Variant::kTexture ? texture_source : buffer_source, launch);
        auto compiled = ir::compile_text(text, name + ".stir", target).value_or_throw();
        const std::string path = opt.out + "/" + name + ".stw";
        write_bytecode_file(compiled.executable, path).throw_if_error();
        fmt::print("wrote {}: C = {}, {}x{}, conv_r0 and conv_r{}, grid [{}], local [{}]\n", path, c, opt.size,
                   opt.size, opt.reps, fmt::join(launch.grid, ", "), fmt::join(launch.local, ", "));
      }
    }
  } catch (const StowageError& e) {
    fmt::print(stderr, "conv2d_programs: {}\n", e.what());
    return 1;
  }
  return 0;
}
