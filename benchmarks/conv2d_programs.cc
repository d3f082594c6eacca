// Writes the conv2d benchmark programs for conv2d_run: per C, one bytecode file
// with the convolution on textures and one with it on buffers (batch 1, C in =
// C out, H x W, 3x3, pad 1, float32; the programs of examples/textures/conv2d_program.h
// around examples/kernels/conv2d_3x3.cl). Each file has two functions of the same
// parameters (x [C/4, H, W, 4], w [C/4, C, 3, 3, 4]) and result (y [C/4, H, W, 4],
// copied into a buffer):
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

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "conv2d_program.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"

namespace {

using namespace stowage;
using namespace stowage::examples;

struct Options {
  std::string out;
  std::vector<int64_t> channels = {16, 32, 64, 128, 256};
  int64_t size = 64;
  int reps = 20;
  int slices = 0;  // 0: conv2d_default_slices decides
  std::string kernels = "examples/kernels";
  std::string target = "opencl";
};

const char* variant_name(Conv2dLayout v) { return v == Conv2dLayout::kTexture ? "texture" : "buffer"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw StowageError(Error(ErrorKind::kIo, fmt::format("cannot read {}", path)));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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
  if (opt.slices < 0 || opt.slices > kConv2dMaxSlices) usage_error("--slices must be in [0, 8]");
  for (int64_t c : opt.channels)
    if (c < 8 || c > 1024 || c % 8 != 0) usage_error(fmt::format("C = {} is not a multiple of 8 in [8, 1024]", c));
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_options(argc, argv);
  try {
    TargetDesc target = TargetDesc::load(opt.target).value_or_throw();
    const std::string source = read_file(opt.kernels + "/conv2d_3x3.cl");
    std::filesystem::create_directories(opt.out);
    for (int64_t c : opt.channels) {
      const Conv2dShape shape{c, c, opt.size, opt.size};
      const Conv2dLaunch launch = conv2d_launch(shape, opt.slices);
      for (Conv2dLayout variant : {Conv2dLayout::kTexture, Conv2dLayout::kBuffer}) {
        const std::string name = fmt::format("{}_c{}", variant_name(variant), c);
        const std::string text = conv2d_program(variant, shape, launch, source,
                                                {{"conv_r0", 0}, {fmt::format("conv_r{}", opt.reps), opt.reps}});
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
