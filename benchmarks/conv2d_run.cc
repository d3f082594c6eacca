// Times the conv2d programs that conv2d_programs wrote (texture_cC.stw,
// buffer_cC.stw in one folder) on one device and prints a Markdown table, beside
// cuDNN's figures when given the table benchmarks/cudnn_conv2d.py printed in the
// same sitting (benchmarks/conv2d_vs_cudnn.sh runs both). Runtime only: no
// compiler, no libclang.
//
//   conv2d_run DIR [--device SPEC] [--invocations 10] [--rounds 5] [--cudnn FILE]
//
// Per file: random x and w (the same for both variants of a C), two warm-up
// invocations of each function, then `rounds` times `invocations` invocations
// followed by synchronize(); the median round gives t(f) per invocation. One
// convolution takes (t(conv_rN) - t(conv_r0)) / N: the copies in and out cancel.
// GFLOP/s = 2 * C * C * H * W * 9 / time. The outputs of conv_rN of both variants
// are compared with each other (max abs diff) and, at 4096 sampled positions,
// with a float64 convolution on the host (max |y - ref| / max |ref|).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "stowage/bytecode/file.h"
#include "stowage/vm/vm.h"

namespace {

using namespace stowage;

struct Options {
  std::string dir;
  std::string device;
  std::string cudnn;  // the table cudnn_conv2d.py printed: "| C | us | GFLOP/s |" rows, 64x64
  int invocations = 10;
  int rounds = 5;
};

struct ConvInputs {
  int64_t c = 0, h = 0, w = 0;
  std::vector<float> x, weights;  // [C/4, H, W, 4], [C/4, C, 3, 3, 4]
};

struct VariantResult {
  double conv_us = 0;
  std::vector<float> y;  // conv_rN's result
  double error = 0;      // sampled_error of y
};

// x in [-1, 1]; w scaled so that outputs stay near 1 whatever C.
ConvInputs random_inputs(int64_t c, int64_t h, int64_t w) {
  ConvInputs in{c, h, w, std::vector<float>(c * h * w), std::vector<float>(c * c * 9)};
  std::mt19937 rng(static_cast<uint32_t>(c * 7919 + h));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(9 * c));
  for (float& v : in.x) v = dist(rng);
  for (float& v : in.weights) v = dist(rng) * scale;
  return in;
}

vm::Value host_value(std::vector<int64_t> shape, const std::vector<float>& data) {
  return vm::Value::from(vm::host_tensor(std::move(shape), DType::kFloat32, std::as_bytes(std::span(data))));
}

// The function conv_rN with the largest N.
std::optional<std::pair<std::string, int>> repeated_function(const Executable& exe) {
  std::optional<std::pair<std::string, int>> best;
  static const std::regex name(R"(conv_r([0-9]+))");
  for (const Function& f : exe.functions) {
    std::smatch m;
    if (!std::regex_match(f.name, m, name)) continue;
    int n = std::stoi(m[1]);
    if (n > 0 && (!best || n > best->second)) best = {{f.name, n}};
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Median over rounds of the time per invocation, in microseconds.
double time_function(vm::VirtualMachine& machine, const std::string& function, const std::vector<vm::Value>& args,
                     const Options& opt) {
  for (int i = 0; i < 2; ++i) machine.invoke(function, args);
  machine.synchronize();
  std::vector<double> rounds;
  for (int r = 0; r < opt.rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < opt.invocations; ++i) machine.invoke(function, args);
    machine.synchronize();
    std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    rounds.push_back(took.count() / opt.invocations);
  }
  return median(rounds);
}

double sampled_error(const ConvInputs& in, const std::vector<float>& y);

struct DeviceSeen {
  std::string summary;
  std::string name;
};

VariantResult run_variant(const std::string& path, const ConvInputs& in, const Options& opt, DeviceSeen& device) {
  auto exe = std::make_shared<const Executable>(read_bytecode_file(path).value_or_throw());
  auto repeated = repeated_function(*exe);
  if (exe->find_function("conv_r0") < 0 || !repeated) {
    throw StowageError(ErrorKind::kInvalidInput, fmt::format("{} lacks conv_r0 or conv_rN (N > 0)", path));
  }
  auto machine = vm::VirtualMachine::create(exe, {.device = opt.device}).value_or_throw();
  device = {machine->device().summary(), machine->device().name};
  const int64_t c4 = in.c / 4;
  std::vector<vm::Value> args = {host_value({c4, in.h, in.w, 4}, in.x), host_value({c4, in.c, 3, 3, 4}, in.weights)};
  VariantResult result;
  result.y = machine->invoke(repeated->first, args).as_tensor().to_vector<float>();
  result.error = sampled_error(in, result.y);
  const double t0 = time_function(*machine, "conv_r0", args, opt);
  const double tn = time_function(*machine, repeated->first, args, opt);
  result.conv_us = (tn - t0) / repeated->second;
  return result;
}

// max |y - ref| / max |ref| over sampled output positions, ref in float64.
double sampled_error(const ConvInputs& in, const std::vector<float>& y) {
  const int64_t c = in.c, h = in.h, w = in.w;
  auto x_at = [&](int64_t ci, int64_t iy, int64_t ix) { return in.x[((ci / 4 * h + iy) * w + ix) * 4 + ci % 4]; };
  auto w_at = [&](int64_t co, int64_t ci, int64_t ky, int64_t kx) {
    return in.weights[(((co / 4 * c + ci) * 3 + ky) * 3 + kx) * 4 + co % 4];
  };
  std::mt19937 rng(17);
  double worst = 0, largest = 0;
  for (int s = 0; s < 4096; ++s) {
    const int64_t co = rng() % c, oy = rng() % h, ox = rng() % w;
    double ref = 0;
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx) {
          const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
          if (iy >= 0 && iy < h && ix >= 0 && ix < w) ref += double(x_at(ci, iy, ix)) * w_at(co, ci, ky, kx);
        }
    const double got = y[((co / 4 * h + oy) * w + ox) * 4 + co % 4];
    worst = std::max(worst, std::isnan(got) ? INFINITY : std::fabs(got - ref));
    largest = std::max(largest, std::fabs(ref));
  }
  return largest > 0 ? worst / largest : worst;
}

// C and H, W of the files in `dir`, from the parameter x of texture_cC.stw.
std::map<int64_t, std::array<int64_t, 2>> find_sizes(const std::string& dir) {
  std::map<int64_t, std::array<int64_t, 2>> sizes;
  static const std::regex name(R"((texture|buffer)_c([0-9]+)\.stw)");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    const int64_t c = std::stoll(m[2]);
    if (sizes.count(c)) continue;
    Executable exe = read_bytecode_file(entry.path().string()).value_or_throw();
    const int64_t f = exe.find_function("conv_r0");
    if (f < 0 || exe.functions[f].params.empty() || exe.functions[f].params[0].shape.size() != 4) {
      throw StowageError(ErrorKind::kInvalidInput, fmt::format("{}: no conv_r0(x [C/4, H, W, 4], ...)", file));
    }
    const auto& shape = exe.functions[f].params[0].shape;
    sizes[c] = {shape[1], shape[2]};
  }
  return sizes;
}

std::string fixed(std::optional<double> v, int digits) {
  return v ? fmt::format("{:.{}f}", *v, digits) : std::string("-");
}

void usage_error(const std::string& what) {
  fmt::print(stderr, "conv2d_run: {}\nusage: conv2d_run DIR [--device SPEC] [--invocations 10] [--rounds 5] "
             "[--cudnn FILE]\n", what);
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto number = [&]() {
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", arg));
      try {
        return std::stoi(argv[++i]);
      } catch (const std::logic_error&) {
        usage_error(fmt::format("{} needs a number", arg));
      }
      return 0;
    };
    if (arg == "--device") {
      if (i + 1 >= argc) usage_error("--device needs a value");
      opt.device = argv[++i];
    } else if (arg == "--cudnn") {
      if (i + 1 >= argc) usage_error("--cudnn needs a file");
      opt.cudnn = argv[++i];
    } else if (arg == "--invocations") {
      opt.invocations = number();
    } else if (arg == "--rounds") {
      opt.rounds = number();
    } else if (!arg.starts_with("--") && opt.dir.empty()) {
      opt.dir = arg;
    } else {
      usage_error(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (opt.dir.empty()) usage_error("the folder of .stw files is required");
  if (opt.invocations < 1 || opt.rounds < 1) usage_error("--invocations and --rounds must be at least 1");
  return opt;
}

// GFLOP/s per C from the Markdown table benchmarks/cudnn_conv2d.py prints.
std::map<int64_t, double> read_cudnn(const std::string& path) {
  std::map<int64_t, double> figures;
  if (path.empty()) return figures;
  std::ifstream in(path);
  if (!in) usage_error(fmt::format("cannot read '{}'", path));
  const std::regex row(R"(^\|\s*(\d+)\s*\|\s*[0-9.]+\s*\|\s*([0-9.]+)\s*\|\s*$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, row)) figures[std::stoll(m[1])] = std::stod(m[2]);
  }
  if (figures.empty()) usage_error(fmt::format("'{}' holds no row '| C | us | GFLOP/s |'", path));
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_options(argc, argv);
  try {
    auto sizes = find_sizes(opt.dir);
    if (sizes.empty()) usage_error(fmt::format("no texture_cC.stw or buffer_cC.stw in {}", opt.dir));
    const std::map<int64_t, double> cudnn_gflops = read_cudnn(opt.cudnn);
    DeviceSeen device;
    std::vector<std::string> rows;
    for (const auto& [c, hw] : sizes) {
      const ConvInputs in = random_inputs(c, hw[0], hw[1]);
      const double gflop = 2.0 * c * c * hw[0] * hw[1] * 9 / 1e9;
      std::map<std::string, VariantResult> results;
      for (const char* variant : {"texture", "buffer"}) {
        const std::string path = fmt::format("{}/{}_c{}.stw", opt.dir, variant, c);
        if (!std::filesystem::exists(path)) continue;
        results[variant] = run_variant(path, in, opt, device);
        fmt::print(stderr, "C = {}: {} {:.1f} us per convolution, error {:.2e} against the host\n", c, variant,
                   results[variant].conv_us, results[variant].error);
      }
      auto us = [&](const char* v) -> std::optional<double> {
        if (!results.count(v)) return std::nullopt;
        return results[v].conv_us;
      };
      auto gflops = [&](const char* v) -> std::optional<double> {
        if (!us(v) || *us(v) <= 0) return std::nullopt;
        return gflop / (*us(v) * 1e-6);
      };
      std::optional<double> cudnn;
      if (auto it = cudnn_gflops.find(c); it != cudnn_gflops.end() && hw[0] == 64 && hw[1] == 64) cudnn = it->second;
      auto ratio = [&](const char* v) -> std::optional<double> {
        if (!gflops(v) || !cudnn) return std::nullopt;
        return *gflops(v) / *cudnn;
      };
      std::string diff = "-", error = "-";
      if (results.count("texture") && results.count("buffer")) {
        double d = 0;
        const auto& a = results["texture"].y;
        const auto& b = results["buffer"].y;
        for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
        diff = fmt::format("{:.2e}", d);
      }
      double worst = 0;
      for (const auto& [name, r] : results) worst = std::max(worst, r.error);
      error = fmt::format("{:.2e}", worst);
      rows.push_back(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |", c, fixed(us("texture"), 1),
                                 fixed(gflops("texture"), 0), fixed(us("buffer"), 1), fixed(gflops("buffer"), 0),
                                 fixed(cudnn, 0), fixed(ratio("texture"), 2), fixed(ratio("buffer"), 2), diff, error));
    }
    fmt::print("device: {}\n\n", device.summary);
    fmt::print(
        "| C | texture us | texture GFLOP/s | buffer us | buffer GFLOP/s | cuDNN GFLOP/s | texture/cuDNN | "
        "buffer/cuDNN | max abs diff texture vs buffer | max error vs host (sampled) |\n");
    fmt::print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& row : rows) fmt::print("{}\n", row);
  } catch (const std::exception& e) {  // StowageError, and std::filesystem's errors
    fmt::print(stderr, "conv2d_run: {}\n", e.what());
    return 1;
  }
  return 0;
}
