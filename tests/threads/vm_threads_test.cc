// Many VMs on many threads over one shared Executable, from a cold start: this
// binary holds only these tests, so the OpenCL devices are enumerated for the first
// time while eight threads create their VMs at once. Then one VM invoked from eight
// threads at once, as one inference session is. Every result must be right.
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

// Every thread saw no problem and every one of its invokes right.
void expect_every_invoke_right(const std::vector<ThreadReport>& reports) {
  int right = 0;
  for (size_t t = 0; t < reports.size(); ++t) {
    EXPECT_EQ(reports[t].problem, "") << "thread " << t;
    right += reports[t].right;
  }
  EXPECT_EQ(right, kThreads * kInvokesPerThread);
}

// The inputs of invoke `i` on thread `thread`, and the result (x + y) * z they must give.
struct Case {
  std::vector<int32_t> x, y, z, expected;
};

Case make_case(int thread, int i) {
  Case c{std::vector<int32_t>(256), std::vector<int32_t>(256), std::vector<int32_t>(256), std::vector<int32_t>(256)};
  for (int k = 0; k < 256; ++k) {
    c.x[k] = k * 3 - 100 + thread * 1000 + i;
    c.y[k] = 7 - k + i;
    c.z[k] = (k % 13) - 6 + thread;
    c.expected[k] = (c.x[k] + c.y[k]) * c.z[k];
  }
  return c;
}

Value invoke_case(VirtualMachine& vm, const Case& c) {
  return vm.invoke("main", {Value::from(int_tensor(c.x)), Value::from(int_tensor(c.y)), Value::from(int_tensor(c.z))});
}

void run_thread(const std::shared_ptr<const Executable>& exe, int thread, std::latch& start, ThreadReport& report) {
  start.arrive_and_wait();  // every thread creates its VM at the same moment
  try {
    auto vm = VirtualMachine::create(exe);
    if (!vm) {
      report.problem = "create: " + vm.error().message();
      return;
    }
    for (int i = 0; i < kInvokesPerThread; ++i) {
      Case c = make_case(thread, i);
      Value out = invoke_case(**vm, c);
      if (out.as_tensor().to_vector<int32_t>() != c.expected) {
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
  expect_every_invoke_right(reports);
  // The cache holds the one unit's binary, whole, and no temporary file.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(cache)) files.push_back(entry.path().filename());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].ends_with(".bin")) << files[0];
  std::filesystem::remove_all(cache);
}

// One thread's share of invokes on the VM all threads share. Each keeps its previous
// result and checks it again after its next invoke (results own their storage, so
// other threads' invokes must not overwrite them), drops results on its own thread
// while others run, and every eighth invoke reads the profile meanwhile.
void run_on_shared_vm(VirtualMachine& vm, int thread, std::latch& start, ThreadReport& report) {
  start.arrive_and_wait();
  try {
    Value previous;
    std::vector<int32_t> previous_expected;
    for (int i = 0; i < kInvokesPerThread; ++i) {
      Case c = make_case(thread, i);
      Value out = invoke_case(vm, c);
      if (out.as_tensor().to_vector<int32_t>() != c.expected) {
        report.problem = "invoke " + std::to_string(i) + " gave a wrong result";
        return;
      }
      if (previous.kind == Value::Kind::kTensor && previous.as_tensor().to_vector<int32_t>() != previous_expected) {
        report.problem = "the result of invoke " + std::to_string(i - 1) + " changed after invoke " + std::to_string(i);
        return;
      }
      if (i % 8 == 0 && vm.profile().scopes.empty()) {
        report.problem = "the profile lost its scopes";
        return;
      }
      previous = std::move(out);
      previous_expected = std::move(c.expected);
      ++report.right;
    }
  } catch (const std::exception& e) {
    report.problem = e.what();
  }
}

TEST(VmThreads, OneVmInvokedFromEightThreadsAtOnceGivesEveryResultRight) {
  auto exe = std::make_shared<const Executable>(stowage::testing::make_add_mul_executable());
  auto vm = VirtualMachine::create(exe);
  ASSERT_TRUE(vm) << vm.error().message();
  std::latch start(kThreads);
  std::vector<ThreadReport> reports(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(run_on_shared_vm, std::ref(**vm), t, std::ref(start), std::ref(reports[t]));
  }
  for (auto& t : threads) t.join();
  expect_every_invoke_right(reports);
  // The VM goes on as before once the threads are gone.
  Case last = make_case(kThreads, kInvokesPerThread);
  EXPECT_EQ(invoke_case(**vm, last).as_tensor().to_vector<int32_t>(), last.expected);
}

}  // namespace
}  // namespace stowage::vm
