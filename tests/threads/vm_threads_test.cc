// Many VMs on many threads over one shared Executable, from a cold start: this
// binary holds only this test, so the OpenCL devices are enumerated for the first
// time while eight threads create their VMs at once. Every result must be right.
// build.sh runs it under ThreadSanitizer too (build-tsan/).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <latch>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bytecode/bytecode_test_util.h"
#include "stowage/vm/vm.h"

namespace stowage::vm {
namespace {

constexpr int kThreads = 8;
constexpr int kInvokesPerThread = 200;

Tensor int_tensor(const std::vector<int32_t>& values) {
  return host_tensor({4, 64}, DType::kInt32, std::as_bytes(std::span(values)));
}

// What one thread saw: results checked, and the first thing that went wrong.
struct ThreadReport {
  int right = 0;
  std::string problem;
};

void run_thread(const std::shared_ptr<const Executable>& exe, int thread, std::latch& start, ThreadReport& report) {
  start.arrive_and_wait();  // every thread creates its VM at the same moment
  try {
    auto vm = VirtualMachine::create(exe);
    if (!vm) {
      report.problem = "create: " + vm.error().message();
      return;
    }
    for (int i = 0; i < kInvokesPerThread; ++i) {
      std::vector<int32_t> x(256), y(256), z(256), expected(256);
      for (int k = 0; k < 256; ++k) {
        x[k] = k * 3 - 100 + thread * 1000 + i;
        y[k] = 7 - k + i;
        z[k] = (k % 13) - 6 + thread;
        expected[k] = (x[k] + y[k]) * z[k];
      }
      Value out = (*vm)->invoke("main", {Value::from(int_tensor(x)), Value::from(int_tensor(y)),
                                         Value::from(int_tensor(z))});
      if (out.as_tensor().to_vector<int32_t>() != expected) {
        report.problem = "invoke " + std::to_string(i) + " gave a wrong result";
        return;
      }
      ++report.right;
    }
  } catch (const std::exception& e) {
    report.problem = e.what();
  }
}

TEST(VmThreads, EightThreadsCreateVmsAtOnceFromAColdStartAndInvoke200TimesEach) {
  // A fresh kernel cache, so that the eight builds and cache writes race too.
  std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("stowage-threads-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache);
  ::setenv("STOWAGE_CACHE_DIR", cache.c_str(), 1);

  auto exe = std::make_shared<const Executable>(stowage::testing::make_add_mul_executable());
  std::latch start(kThreads);
  std::vector<ThreadReport> reports(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(run_thread, std::cref(exe), t, std::ref(start), std::ref(reports[t]));
  }
  for (auto& t : threads) t.join();
  int right = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(reports[t].problem, "") << "thread " << t;
    right += reports[t].right;
  }
  EXPECT_EQ(right, kThreads * kInvokesPerThread);
  // The cache holds the one unit's binary, whole, and no temporary file.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(cache)) files.push_back(entry.path().filename());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].ends_with(".bin")) << files[0];
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace stowage::vm
