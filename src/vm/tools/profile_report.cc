#include "profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace stowage::vm {
namespace {

// "conv1, relu1" and "Conv+Relu": a site's nodes and op types as one label each.
std::string node_label(const std::vector<NodeOrigin>& nodes) {
  std::vector<std::string> names;
  for (const NodeOrigin& n : nodes) names.push_back(n.node.empty() ? "(" + n.op + ")" : n.node);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string op_label(const std::vector<NodeOrigin>& nodes) {
  std::vector<std::string> ops;
  for (const NodeOrigin& n : nodes) ops.push_back(n.op);
  return fmt::format("{}", fmt::join(ops, "+"));
}

struct Row {
  double us = 0;
  uint64_t launches = 0;
};

void print_rows(std::string_view title, const std::map<std::string, Row>& rows, double busy_us, double n,
                size_t limit) {
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  fmt::print("{}:\n", title);
  fmt::print("  {:<56} {:>8} {:>12} {:>7}\n", "", "launches", "us each inv", "share");
  for (size_t i = 0; i < sorted.size() && i < limit; ++i) {
    const auto& [label, row] = sorted[i];
    std::string shown = label.size() > 56 ? label.substr(0, 53) + "..." : label;
    fmt::print("  {:<56} {:>8} {:>12.2f} {:>6.1f}%\n", shown, row.launches, row.us / n,
               busy_us > 0 ? 100.0 * row.us / busy_us : 0.0);
  }
  if (sorted.size() > limit) fmt::print("  ... {} more\n", sorted.size() - limit);
}

}  // namespace

void print_node_times(const Profile& p, int invocations) {
  std::map<std::string, Row> by_node, by_op;
  for (const InstructionProfile& ip : p.instructions) {
    if (ip.device_count == 0) continue;
    const std::string node = ip.nodes.empty() ? "(no node)" : node_label(ip.nodes);
    const std::string op = ip.nodes.empty() ? "(no node)" : op_label(ip.nodes);
    for (Row* row : {&by_node[node], &by_op[op]}) {
      row->us += ip.device_us;
      row->launches += ip.device_count;
    }
  }
  const double n = std::max(invocations, 1);
  print_rows("device time by model node (a fused kernel's nodes together)", by_node, p.device_busy_us, n, 40);
  print_rows("device time by op type", by_op, p.device_busy_us, n, 40);
}

std::string chrome_trace(const Executable& exe, const std::vector<LaunchRecord>& launches) {
  uint64_t origin = UINT64_MAX;
  for (const LaunchRecord& l : launches) origin = std::min(origin, l.start_ns);
  nlohmann::json events = nlohmann::json::array();
  for (const LaunchRecord& l : launches) {
    const Function& f = exe.functions.at(l.function);
    const Instruction& ins = f.code.at(l.index);
    const std::string kernel = exe.kernels.at(ins.ops[operands::CallKernel::kKernel]).name;
    const std::vector<NodeOrigin>* nodes = exe.origin_of(l.function, l.index);
    nlohmann::json args = {{"kernel", kernel}, {"instruction", fmt::format("{}:{}", f.name, l.index)}};
    if (nodes != nullptr) {
      nlohmann::json names = nlohmann::json::array(), ops = nlohmann::json::array();
      for (const NodeOrigin& n : *nodes) {
        names.push_back(n.node);
        ops.push_back(n.op);
      }
      args["nodes"] = names;
      args["op_types"] = ops;
    }
    events.push_back({{"name", nodes != nullptr ? node_label(*nodes) : kernel},
                      {"cat", nodes != nullptr ? op_label(*nodes) : "kernel"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", static_cast<double>(l.start_ns - origin) / 1000.0},
                      {"dur", static_cast<double>(l.end_ns - l.start_ns) / 1000.0},
                      {"args", args}});
  }
  nlohmann::json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return trace.dump(1) + "\n";
}

}  // namespace stowage::vm
