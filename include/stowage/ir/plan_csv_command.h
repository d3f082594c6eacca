// `stowc plan-csv FILE.csv [--capacity N] [--time-limit S] [--max-steps N] [--output OUT.csv]`:
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
  std::string input;                     // the CSV file to read
  std::optional<uint64_t> capacity;      // bytes; without it the height is minimised
  std::optional<double> time_limit_seconds;
  std::optional<uint64_t> max_steps;
  std::string output;                    // where to write the solution; empty: nowhere
};

// Reads the arguments that follow `plan-csv` on the command line.
Expected<PlanCsvArgs> parse_plan_csv_args(std::span<const std::string_view> args);

// Prints, one line each: the height found, the lower bound, the capacity and
// whether the packing fits (with --capacity), the time and steps taken. Writes
// the rows with an `offset` column to `output` when a packing within the
// capacity was found. Exit status: 0 when it fits (always, without a capacity),
// 1 when no packing within the capacity was found, 2 on bad input (a missing
// file, a malformed CSV), with one line `error: ...` on `err`.
int run_plan_csv(const PlanCsvArgs& args, std::ostream& out, std::ostream& err);

}  // namespace stowage::ir
