// stowc: compiles Stowage text IR to a bytecode file.
//
//   stowc FILE.stir [-o OUT.stw] [--target NAME|PATH] [--print] [--report] [--report-json F]
//   stowc plan-csv FILE.csv [--capacity N] [--time-limit S] [--output OUT.csv]
//
// Each form has its own --help.
// Exit codes: 0 written, 1 the output could not be written or an internal failure,
// 2 bad input (arguments, syntax, verification, kernel source, unreadable files).
// Errors are one line on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "stowage/ir/compiler.h"
#include "stowage/ir/plan_csv_command.h"
#include "stowage/ir/printer.h"
#include "stowage/bytecode/file.h"
#include "stowage/support/file.h"

namespace {

using namespace stowage;

struct Options {
  std::string input;
  std::string output;
  std::string target = "opencl";
  bool print = false;
  bool report = false;
  std::string report_json;
};

int fail(const Error& error) {
  std::string text = error.message();
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::cerr << "stowc: " << (text.find("error:") == std::string::npos ? "error: " : "") << text << "\n";
  return error.is_input_error() || error.kind() == ErrorKind::kUnsupported ? 2 : 1;
}

int compile(const Options& opt) {
  auto text = read_regular_file(opt.input, ir::kMaxTextIrBytes, "text IR file");
  if (!text) return fail(text.error());
  auto target = TargetDesc::load(opt.target);
  if (!target) return fail(target.error());
  auto result = ir::compile_text(*text, opt.input, *target);
  if (!result) return fail(result.error());
  if (opt.print) std::cout << ir::print_module(result->module);
  if (opt.report) std::cout << ir::format_memory_report(result->memory);
  if (!opt.report_json.empty()) {
    Status written = write_file_atomically(opt.report_json, ir::memory_report_json(result->memory) + "\n",
                                           "memory report", WrittenFile::kOutput);
    if (!written) return fail(Error(ErrorKind::kRuntime, written.error().message()));
  }
  std::string output = opt.output;
  if (output.empty()) {
    output = opt.input;
    auto dot = output.rfind('.');
    if (dot != std::string::npos && output.find('/', dot) == std::string::npos) output.resize(dot);
    output += ".stw";
  }
  if (auto status = write_bytecode_file(result->executable, output); !status) {
    return fail(Error(ErrorKind::kRuntime, status.error().message()));
  }
  return 0;
}

}  // namespace

// `stowc plan-csv ...`: places the buffers of a planning CSV file (exit 0 fits,
// 1 does not, 2 bad input).
int plan_csv(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 2, argv + argc);
  auto parsed = ir::parse_plan_csv_args(args);
  if (!parsed) {
    std::cerr << "stowc plan-csv: error: " << parsed.error().message() << "\n";
    return 2;
  }
  try {
    return ir::run_plan_csv(*parsed, std::cout, std::cerr);
  } catch (const std::exception& e) {  // out of memory, say: one line all the same
    std::cerr << "stowc plan-csv: error: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "plan-csv") return plan_csv(argc, argv);
  CLI::App app{"Compiles Stowage text IR (.stir) to a bytecode file (.stw).", "stowc"};
  app.footer(
      "Also: stowc plan-csv FILE.csv [--capacity N] [--time-limit S] [--output OUT.csv]\n"
      "  places the buffers of a planning CSV file; see stowc plan-csv --help.\n"
      "Exit status: 0 written, 1 the output could not be written (or an internal error), 2 bad input\n"
      "(arguments, the text IR, its kernels, the target, a file that cannot be read).");
  Options opt;
  app.add_option("input", opt.input, "text IR file")->required();
  app.add_option("-o,--output", opt.output, "bytecode file to write (default: input with .stw)");
  app.add_option("--target", opt.target, "shipped target name or a target JSON file")->capture_default_str();
  app.add_flag("--print", opt.print, "print the IR as compiled (after planning)");
  app.add_flag("--report", opt.report, "print the memory report of the planner");
  app.add_option("--report-json", opt.report_json, "write the memory report as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "stowc: error: " << e.what() << " (see stowc --help)\n";
    return 2;
  }
  try {
    return compile(opt);
  } catch (const std::exception& e) {
    std::cerr << "stowc: error: " << e.what() << "\n";
    return 1;
  }
}
