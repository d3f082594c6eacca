// vm-run's and stowc's command lines as a user meets them: inputs vm-run makes
// itself (random, zeros), the summary of each result printed without --output,
// progress of --reps on a terminal only, and --help with defaults and exit status.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "host_arrays.h"
#include "npy.h"
#include "process.h"
#include "source_files.h"
#include "stowage/backend/opencl.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"

namespace stowage {
namespace {

namespace fs = std::filesystem;
using testing::RunResult;

class VmRunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stowage-vm-run-cli-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // add_mul: main(x, y, z: Tensor[(4, 64), int32]) -> e = (x + y) * z.
    auto target = TargetDesc::load("opencl").value_or_throw();
    ir::CompileResult compiled =
        ir::compile_text(testing::read_source_file("examples/add_mul.stir"), "add_mul.stir", target).value_or_throw();
    stw_ = path("add_mul.stw");
    ASSERT_TRUE(write_bytecode_file(compiled.executable, stw_));
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult run(const std::string& tool, std::vector<std::string> args) {
    args.insert(args.begin(), std::string(STOWAGE_BINARY_DIR) + "/src/" + tool);
    return testing::run_process(args, dir_ / "stdout.txt", dir_ / "stderr.txt", std::chrono::seconds(120));
  }
  std::string stdout_text() const { return testing::read_text(dir_ / "stdout.txt"); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::string stw_;
};

std::vector<int32_t> int32s(const std::vector<std::byte>& bytes) {
  std::vector<int32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<std::byte> bytes_of(const std::vector<int32_t>& values) {
  auto span = std::as_bytes(std::span(values));
  return {span.begin(), span.end()};
}

// (x + y) * z for x, y and z drawn in turn from `seed`, as vm-run draws them.
std::vector<int32_t> expected_add_mul(uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::vector<int64_t> shape = {4, 64};
  auto x = int32s(host_arrays::random(shape, DType::kInt32, engine, "x").value_or_throw());
  auto y = int32s(host_arrays::random(shape, DType::kInt32, engine, "y").value_or_throw());
  auto z = int32s(host_arrays::random(shape, DType::kInt32, engine, "z").value_or_throw());
  std::vector<int32_t> e(x.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = (x[i] + y[i]) * z[i];
  return e;
}

TEST_F(VmRunCli, ZerosInputsAndTheResultsSummary) {
  RunResult r = run("vm-run", {stw_, "--input", "x=zeros", "--input", "y=zeros", "--input", "z=zeros"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
  EXPECT_EQ(stdout_text(),
            "x: zeros Tensor[(4, 64), int32]\n"
            "y: zeros Tensor[(4, 64), int32]\n"
            "z: zeros Tensor[(4, 64), int32]\n"
            "result[0] e: Tensor[(4, 64), int32]\n"
            "  min 0, max 0, mean 0; first 8 of 256: [0, 0, 0, 0, 0, 0, 0, 0, ...]\n");
}

TEST_F(VmRunCli, RandomInputsAreSeededAndSayTheirSeed) {
  RunResult r = run("vm-run", {stw_, "--input", "x=random", "--input", "y=random", "--input", "z=random", "--seed",
                               "7", "--output", path("e.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(stdout_text(),
            "x: random Tensor[(4, 64), int32], seed 7\n"
            "y: random Tensor[(4, 64), int32], seed 7\n"
            "z: random Tensor[(4, 64), int32], seed 7\n");
  npy::Array e = npy::read_file(path("e.npy")).value_or_throw();
  EXPECT_EQ(int32s(e.data), expected_add_mul(7));

  // Without --output, the summary of the same values; the default seed is 0.
  r = run("vm-run", {stw_, "--input", "x=random", "--input", "y=random", "--input", "z=random"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::vector<int32_t> want = expected_add_mul(0);
  EXPECT_EQ(stdout_text(), "x: random Tensor[(4, 64), int32], seed 0\n"
                           "y: random Tensor[(4, 64), int32], seed 0\n"
                           "z: random Tensor[(4, 64), int32], seed 0\n"
                           "result[0] e: Tensor[(4, 64), int32]\n  " +
                               host_arrays::summarize(DType::kInt32, bytes_of(want)) + "\n");
  EXPECT_NE(want, expected_add_mul(7));
}

TEST_F(VmRunCli, FilesAndGeneratedInputsMix) {
  std::vector<int32_t> ones(256, 1);
  ASSERT_TRUE(npy::write_file(path("x.npy"), {4, 64}, DType::kInt32, bytes_of(ones)));
  // A bare `random` takes the next parameter not named, as a bare file does.
  RunResult r = run("vm-run", {stw_, "--input", path("x.npy"), "--input", "random", "--input", "z=zeros", "--output",
                               path("e.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(stdout_text(), "y: random Tensor[(4, 64), int32], seed 0\nz: zeros Tensor[(4, 64), int32]\n");
  npy::Array e = npy::read_file(path("e.npy")).value_or_throw();
  EXPECT_EQ(int32s(e.data), std::vector<int32_t>(256, 0));
}

TEST_F(VmRunCli, RepsShowProgressOnATerminalOnly) {
  std::vector<std::string> args = {std::string(STOWAGE_BINARY_DIR) + "/src/vm-run", stw_, "-i", "x=zeros", "-i",
                                   "y=zeros", "-i", "z=zeros", "--reps", "3", "--output", path("e.npy")};
  RunResult r = testing::run_process_on_terminal(args, dir_ / "stdout.txt", std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  // One line, rewritten in place after each round, then blanked.
  EXPECT_EQ(r.stderr_text,
            "\rvm-run: rounds [........................] 0/3"
            "\rvm-run: rounds [########................] 1/3"
            "\rvm-run: rounds [################........] 2/3"
            "\rvm-run: rounds [########################] 3/3\r" +
                std::string(45, ' ') + "\r");
  EXPECT_NE(stdout_text().find("timing: 3 rounds of 1 invocations: median "), std::string::npos) << stdout_text();

  r = run("vm-run", {stw_, "-i", "x=zeros", "-i", "y=zeros", "-i", "z=zeros", "--reps", "3", "-o", path("e.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
  // A single round shows none, on a terminal too.
  args[args.size() - 3] = "1";
  r = testing::run_process_on_terminal(args, dir_ / "stdout.txt", std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
}

// A refusal comes before anything is generated or printed.
TEST_F(VmRunCli, AWrongNameIsRefusedBeforeAnyInputIsMade) {
  RunResult r =
      run("vm-run", {stw_, "--input", "x=zeros", "--input", "y=zeros", "--input", "z=zeros", "--input", "w=random"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stderr_text, "vm-run: error: --input 'w': 'main' has no such parameter\n");
  EXPECT_EQ(stdout_text(), "");
}

// Each option's default and what each exit status means.
TEST_F(VmRunCli, HelpShowsDefaultsAndExitStatus) {
  RunResult r = run("vm-run", {"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::string help = stdout_text();
  for (const char* text : {"--function TEXT=main", "--seed UINT=0", "--repeat INT:INT in [1 - 100000000]=1",
                           "--reps INT:INT in [1 - 1000000]=1",
                           "'random' (floats in [-1, 1), integers in [0, 10), from --seed) or 'zeros'",
                           "(default: STOWAGE_DEVICE, else the first suitable)",
                           "Exit status: 0 success, 1 runtime error (device, OpenCL, capacity, host memory), 2 bad "
                           "input\n(arguments, the bytecode file, .npy files read or written)."}) {
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
  }
  r = run("stowc", {"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  help = stdout_text();
  for (const char* text : {"--target TEXT=opencl", "(default: input with .stw)",
                           "Exit status: 0 written, 1 the output could not be written (or an internal error), 2 bad "
                           "input"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
  }
}

// Each device: its summary, then its capabilities on an indented line of their own.
TEST_F(VmRunCli, ListDevicesGivesEachDevicesCapabilities) {
  RunResult r = run("vm-run", {"--list-devices"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::string expected;
  for (const auto& d : opencl::list_devices()) expected += d.summary() + "\n  " + d.capabilities() + "\n";
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(stdout_text(), expected);
}

// The exit status --help promises: 1 when an output cannot be written, 2 for bad input.
TEST_F(VmRunCli, StowcExitsOneWhenAnOutputCannotBeWritten) {
  std::string report = path("no_such_dir/report.json");
  RunResult r = run("stowc", {STOWAGE_SOURCE_DIR "/examples/add_mul_planned.stir", "--report-json", report, "-o",
                              path("out.stw")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.stderr_text.rfind("stowc: error: cannot write memory report '" + report + "': ", 0), 0u) << r.stderr_text;
  EXPECT_FALSE(fs::exists(path("out.stw")));
  r = run("stowc", {path("missing.stir")});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace stowage
