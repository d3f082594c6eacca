// vm-run on randomly mutated copies of two examples' bytecode files (fixed seed),
// add_mul.stir and scale_bias.stir (which has tensor constant sections):
// every run exits 2 with one line on stderr, or runs and gives the right result.
// Never a signal, a hang, a leak or a sanitizer report (sanitizer reports are
// given their own exit codes so they cannot pass for a refusal).
//
// A second round recomputes the checksums after mutating, so that the mutations
// reach the validator instead of stopping at the checksum, and loads each file
// with `vm-run --info` (load, validate, check requirements, no kernel launched).
// A file that validates is run as written: a mutated grid can make a kernel index
// past its tensors, which no loader can see (kernels are arbitrary code), so the
// second round does not launch them.
//
// STOWAGE_MUTATIONS overrides the number of mutated files (default 10,000).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "npy.h"
#include "process.h"
#include "stowage/ir/compiler.h"
#include "stowage/bytecode/file.h"
#include "bytecode/bytecode_test_util.h"

namespace stowage {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_process;
using testing::RunResult;

constexpr int kSanitizerExitCode = 86;

// One to four random edits: bit flips, byte sets, interesting 32-bit values,
// truncation, insertion, duplication of a chunk.
std::vector<uint8_t> mutate(std::vector<uint8_t> bytes, std::mt19937_64& rng) {
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  static constexpr uint32_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000,
                                              0xffffffff, 4096, 65536};
  int edits = 1 + static_cast<int>(below(4));
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    switch (below(6)) {
      case 0: bytes[below(bytes.size())] ^= static_cast<uint8_t>(1u << below(8)); break;
      case 1: bytes[below(bytes.size())] = static_cast<uint8_t>(rng()); break;
      case 2: {
        size_t at = below(bytes.size());
        uint32_t v = kInteresting[below(std::size(kInteresting))];
        for (size_t i = 0; i < 4 && at + i < bytes.size(); ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 3: bytes.resize(below(bytes.size())); break;
      case 4: {
        size_t at = below(bytes.size() + 1);
        std::vector<uint8_t> extra(1 + below(16));
        for (auto& b : extra) b = static_cast<uint8_t>(rng());
        bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at), extra.begin(), extra.end());
        break;
      }
      case 5: {
        size_t from = below(bytes.size());
        size_t len = std::min<size_t>(1 + below(64), bytes.size() - from);
        std::vector<uint8_t> chunk(bytes.begin() + static_cast<ptrdiff_t>(from),
                                   bytes.begin() + static_cast<ptrdiff_t>(from + len));
        size_t at = below(bytes.size());
        bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at), chunk.begin(), chunk.end());
        break;
      }
    }
  }
  return bytes;
}

// A file to mutate, the .npy inputs its main takes and the bytes of its right result.
struct Seed {
  std::string name;
  std::vector<uint8_t> file;
  std::vector<std::pair<std::string, fs::path>> inputs;
  std::vector<std::byte> expected;
};

template <typename T>
std::vector<std::byte> raw_bytes(const std::vector<T>& values) {
  std::vector<std::byte> raw(values.size() * sizeof(T));
  std::memcpy(raw.data(), values.data(), raw.size());
  return raw;
}

class MutationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stowage-mutation-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto target = TargetDesc::load("opencl").value_or_throw();
    auto compile = [&](const std::string& example) {
      std::string text = read_text(fs::path(STOWAGE_SOURCE_DIR) / "examples" / example);
      return write_bytecode(ir::compile_text(text, example, target).value_or_throw().executable);
    };
    // add_mul: storage placed by hand, three inputs.
    std::vector<int32_t> xs(256), ys(256), zs(256), sums(256);
    for (int i = 0; i < 256; ++i) {
      xs[i] = i - 50;
      ys[i] = 3 * i;
      zs[i] = i % 5 - 2;
      sums[i] = (xs[i] + ys[i]) * zs[i];
    }
    add_mul_ = Seed{"add_mul", compile("add_mul.stir"), {}, raw_bytes(sums)};
    for (auto [name, data] : {std::pair{"x", &xs}, {"y", &ys}, {"z", &zs}}) {
      fs::path file = dir_ / (std::string(name) + ".npy");
      ASSERT_TRUE(npy::write_file(file.string(), {4, 64}, DType::kInt32, raw_bytes(*data)));
      add_mul_.inputs.emplace_back(name, file);
    }
    // scale_bias: a file with tensor constant sections.
    std::vector<float> x(64), y(64);
    const float scale[4] = {0.5f, 2.0f, -1.0f, 4.0f}, bias[4] = {1.0f, 0.0f, 0.25f, -3.0f};
    for (int i = 0; i < 64; ++i) {
      x[i] = 0.5f * static_cast<float>(i) - 7.0f;
      y[i] = x[i] * scale[i % 4] + bias[i % 4];
    }
    scale_bias_ = Seed{"scale_bias", compile("scale_bias.stir"), {}, raw_bytes(y)};
    ASSERT_TRUE(npy::write_file((dir_ / "sb_x.npy").string(), {16, 4}, DType::kFloat32, raw_bytes(x)));
    scale_bias_.inputs.emplace_back("x", dir_ / "sb_x.npy");
    // Sanitizer reports get an exit code of their own in the child processes.
    ::setenv("ASAN_OPTIONS", "exitcode=86:detect_leaks=1", 1);
    ::setenv("UBSAN_OPTIONS", "exitcode=86:halt_on_error=1", 1);
    ::setenv("LSAN_OPTIONS", ("exitcode=86:suppressions=" + std::string(STOWAGE_SOURCE_DIR) +
                              "/tests/sanitizers/lsan.supp").c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs vm-run on `bytes`; returns a description of what was wrong, or "".
  std::string check_run(const Seed& seed, const std::vector<uint8_t>& bytes, bool allow_runtime_error,
                        bool info_only = false) {
    fs::path file = dir_ / "mutant.stw";
    fs::path out = dir_ / "out.npy";
    fs::remove(out);
    {
      std::ofstream f(file, std::ios::binary);
      f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    std::vector<std::string> argv = {std::string(STOWAGE_BINARY_DIR) + "/src/vm-run", file.string()};
    if (info_only) {
      argv.push_back("--info");
    } else {
      for (const auto& [name, file] : seed.inputs) {
        argv.push_back("--input");
        argv.push_back(name + "=" + file.string());
      }
      argv.push_back("--output");
      argv.push_back(out.string());
    }
    RunResult r = run_process(argv, dir_ / "stdout.txt", dir_ / "stderr.txt", std::chrono::seconds(60));
    if (r.exited) ++exit_codes_[r.exit_code];
    std::string problem = judge(seed, r, out, allow_runtime_error, info_only);
    if (!problem.empty()) {
      // Keep the file that failed, for a debugger.
      fs::path kept = fs::path(STOWAGE_BINARY_DIR) / "mutation-failure.stw";
      fs::copy_file(file, kept, fs::copy_options::overwrite_existing);
      problem += " (file kept as " + kept.string() + ")";
    }
    return problem;
  }

  std::string judge(const Seed& seed, const RunResult& r, const fs::path& out, bool allow_runtime_error,
                    bool info_only) {
    if (r.timed_out) return "hang (killed after 60 s)";
    if (!r.exited) return "killed by signal " + std::to_string(r.signal);
    if (r.exit_code == kSanitizerExitCode) return "sanitizer report: " + r.stderr_text;
    if (r.exit_code == 0 && info_only) return "";
    if (r.exit_code == 0) {
      auto result = npy::read_file(out.string());
      if (!result) return "exit 0 but no readable output: " + result.error().message();
      if (result->data != seed.expected) {
        return allow_runtime_error ? "" : "exit 0 with a wrong result";
      }
      return "";
    }
    bool one_line = !r.stderr_text.empty() && r.stderr_text.find('\n') == r.stderr_text.size() - 1 &&
                    r.stderr_text.rfind("vm-run: error: ", 0) == 0;
    if (r.exit_code == 1 && !one_line) {
      // An OpenCL compiler may print its own diagnostics to stderr before vm-run's
      // one line; vm-run's line must still be the only one it wrote, and the last.
      size_t last = r.stderr_text.rfind('\n', r.stderr_text.size() - 2);
      std::string tail = last == std::string::npos ? r.stderr_text : r.stderr_text.substr(last + 1);
      one_line = tail.rfind("vm-run: error: ", 0) == 0 &&
                 r.stderr_text.find("vm-run:") == r.stderr_text.size() - tail.size();
    }
    if (r.exit_code == 2 || (allow_runtime_error && r.exit_code == 1)) {
      return one_line ? "" : "exit " + std::to_string(r.exit_code) + " without a one-line error: " + r.stderr_text;
    }
    return "unexpected exit " + std::to_string(r.exit_code) + ": " + r.stderr_text;
  }

  static int mutations() {
    const char* env = std::getenv("STOWAGE_MUTATIONS");
    return env != nullptr ? std::atoi(env) : 10000;
  }

  fs::path dir_;
  Seed add_mul_;
  Seed scale_bias_;
  std::map<int, int> exit_codes_;
};

TEST_F(MutationTest, TheUnmutatedFilesRunCorrectly) {
  EXPECT_EQ(check_run(add_mul_, add_mul_.file, false), "");
  EXPECT_EQ(check_run(scale_bias_, scale_bias_.file, false), "");
}

// Half the mutants come from add_mul, half from scale_bias (constant sections).
TEST_F(MutationTest, MutatedFilesAreRefusedOrRunCorrectly) {
  std::mt19937_64 rng(20261121);
  const int n = mutations();
  for (int i = 0; i < n; ++i) {
    const Seed& seed = i % 2 == 0 ? add_mul_ : scale_bias_;
    std::vector<uint8_t> mutant = mutate(seed.file, rng);
    std::string problem = check_run(seed, mutant, /*allow_runtime_error=*/false);
    ASSERT_EQ(problem, "") << seed.name << " mutant " << i;
  }
  // Nearly every mutation is refused (a few leave the file as it was).
  EXPECT_EQ(exit_codes_[0] + exit_codes_[2], n);
  EXPECT_GT(exit_codes_[2], n * 9 / 10);
}

TEST_F(MutationTest, MutationsWithValidChecksumsReachTheValidatorSafely) {
  std::mt19937_64 rng(1121);
  const int n = std::max(1, mutations() / 5);
  for (int i = 0; i < n; ++i) {
    const Seed& seed = i % 2 == 0 ? add_mul_ : scale_bias_;
    std::vector<uint8_t> mutant = mutate(seed.file, rng);
    if (mutant.size() >= bytecode::kHeaderSize) testing::reseal(mutant);
    std::string problem = check_run(seed, mutant, /*allow_runtime_error=*/true, /*info_only=*/true);
    ASSERT_EQ(problem, "") << seed.name << " mutant " << i;
  }
}

}  // namespace
}  // namespace stowage
