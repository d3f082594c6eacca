// The offset planner on MiniMalloc's eleven instances, real networks and random
// instances, against its lower bound and planners without offset packing, as a
// printed table.
//
//   planner [--data DIR] [--only NAME,...] [--random N,...] [--seed S]
//           [--time-limit S] [--minimise] [--window LO,HI]
//
// Instances: the planning CSV files in DIR (default benchmarks/data/planning,
// relative to the working directory; a file is named by its first
// dot-separated part: A, example), those of DIR/nets (resnet18, resnet50,
// mobilenetv2), and random instances of the given sizes (default
// 1000,10000,100000), named randomN. --only keeps the named ones. A file whose
// name gives a capacity (A.1048576.csv: 1048576 bytes) is packed within it,
// stopping at the first packing that fits, as `stowc plan-csv F --capacity N`
// does; with --minimise, and for the others, the height is minimised. Each
// instance has the time limit (default 10 s, as plan-csv). The times are the
// packer's alone, measured in this run: wall-clock ("time ms", what the time
// limit counts) and the processor time of all threads ("cpu ms"; the greedy
// start of a group of 16,384 items or more runs on two threads). --window keeps,
// of every instance, the buffers alive at some moment of [LO, HI) (whole), to
// study a part of an instance on its own.
#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planning_instances.h"
#include "stowage/ir/packing.h"

namespace {

using stowage::bench::NamedInstance;

struct Args {
  std::string data = "benchmarks/data/planning";
  std::set<std::string> only;
  std::vector<uint32_t> random_sizes = {1000, 10000, 100000};
  uint64_t seed = 1;
  bool minimise = false;
  std::optional<std::pair<int64_t, int64_t>> window;
  double time_limit_seconds = stowage::ir::PackOptions::kDefaultTimeLimitSeconds;
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
    if (flag == "--minimise") {
      args.minimise = true;
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
    } else if (flag == "--window") {
      const std::vector<std::string> bounds = split(value);
      int64_t lo = 0, hi = 0;
      ok = bounds.size() == 2 && parse(bounds[0], lo) && parse(bounds[1], hi) && lo < hi;
      if (ok) args.window = {lo, hi};
    } else if (flag == "--time-limit") {
      ok = parse(value, args.time_limit_seconds) && args.time_limit_seconds >= 0;
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

// The processor time of all the process's threads: beside the wall time, a
// figure other work on a shared machine disturbs less.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void print_row(const NamedInstance& instance, const Args& args) {
  stowage::ir::PackOptions options;
  options.time_limit_seconds = args.time_limit_seconds;
  if (!args.minimise) options.capacity = instance.capacity;
  const double cpu_start = cpu_seconds();
  auto result = stowage::ir::pack(instance.items, options);
  const double cpu = cpu_seconds() - cpu_start;
  if (!result) {
    std::printf("| %s | error: %s |\n", instance.name.c_str(), result.error().message().c_str());
    return;
  }
  const double ratio = result->lower_bound == 0 ? 1.0 : double(result->height) / double(result->lower_bound);
  std::string capacity = "-";
  if (options.capacity) capacity = std::to_string(*options.capacity) + (result->fits ? " yes" : " **no**");
  std::printf("| %s | %zu | %s | %llu | %llu | %.4f%s | %.1f | %.1f | %llu | %llu |\n", instance.name.c_str(),
              instance.items.size(), capacity.c_str(), (unsigned long long)result->lower_bound,
              (unsigned long long)result->height, ratio, result->proven_optimal ? " (opt)" : "", result->seconds * 1e3,
              cpu * 1e3,
              (unsigned long long)stowage::ir::reuse_only_total(instance.items),
              (unsigned long long)stowage::ir::naive_total(instance.items));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) return 2;
  std::vector<NamedInstance> instances;
  for (const std::string& dir : {args.data, args.data + "/nets"}) {
    auto read = stowage::bench::read_instances(dir);
    if (!read) {
      std::fprintf(stderr, "error: %s\n", read.error().message().c_str());
      return 2;
    }
    for (NamedInstance& instance : *read) instances.push_back(std::move(instance));
  }
  for (uint32_t n : args.random_sizes)
    instances.push_back({"random" + std::to_string(n), stowage::bench::random_instance(n, args.seed), std::nullopt});

  std::printf("| instance | buffers | capacity, fits | lower bound | bytes (height) | height/LB | time ms | cpu ms | "
              "reuse-only total | naive total |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (NamedInstance& instance : instances) {
    if (!args.only.empty() && !args.only.count(instance.name)) continue;
    if (args.window) {
      std::erase_if(instance.items, [&](const stowage::ir::PackItem& item) {
        return !(item.lower < args.window->second && args.window->first < item.upper);
      });
    }
    print_row(instance, args);
  }
  return 0;
}
