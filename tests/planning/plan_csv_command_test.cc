// The plan-csv command: output lines, exit codes, files written or not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "stowage/ir/packing.h"
#include "stowage/ir/plan_csv_command.h"

namespace stowage::ir {
namespace {

namespace fs = std::filesystem;

class PlanCsvCommand : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stowage_plan_csv_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  int run(const PlanCsvArgs& args) {
    out_.str("");
    err_.str("");
    return run_plan_csv(args, out_, err_);
  }
  // The output without its last line (the time, which varies).
  std::string out_without_time() const {
    const std::string text = out_.str();
    const size_t time = text.find("time: ");
    return time == std::string::npos ? text : text.substr(0, time);
  }

  fs::path dir_;
  std::ostringstream out_, err_;
};

const char kExample[] = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n";

TEST_F(PlanCsvCommand, FitsAndWritesOffsets) {
  PlanCsvArgs args;
  args.input = write("example.csv", kExample);
  args.capacity = 12;
  args.output = (dir_ / "out.csv").string();
  EXPECT_EQ(run(args), 0);
  EXPECT_EQ(out_without_time(),
            "height: 12 (optimal)\nlower bound: 12 (height / lower bound: 1.0000)\ncapacity: 12 (fits)\n");
  EXPECT_EQ(err_.str(), "");
  Expected<PlanningSolution> solution = read_planning_solution_csv(read(args.output), args.output);
  ASSERT_TRUE(solution.has_value()) << solution.error().message();
  ASSERT_EQ(solution->items.size(), 5u);
  EXPECT_EQ(solution->items[4].id, "b5");
  EXPECT_TRUE(check_packing(solution->items, solution->offsets, 12).is_ok());
}

TEST_F(PlanCsvCommand, WithoutCapacityMinimises) {
  PlanCsvArgs args;
  args.input = write("example.csv", kExample);
  EXPECT_EQ(run(args), 0);
  EXPECT_EQ(out_without_time(), "height: 12 (optimal)\nlower bound: 12 (height / lower bound: 1.0000)\n");
}

TEST_F(PlanCsvCommand, ReadsMiniMallocsOtherColumnNames) {
  // `end` is the last moment alive: b1 and b2 share moment 2.
  PlanCsvArgs args;
  args.input = write("inclusive.csv", "buffer,start,end,size\nb1,0,2,4\nb2,2,8,4\n");
  EXPECT_EQ(run(args), 0);
  EXPECT_EQ(out_without_time(), "height: 8 (optimal)\nlower bound: 8 (height / lower bound: 1.0000)\n");
}

// A capacity below the lower bound: no packing fits, proven at once.
TEST_F(PlanCsvCommand, BelowTheLowerBoundDoesNotFit) {
  PlanCsvArgs args;
  args.input = write("example.csv", kExample);
  args.capacity = 11;
  args.output = (dir_ / "out.csv").string();
  EXPECT_EQ(run(args), 1);
  EXPECT_EQ(out_without_time(),
            "height: 12 (optimal)\nlower bound: 12 (height / lower bound: 1.0000)\n"
            "capacity: 11 (does not fit: the best packing found needs 12 bytes, 1 over; no packing fits (proven))\n");
  EXPECT_EQ(err_.str(), "stowc plan-csv: " + args.input +
                            " does not fit in 11 bytes: the best packing found needs 12 bytes, 1 over; no packing "
                            "fits (proven)\n");
  EXPECT_FALSE(fs::exists(args.output));
}

// At its lower bound, yet unsatisfiable: the search proves it (an exhaustive
// search agrees, tests/planning/packing_test.cc) and the best packing is one byte over.
TEST_F(PlanCsvCommand, UnsatisfiableCapacityIsProven) {
  PlanCsvArgs args;
  args.input = write("above.csv",
                     "id,lower,upper,size\na,2,3,5\nb,1,5,1\nc,2,4,1\nd,3,4,3\ne,1,4,3\nf,0,2,4\ng,4,7,2\n"
                     "h,4,5,5\ni,3,5,4\nj,1,5,5\nk,0,2,4\nl,2,5,1\nm,5,6,2\nn,1,3,1\n");
  args.capacity = 18;
  args.time_limit_seconds = 60;  // far more than the proof needs
  EXPECT_EQ(run(args), 1);
  EXPECT_EQ(out_without_time(),
            "height: 19 (optimal)\nlower bound: 18 (height / lower bound: 1.0556)\n"
            "capacity: 18 (does not fit: the best packing found needs 19 bytes, 1 over; no packing fits (proven))\n");
  EXPECT_NE(err_.str().find(" does not fit in 18 bytes: "), std::string::npos);
}

// With no time to search, the command still ends with the best packing found
// (the greedy one), says it is not proven, and exits 1.
TEST_F(PlanCsvCommand, OutOfTimeSaysSo) {
  PlanCsvArgs args;
  args.input = std::string(STOWAGE_SOURCE_DIR) + "/benchmarks/data/planning/C.1048576.csv";
  args.capacity = 1039360;  // C's lower bound
  args.time_limit_seconds = 0;
  EXPECT_EQ(run(args), 1);
  const std::string out = out_without_time();
  EXPECT_NE(out.find("height: "), std::string::npos);
  EXPECT_NE(out.find(" (not proven optimal: the time limit of 0 s ran out)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("capacity: 1039360 (does not fit: the best packing found needs "), std::string::npos) << out;
  EXPECT_NE(out.find("; not proven that none fits: the time limit of 0 s ran out)\n"), std::string::npos) << out;
  EXPECT_NE(err_.str().find("C.1048576.csv does not fit in 1039360 bytes: "), std::string::npos) << err_.str();
}

TEST_F(PlanCsvCommand, BadInput) {
  PlanCsvArgs args;
  args.input = (dir_ / "missing.csv").string();
  EXPECT_EQ(run(args), 2);
  EXPECT_EQ(err_.str(), "stowc plan-csv: error: cannot read planning CSV file '" + args.input +
                            "': No such file or directory\n");
  EXPECT_EQ(out_.str(), "");

  args.input = write("bad.csv", "id,lower,upper,size\nb1,0,3,4\nb2,3,9\n");
  EXPECT_EQ(run(args), 2);
  EXPECT_EQ(err_.str(), "stowc plan-csv: error: " + args.input + ":3: expected 4 fields, found 3\n");

  args.input = write("huge.csv", "id,lower,upper,size\nb1,0,3,18446744073709551615\nb2,0,3,2\n");
  EXPECT_EQ(run(args), 2);
  EXPECT_EQ(err_.str(), "stowc plan-csv: error: " + args.input +
                            ": the items' sizes and alignments add up to more than 2^64 - 1 bytes\n");
}

TEST_F(PlanCsvCommand, HelpNeedsNoFile) {
  PlanCsvArgs args;
  args.help = true;
  EXPECT_EQ(run(args), 0);
  EXPECT_EQ(out_.str(), plan_csv_help());
  EXPECT_NE(out_.str().find("--time-limit S   seconds the search may take, the only budget (default: 10)"),
            std::string::npos);
}

TEST(PlanCsvArgsTest, Parses) {
  const std::string_view argv[] = {"in.csv", "--capacity", "1048576", "--time-limit", "2.5", "--output", "out.csv"};
  Expected<PlanCsvArgs> args = parse_plan_csv_args(argv);
  ASSERT_TRUE(args.has_value()) << args.error().message();
  EXPECT_EQ(args->input, "in.csv");
  EXPECT_EQ(args->capacity, 1048576u);
  EXPECT_EQ(args->time_limit_seconds, 2.5);
  EXPECT_EQ(args->output, "out.csv");
  EXPECT_FALSE(args->help);

  const std::string_view defaults[] = {"in.csv"};
  args = parse_plan_csv_args(defaults);
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(args->time_limit_seconds, PlanCsvArgs::kDefaultPlanCsvTimeLimit);
  EXPECT_FALSE(args->capacity.has_value());

  for (std::string_view help : {"--help", "-h"}) {
    const std::string_view with_help[] = {"in.csv", "--capacity", "12", help};
    args = parse_plan_csv_args(with_help);
    ASSERT_TRUE(args.has_value()) << help;
    EXPECT_TRUE(args->help);
  }
  const std::string_view only_help[] = {"--help"};
  args = parse_plan_csv_args(only_help);
  ASSERT_TRUE(args.has_value());
  EXPECT_TRUE(args->help);
}

TEST(PlanCsvArgsTest, Errors) {
  auto error_of = [](std::initializer_list<std::string_view> list) {
    Expected<PlanCsvArgs> args = parse_plan_csv_args(std::vector<std::string_view>(list));
    return args ? "no error" : args.error().message();
  };
  const std::string usage =
      " (usage: plan-csv FILE.csv [--capacity N] [--time-limit S] [--output OUT.csv]; see stowc plan-csv --help)";
  EXPECT_EQ(error_of({}), "missing the CSV file" + usage);
  EXPECT_EQ(error_of({"a.csv", "b.csv"}), "unexpected argument 'b.csv'" + usage);
  EXPECT_EQ(error_of({"a.csv", "--capacity"}), "option --capacity needs a value" + usage);
  EXPECT_EQ(error_of({"a.csv", "--capacity", "-1"}), "option --capacity: '-1' is not a byte count" + usage);
  EXPECT_EQ(error_of({"a.csv", "--time-limit", "soon"}),
            "option --time-limit: 'soon' is not a number of seconds" + usage);
  EXPECT_EQ(error_of({"a.csv", "--time-limit", "-1"}), "option --time-limit: '-1' is not a number of seconds" + usage);
  EXPECT_EQ(error_of({"a.csv", "--time-limit", "inf"}),
            "option --time-limit: 'inf' is not a number of seconds" + usage);
  EXPECT_EQ(error_of({"a.csv", "--max-steps", "1000"}), "unknown option --max-steps" + usage);
  EXPECT_EQ(error_of({"a.csv", "--colour", "red"}), "unknown option --colour" + usage);
}

}  // namespace
}  // namespace stowage::ir
