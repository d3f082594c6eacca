// The plan-csv command: the offset packer on a planning CSV file.
#include "stowage/ir/plan_csv_command.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <ostream>
#include <sstream>

#include "stowage/ir/packing.h"
#include "stowage/support/file.h"

namespace stowage::ir {
namespace {

constexpr const char kUsage[] = "plan-csv FILE.csv [--capacity N] [--time-limit S] [--output OUT.csv]";

Error usage(const std::string& message) {
  return Error(ErrorKind::kInvalidInput, message + " (usage: " + kUsage + "; see stowc plan-csv --help)");
}

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Planning CSV files hold one line per tensor: 1 GiB is far past any real program.
constexpr uint64_t kMaxPlanningCsvBytes = uint64_t{1} << 30;

std::string seconds(double s) { return fmt::format("{:g} s", s); }

}  // namespace

std::string plan_csv_help() {
  return fmt::format(
      "usage: stowc {}\n"
      "\n"
      "Places the buffers of a planning CSV file at byte offsets so that buffers alive at\n"
      "the same time never share a byte, and reports the height (the bytes needed), its\n"
      "lower bound (the most bytes alive at one moment) and their ratio.\n"
      "\n"
      "The file: a header naming the columns id, lower, upper, size (any order; optionally\n"
      "alignment), then one buffer a line, alive over [lower, upper). MiniMalloc's names are\n"
      "read too: buffer for id, start or begin for lower, end for the last moment alive.\n"
      "\n"
      "options:\n"
      "  --capacity N     bytes available: stop at the first packing within them (without\n"
      "                   it, the height is minimised)\n"
      "  --time-limit S   seconds the search may take, the only budget (default: {:g}); when\n"
      "                   they run out, the best packing found is reported, marked \"not\n"
      "                   proven optimal\"\n"
      "  --output F       write the buffers with an offset column to F when they fit\n"
      "  -h, --help       print this help\n"
      "\n"
      "exit status: 0 fits (always, without --capacity), 1 does not fit (the message says\n"
      "by how much the best packing found overflows), 2 bad input.\n",
      kUsage, PlanCsvArgs::kDefaultPlanCsvTimeLimit);
}

Expected<PlanCsvArgs> parse_plan_csv_args(std::span<const std::string_view> args) {
  PlanCsvArgs result;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      result.help = true;
      return result;
    }
    if (!arg.starts_with("-")) {
      if (!result.input.empty()) return usage("unexpected argument '" + std::string(arg) + "'");
      result.input = std::string(arg);
      continue;
    }
    if (arg != "--capacity" && arg != "--time-limit" && arg != "--output")
      return usage("unknown option " + std::string(arg));
    if (i + 1 >= args.size()) return usage("option " + std::string(arg) + " needs a value");
    const std::string_view value = args[++i];
    const std::string bad = "option " + std::string(arg) + ": '" + std::string(value) + "' is not ";
    if (arg == "--capacity") {
      result.capacity = parse_number<uint64_t>(value);
      if (!result.capacity) return usage(bad + "a byte count");
    } else if (arg == "--time-limit") {
      const std::optional<double> limit = parse_number<double>(value);
      if (!limit || !std::isfinite(*limit) || *limit < 0) return usage(bad + "a number of seconds");
      result.time_limit_seconds = *limit;
    } else {
      result.output = std::string(value);
    }
  }
  if (result.input.empty()) return usage("missing the CSV file");
  return result;
}

int run_plan_csv(const PlanCsvArgs& args, std::ostream& out, std::ostream& err) {
  if (args.help) {
    out << plan_csv_help();
    return 0;
  }
  const auto fail = [&](const std::string& message) {
    err << "stowc plan-csv: error: " << message << "\n";
    return 2;
  };
  Expected<std::string> text = read_regular_file(args.input, kMaxPlanningCsvBytes, "planning CSV file");
  if (!text) return fail(text.error().message());
  Expected<std::vector<PackItem>> items = read_planning_csv(*text, args.input);
  if (!items) return fail(items.error().message());
  PackOptions options;
  options.capacity = args.capacity;
  options.time_limit_seconds = args.time_limit_seconds;
  Expected<PackResult> result = pack(*items, options);
  if (!result) return fail(args.input + ": " + result.error().message());

  const std::string out_of_time = "the time limit of " + seconds(args.time_limit_seconds) + " ran out";
  std::string height_note = result->proven_optimal ? "optimal" : "not proven optimal";
  if (!result->proven_optimal && result->stopped_by_time) height_note += ": " + out_of_time;
  out << "height: " << result->height << " (" << height_note << ")\n";
  const double ratio =
      result->lower_bound == 0 ? 1.0 : static_cast<double>(result->height) / static_cast<double>(result->lower_bound);
  out << "lower bound: " << result->lower_bound << fmt::format(" (height / lower bound: {:.4f})\n", ratio);
  std::string overflow;
  if (args.capacity && !result->fits) {
    overflow = fmt::format("the best packing found needs {} bytes, {} over; ", result->height,
                           result->height - *args.capacity);
    overflow += result->proven_unfit ? "no packing fits (proven)"
                                     : "not proven that none fits: " + out_of_time;
    out << "capacity: " << *args.capacity << " (does not fit: " << overflow << ")\n";
  } else if (args.capacity) {
    out << "capacity: " << *args.capacity << " (fits)\n";
  }
  out << fmt::format("time: {:.3f} s\n", result->seconds);
  if (!result->fits) {
    err << "stowc plan-csv: " << args.input << " does not fit in " << *args.capacity << " bytes: " << overflow << "\n";
    return 1;
  }
  if (!args.output.empty()) {
    if (Status status = write_file_atomically(args.output, write_planning_csv(*items, result->offsets), "planning CSV file", WrittenFile::kOutput); !status)
      return fail(status.error().message());
  }
  return 0;
}

}  // namespace stowage::ir
