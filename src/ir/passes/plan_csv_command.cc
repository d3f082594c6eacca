// The plan-csv command: the offset packer on a planning CSV file.
#include "stowage/ir/plan_csv_command.h"

#include <charconv>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

Error usage(const std::string& message) {
  return Error(ErrorKind::kInvalidInput,
               message + " (usage: plan-csv FILE.csv [--capacity N] [--time-limit S] [--max-steps N] "
                         "[--output OUT.csv])");
}

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorKind::kIo, path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(ErrorKind::kIo, path + ": cannot read the file");
  return text.str();
}

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Error(ErrorKind::kIo, path + ": cannot open the file for writing");
  out << text;
  out.close();
  if (!out) return Error(ErrorKind::kIo, path + ": cannot write the file");
  return Status::ok();
}

}  // namespace

Expected<PlanCsvArgs> parse_plan_csv_args(std::span<const std::string_view> args) {
  PlanCsvArgs result;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (!arg.starts_with("--")) {
      if (!result.input.empty()) return usage("unexpected argument '" + std::string(arg) + "'");
      result.input = std::string(arg);
      continue;
    }
    if (i + 1 >= args.size()) return usage("option " + std::string(arg) + " needs a value");
    const std::string_view value = args[++i];
    const std::string bad = "option " + std::string(arg) + ": '" + std::string(value) + "' is not ";
    if (arg == "--capacity") {
      result.capacity = parse_number<uint64_t>(value);
      if (!result.capacity) return usage(bad + "a byte count");
    } else if (arg == "--time-limit") {
      result.time_limit_seconds = parse_number<double>(value);
      if (!result.time_limit_seconds || !(*result.time_limit_seconds >= 0))
        return usage(bad + "a number of seconds");
    } else if (arg == "--max-steps") {
      result.max_steps = parse_number<uint64_t>(value);
      if (!result.max_steps) return usage(bad + "a step count");
    } else if (arg == "--output") {
      result.output = std::string(value);
    } else {
      return usage("unknown option " + std::string(arg));
    }
  }
  if (result.input.empty()) return usage("missing the CSV file");
  return result;
}

int run_plan_csv(const PlanCsvArgs& args, std::ostream& out, std::ostream& err) {
  Expected<std::string> text = read_file(args.input);
  if (!text) {
    err << "error: " << text.error().message() << "\n";
    return 2;
  }
  Expected<std::vector<PackItem>> items = read_planning_csv(*text, args.input);
  if (!items) {
    err << "error: " << items.error().message() << "\n";
    return 2;
  }
  PackOptions options;
  options.capacity = args.capacity;
  if (args.time_limit_seconds) options.time_limit_seconds = *args.time_limit_seconds;
  if (args.max_steps) options.max_steps = *args.max_steps;
  Expected<PackResult> result = pack(*items, options);
  if (!result) {
    err << "error: " << args.input << ": " << result.error().message() << "\n";
    return 2;
  }
  out << "height: " << result->height << (result->proven_optimal ? " (optimal)" : "") << "\n";
  out << "lower bound: " << result->lower_bound << "\n";
  if (args.capacity)
    out << "capacity: " << *args.capacity << (result->fits ? " (fits)" : " (does not fit)") << "\n";
  out << "time: " << std::fixed << std::setprecision(3) << result->seconds << " s, " << result->steps << " steps"
      << (result->stopped_by_time ? " (stopped by the time limit)" : "") << "\n";
  if (!result->fits) return 1;
  if (!args.output.empty()) {
    if (Status status = write_file(args.output, write_planning_csv(*items, result->offsets)); !status) {
      err << "error: " << status.error().message() << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace stowage::ir
