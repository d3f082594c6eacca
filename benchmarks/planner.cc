// The offset planner against its lower bound and against planners without
// offset packing, as a printed table.
//
//   planner [--data DIR] [--only NAME,...] [--random N,...] [--seed S]
//           [--max-steps N] [--time-limit S] [--fit]
//
// Instances: the planning CSV files in DIR (default benchmarks/data/planning,
// relative to the working directory), the activations of resnet18, resnet50
// and mobilenetv2 (see planning_instances.h), and random instances of the
// given sizes (default 1000,10000,100000), named randomN. --only keeps the
// named ones (a CSV file is named by its first dot-separated part: A, example).
// The height is minimised (no capacity), except with --fit, where each CSV
// instance is packed within the capacity its file name gives (A.1048576.csv:
// 1048576 bytes) and the search stops at the first packing that fits. The
// time is the packer's alone.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planning_instances.h"
#include "stowage/ir/packing.h"

namespace {

using stowage::ir::PackItem;

struct Args {
  std::string data = "benchmarks/data/planning";
  std::set<std::string> only;
  std::vector<uint32_t> random_sizes = {1000, 10000, 100000};
  uint64_t seed = 1;
  bool fit = false;
  stowage::ir::PackOptions options;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

template <typename T>
bool parse(const std::string& text, T& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool parse_args(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--fit") {
      args.fit = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    bool ok = true;
    if (flag == "--data") {
      args.data = value;
    } else if (flag == "--only") {
      for (const std::string& name : split(value)) args.only.insert(name);
    } else if (flag == "--random") {
      args.random_sizes.clear();
      for (const std::string& n : split(value)) {
        uint32_t size = 0;
        ok = ok && parse(n, size);
        args.random_sizes.push_back(size);
      }
    } else if (flag == "--seed") {
      ok = parse(value, args.seed);
    } else if (flag == "--max-steps") {
      ok = parse(value, args.options.max_steps);
    } else if (flag == "--time-limit") {
      ok = parse(value, args.options.time_limit_seconds);
    } else {
      std::fprintf(stderr, "error: unknown option %s\n", flag.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "error: %s: bad value '%s'\n", flag.c_str(), value.c_str());
      return false;
    }
  }
  return true;
}

struct Instance {
  std::string name;
  std::vector<PackItem> items;
  std::optional<uint64_t> capacity;  // from the file name
};

std::vector<Instance> csv_instances(const std::string& dir) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (entry.path().extension() == ".csv") paths.push_back(entry.path());
  if (error) std::fprintf(stderr, "warning: %s: %s\n", dir.c_str(), error.message().c_str());
  std::sort(paths.begin(), paths.end());
  std::vector<Instance> result;
  for (const auto& path : paths) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto items = stowage::ir::read_planning_csv(text.str(), path.string());
    if (!items) {
      std::fprintf(stderr, "warning: %s\n", items.error().message().c_str());
      continue;
    }
    const std::string file = path.filename().string();
    const size_t first_dot = file.find('.'), last_dot = file.rfind('.');
    uint64_t capacity = 0;
    std::optional<uint64_t> named;
    if (first_dot < last_dot && parse(file.substr(first_dot + 1, last_dot - first_dot - 1), capacity)) named = capacity;
    result.push_back({file.substr(0, first_dot), items.take(), named});
  }
  return result;
}

void print_row(const Instance& instance, stowage::ir::PackOptions options, bool fit) {
  if (fit) options.capacity = instance.capacity;
  auto result = stowage::ir::pack(instance.items, options);
  if (!result) {
    std::printf("| %s | error: %s |\n", instance.name.c_str(), result.error().message().c_str());
    return;
  }
  const double ratio = result->lower_bound == 0 ? 1.0 : double(result->height) / double(result->lower_bound);
  std::string fits = "-";
  if (options.capacity) fits = std::to_string(*options.capacity) + (result->fits ? " yes" : " no");
  std::printf("| %s | %zu | %llu | %llu | %.4f%s | %llu | %llu | %.1f | %llu | %s |\n", instance.name.c_str(),
              instance.items.size(), (unsigned long long)result->lower_bound, (unsigned long long)result->height,
              ratio, result->proven_optimal ? " (opt)" : "",
              (unsigned long long)stowage::ir::reuse_only_total(instance.items),
              (unsigned long long)stowage::ir::naive_total(instance.items), result->seconds * 1e3,
              (unsigned long long)result->steps, fits.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) return 2;
  std::vector<Instance> instances = csv_instances(args.data);
  instances.push_back({"resnet18", stowage::bench::resnet_activations(18), std::nullopt});
  instances.push_back({"resnet50", stowage::bench::resnet_activations(50), std::nullopt});
  instances.push_back({"mobilenetv2", stowage::bench::mobilenet_v2_activations(), std::nullopt});
  for (uint32_t n : args.random_sizes)
    instances.push_back({"random" + std::to_string(n), stowage::bench::random_instance(n, args.seed), std::nullopt});

  std::printf("| instance | buffers | lower bound | planned height | height/LB | reuse-only total | naive total | "
              "time ms | steps | capacity, fits |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Instance& instance : instances)
    if (args.only.empty() || args.only.count(instance.name)) print_row(instance, args.options, args.fit);
  return 0;
}
