#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "stowage/ir/planner.h"

namespace stowage::ir {

std::string format_memory_report(const MemoryReport& report) {
  std::string out = fmt::format("{:<12} {:<18} {:>7} {:>12} {:>12} {:>9} {:>12} {:>12} {:>7} {:>9}\n", "function",
                                "scope", "tensors", "planned", "lower bound", "planned/lb", "reuse-only", "naive",
                                "spilled", "time ms");
  for (const auto& s : report.scopes) {
    double ratio = s.lower_bound == 0 ? 1.0 : static_cast<double>(s.planned_bytes) / static_cast<double>(s.lower_bound);
    out += fmt::format("{:<12} {:<18} {:>7} {:>12} {:>12} {:>9.4f} {:>12} {:>12} {:>7} {:>9.2f}\n", s.function, s.scope,
                       s.tensors, s.planned_bytes, s.lower_bound, ratio, s.reuse_only_bytes, s.naive_bytes, s.spilled,
                       s.seconds * 1e3);
  }
  for (const auto& s : report.scopes) {
    if (s.images == 0) continue;
    out += fmt::format("{} {}: {} image{} for {} tensors, {} pixels planned, {} if each had its own\n", s.function,
                       s.scope, s.images, s.images == 1 ? "" : "s", s.tensors, s.planned_pixels, s.naive_pixels);
  }
  for (const auto& c : report.constants) {
    out += fmt::format("constants {}: {} tensor{}, {} bytes in a storage of {} bytes (made once per VM)\n", c.scope,
                       c.tensors, c.tensors == 1 ? "" : "s", c.bytes, c.storage_bytes);
  }
  for (const auto& s : report.scopes) {
    if (s.discontiguous == 0 && s.spilled_bytes == 0) continue;
    out += fmt::format("{} {}:", s.function, s.scope);
    if (s.discontiguous != 0) {
      out += fmt::format(" blocks of {} discontiguous tensor{} ({} blocks)", s.discontiguous,
                         s.discontiguous == 1 ? "" : "s", s.blocks);
    }
    if (s.spilled_bytes != 0) {
      out += fmt::format("{} {} bytes spilled here", s.discontiguous != 0 ? ";" : "", s.spilled_bytes);
    }
    out += "\n";
  }
  return out;
}

std::string memory_report_json(const MemoryReport& report) {
  nlohmann::json scopes = nlohmann::json::array();
  for (const auto& s : report.scopes) {
    scopes.push_back({{"function", s.function},
                      {"scope", s.scope},
                      {"tensors", s.tensors},
                      {"planned_bytes", s.planned_bytes},
                      {"lower_bound", s.lower_bound},
                      {"naive_bytes", s.naive_bytes},
                      {"reuse_only_bytes", s.reuse_only_bytes},
                      {"spilled", s.spilled},
                      {"spilled_bytes", s.spilled_bytes},
                      {"discontiguous", s.discontiguous},
                      {"blocks", s.blocks},
                      {"proven_optimal", s.proven_optimal},
                      {"seconds", s.seconds},
                      {"images", s.images},
                      {"planned_pixels", s.planned_pixels},
                      {"naive_pixels", s.naive_pixels}});
  }
  nlohmann::json constants = nlohmann::json::array();
  for (const auto& c : report.constants) {
    constants.push_back(
        {{"scope", c.scope}, {"tensors", c.tensors}, {"bytes", c.bytes}, {"storage_bytes", c.storage_bytes}});
  }
  return nlohmann::json{{"scopes", scopes}, {"constants", constants}}.dump(2);
}

}  // namespace stowage::ir
