// Packing instances for the planner benchmark and tests: the planning CSV files
// of benchmarks/data/planning (MiniMalloc's instances and the activations of
// real networks, see its NOTICE.md) and seeded random ones.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "stowage/ir/packing.h"

namespace stowage::bench {

struct NamedInstance {
  std::string name;  // the file name up to its first dot: A, resnet18
  std::vector<ir::PackItem> items;
  std::optional<uint64_t> capacity;  // the number before ".csv" in NAME.CAPACITY.csv
};

// Reads one planning CSV file; the error names the file (and the line).
inline Expected<NamedInstance> read_instance(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorKind::kIo, path.string() + ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  Expected<std::vector<ir::PackItem>> items = ir::read_planning_csv(text.str(), path.string());
  if (!items) return items.error();
  const std::string file = path.filename().string();
  const size_t first_dot = file.find('.'), last_dot = file.rfind('.');
  NamedInstance result{file.substr(0, first_dot), items.take(), std::nullopt};
  if (first_dot < last_dot) {
    const std::string number = file.substr(first_dot + 1, last_dot - first_dot - 1);
    uint64_t capacity = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), capacity);
    if (error == std::errc() && end == number.data() + number.size() && !number.empty()) result.capacity = capacity;
  }
  return result;
}

// The planning CSV files of `dir` in name order (`*.names.csv`, which name the
// tensors of a network's file, left out).
inline Expected<std::vector<NamedInstance>> read_instances(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".csv" && !name.ends_with(".names.csv")) paths.push_back(entry.path());
  }
  if (error) return Error(ErrorKind::kIo, dir.string() + ": " + error.message());
  std::sort(paths.begin(), paths.end());
  std::vector<NamedInstance> result;
  for (const auto& path : paths) {
    Expected<NamedInstance> instance = read_instance(path);
    if (!instance) return instance.error();
    result.push_back(instance.take());
  }
  return result;
}

// A seeded random instance with its own generator (splitmix64) and integer
// arithmetic only, so the same seed gives the same instance everywhere.
// Births are uniform over [0, n); lifetimes and sizes are roughly log-uniform
// (a power of two picked uniformly, then a value uniform up to the next one):
// lifetimes in [1, 255] steps, sizes in [64 B, 1 MiB), multiples of 64.
inline std::vector<ir::PackItem> random_instance(uint32_t n, uint64_t seed) {
  uint64_t state = seed;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  auto log_uniform = [&](unsigned octaves) {
    const uint64_t base = uint64_t{1} << (next() % octaves);
    return base + next() % base;
  };
  std::vector<ir::PackItem> items;
  items.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t lower = static_cast<int64_t>(next() % n);
    const int64_t lifetime = static_cast<int64_t>(log_uniform(8));
    items.push_back({std::to_string(i), lower, lower + lifetime, 64 * log_uniform(14), 1});
  }
  return items;
}

}  // namespace stowage::bench
