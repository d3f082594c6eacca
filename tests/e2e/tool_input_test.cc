// stowc and vm-run given files that are not regular files, or too large: each is
// refused at once with one line naming the path and exit status 2, never read
// forever (/dev/zero), never waited on (a FIFO), never taken as empty (a directory).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bytecode/bytecode_test_util.h"
#include "npy.h"
#include "process.h"
#include "source_files.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"

namespace stowage {
namespace {

namespace fs = std::filesystem;
using testing::run_process;
using testing::RunResult;

class ToolInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stowage-tool-input-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "a_directory");
    ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult run(const std::string& tool, std::vector<std::string> args) {
    args.insert(args.begin(), std::string(STOWAGE_BINARY_DIR) + "/src/" + tool);
    return run_process(args, dir_ / "stdout.txt", dir_ / "stderr.txt", std::chrono::seconds(20));
  }

  // The one line a refusal must print, and its exit status.
  void expect_refused(const RunResult& r, const std::string& line) {
    EXPECT_FALSE(r.timed_out);
    EXPECT_TRUE(r.exited);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.stderr_text, line + "\n");
  }

  std::string compile_add_mul() {
    auto target = TargetDesc::load("opencl").value_or_throw();
    ir::CompileResult compiled =
        ir::compile_text(testing::read_source_file("examples/add_mul.stir"), "add_mul.stir", target).value_or_throw();
    std::string path = (dir_ / "add_mul.stw").string();
    EXPECT_TRUE(write_bytecode_file(compiled.executable, path));
    return path;
  }

  fs::path dir_;
};

TEST_F(ToolInputTest, StowcRefusesADirectoryAndWritesNothing) {
  std::string input = (dir_ / "a_directory").string();
  std::string output = (dir_ / "out.stw").string();
  expect_refused(run("stowc", {input, "-o", output}),
                 "stowc: error: cannot read text IR file '" + input + "': it is a directory, not a regular file");
  EXPECT_FALSE(fs::exists(output));
}

TEST_F(ToolInputTest, StowcRefusesAFifoWithoutWaitingForAWriter) {
  std::string input = (dir_ / "fifo").string();
  expect_refused(run("stowc", {input, "-o", (dir_ / "out.stw").string()}),
                 "stowc: error: cannot read text IR file '" + input + "': it is a FIFO, not a regular file");
}

TEST_F(ToolInputTest, StowcRefusesADeviceThatNeverEnds) {
  expect_refused(run("stowc", {"/dev/zero", "-o", (dir_ / "out.stw").string()}),
                 "stowc: error: cannot read text IR file '/dev/zero': it is a character device, not a regular file");
}

TEST_F(ToolInputTest, StowcRefusesADirectoryAsTargetFile) {
  std::string target = (dir_ / "a_directory").string();
  expect_refused(run("stowc", {STOWAGE_SOURCE_DIR "/examples/add_mul.stir", "--target", target, "-o",
                               (dir_ / "out.stw").string()}),
                 "stowc: error: cannot read target file '" + target + "': it is a directory, not a regular file");
}

TEST_F(ToolInputTest, VmRunRefusesInputsThatAreNotRegularFiles) {
  std::string stw = compile_add_mul();
  std::string y = (dir_ / "y.npy").string();
  std::vector<std::byte> zeros(1024);
  ASSERT_TRUE(npy::write_file(y, {4, 64}, DType::kInt32, zeros));
  for (const auto& [x, kind] : std::vector<std::pair<std::string, std::string>>{
           {(dir_ / "a_directory").string(), "a directory"},
           {(dir_ / "fifo").string(), "a FIFO"},
           {"/dev/zero", "a character device"}}) {
    expect_refused(run("vm-run", {stw, "--input", "x=" + x, "--input", "y=" + y, "--input", "z=" + y}),
                   "vm-run: error: cannot read .npy file '" + x + "': it is " + kind + ", not a regular file");
  }
}

// A kernel the driver cannot build: one line, its first diagnostic, though PoCL's
// compiler prints "N errors generated." to stderr itself.
TEST_F(ToolInputTest, VmRunReportsABuildFailureInOneLine) {
  Executable exe = testing::make_add_mul_executable();
  exe.units[0].source += "\n__kernel void broken(__global int* a) { a[0] = undefined_thing; a[1] = other; }\n";
  std::string stw = (dir_ / "broken.stw").string();
  ASSERT_TRUE(write_bytecode_file(exe, stw));
  std::string x = (dir_ / "x.npy").string();
  ASSERT_TRUE(npy::write_file(x, {4, 64}, DType::kInt32, std::vector<std::byte>(1024)));
  ::setenv("STOWAGE_CACHE_DIR", "off", 1);
  RunResult r = run("vm-run", {stw, "--input", "x=" + x, "--input", "y=" + x, "--input", "z=" + x});
  ::unsetenv("STOWAGE_CACHE_DIR");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.stderr_text.find('\n'), r.stderr_text.size() - 1) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.rfind("vm-run: error: kernel unit 'vtcm_ops': OpenCL build failed with "
                                "CL_BUILD_PROGRAM_FAILURE on ",
                                0),
            0u)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("undefined_thing"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(r.stderr_text.ends_with("(set STOWAGE_BUILD_LOG=FILE for the full log)\n")) << r.stderr_text;
}

// An input is read only up to its parameter's bytes and a header's worth more.
TEST_F(ToolInputTest, VmRunRefusesAnInputFarLargerThanItsParameter) {
  std::string stw = compile_add_mul();
  std::string y = (dir_ / "y.npy").string();
  ASSERT_TRUE(npy::write_file(y, {4, 64}, DType::kInt32, std::vector<std::byte>(1024)));
  std::string big = (dir_ / "big.npy").string();
  const uint64_t limit = 1024 + 12 + npy::kMaxHeaderBytes;
  ASSERT_TRUE(npy::write_file(big, {4, 65536 + 4096}, DType::kInt32, std::vector<std::byte>(4 * 4 * (65536 + 4096))));
  uint64_t size = fs::file_size(big);
  expect_refused(run("vm-run", {stw, "--input", "x=" + big, "--input", "y=" + y, "--input", "z=" + y}),
                 "vm-run: error: cannot read .npy file '" + big + "': " + std::to_string(size) +
                     " bytes exceed the limit of " + std::to_string(limit));
}

}  // namespace
}  // namespace stowage
