// `stowc plan-csv FILE.csv [--capacity N] [--time-limit S] [--output OUT.csv]`:
// packs the buffers of a planning CSV file and reports the height found.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "stowage/support/error.h"

namespace stowage::ir {

struct PlanCsvArgs {
  std::string input;                 // the CSV file to read
  std::optional<uint64_t> capacity;  // bytes; without it the height is minimised
  double time_limit_seconds = kDefaultPlanCsvTimeLimit;  // the only budget
  std::string output;                // where to write the solution; empty: nowhere
  bool help = false;                 // --help / -h: print plan_csv_help() and nothing else

  static constexpr double kDefaultPlanCsvTimeLimit = 10;
};

// Reads the arguments that follow `plan-csv` on the command line.
Expected<PlanCsvArgs> parse_plan_csv_args(std::span<const std::string_view> args);

// The text `stowc plan-csv --help` prints.
std::string plan_csv_help();

// Prints, one line each: the height found (and whether it is proven optimal),
// the lower bound with the height's ratio to it, the capacity and whether the
// packing fits (with --capacity), and the time. Writes the rows with an
// `offset` column to `output` when a packing within the capacity was found.
// Exit status: 0 when it fits (always, without a capacity); 1 when no packing
// within the capacity was found, with one line on `err` saying by how much the
// best packing found overflows and whether none can fit (proven) or the time
// ran out; 2 on bad input (a missing file, a malformed CSV), with one line
// `stowc plan-csv: error: ...` on `err`.
int run_plan_csv(const PlanCsvArgs& args, std::ostream& out, std::ostream& err);

}  // namespace stowage::ir
