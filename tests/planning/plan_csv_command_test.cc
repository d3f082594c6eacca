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
  EXPECT_EQ(out_without_time(), "height: 12 (optimal)\nlower bound: 12\ncapacity: 12 (fits)\n");
  EXPECT_NE(out_.str().find(" steps\n"), std::string::npos);
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
  EXPECT_EQ(out_without_time(), "height: 12 (optimal)\nlower bound: 12\n");
}

TEST_F(PlanCsvCommand, DoesNotFit) {
  PlanCsvArgs args;
  args.input = write("example.csv", kExample);
  args.capacity = 11;
  args.output = (dir_ / "out.csv").string();
  EXPECT_EQ(run(args), 1);
  EXPECT_EQ(out_without_time(), "height: 12 (optimal)\nlower bound: 12\ncapacity: 11 (does not fit)\n");
  EXPECT_FALSE(fs::exists(args.output));
}

TEST_F(PlanCsvCommand, BadInput) {
  PlanCsvArgs args;
  args.input = (dir_ / "missing.csv").string();
  EXPECT_EQ(run(args), 2);
  EXPECT_EQ(err_.str(), "error: " + args.input + ": cannot open the file\n");
  EXPECT_EQ(out_.str(), "");

  args.input = write("bad.csv", "id,lower,upper,size\nb1,0,3,4\nb2,3,9\n");
  EXPECT_EQ(run(args), 2);
  EXPECT_EQ(err_.str(), "error: " + args.input + ":3: expected 4 fields, found 3\n");

  args.input = write("huge.csv", "id,lower,upper,size\nb1,0,3,18446744073709551615\nb2,0,3,2\n");
  EXPECT_EQ(run(args), 2);
  EXPECT_EQ(err_.str(),
            "error: " + args.input + ": the items' sizes and alignments add up to more than 2^64 - 1 bytes\n");
}

TEST(PlanCsvArgsTest, Parses) {
  const std::string_view argv[] = {"in.csv", "--capacity", "1048576", "--time-limit", "2.5",
                                   "--max-steps", "1000", "--output", "out.csv"};
  Expected<PlanCsvArgs> args = parse_plan_csv_args(argv);
  ASSERT_TRUE(args.has_value()) << args.error().message();
  EXPECT_EQ(args->input, "in.csv");
  EXPECT_EQ(args->capacity, 1048576u);
  EXPECT_EQ(args->time_limit_seconds, 2.5);
  EXPECT_EQ(args->max_steps, 1000u);
  EXPECT_EQ(args->output, "out.csv");
}

TEST(PlanCsvArgsTest, Errors) {
  auto error_of = [](std::initializer_list<std::string_view> list) {
    Expected<PlanCsvArgs> args = parse_plan_csv_args(std::vector<std::string_view>(list));
    return args ? "no error" : args.error().message();
  };
  const std::string usage =
      " (usage: plan-csv FILE.csv [--capacity N] [--time-limit S] [--max-steps N] [--output OUT.csv])";
  EXPECT_EQ(error_of({}), "missing the CSV file" + usage);
  EXPECT_EQ(error_of({"a.csv", "b.csv"}), "unexpected argument 'b.csv'" + usage);
  EXPECT_EQ(error_of({"a.csv", "--capacity"}), "option --capacity needs a value" + usage);
  EXPECT_EQ(error_of({"a.csv", "--capacity", "-1"}), "option --capacity: '-1' is not a byte count" + usage);
  EXPECT_EQ(error_of({"a.csv", "--time-limit", "soon"}),
            "option --time-limit: 'soon' is not a number of seconds" + usage);
  EXPECT_EQ(error_of({"a.csv", "--colour", "red"}), "unknown option --colour" + usage);
}

}  // namespace
}  // namespace stowage::ir
