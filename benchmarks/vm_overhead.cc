// What the VM adds to a kernel launch: a function of N calls of a trivial kernel,
// run through the VM, against the same N launches from a bare OpenCL loop on the
// same device (one cl_kernel, argument set once, clEnqueueNDRangeKernel N times,
// clFinish). Both are timed by Google Benchmark; the table at the end gives the
// VM's added time per kernel call and per executed instruction.
//
//   vm_overhead [--calls=N[,N...]] [--device=SPEC] [--repetitions=R]
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "stowage/backend/opencl.h"
#include "stowage/backend/program_cache.h"
#include "stowage/vm/vm.h"

namespace {

using namespace stowage;

const char* kSource = "__kernel void bump(__global int* a) { a[get_global_id(0)] += 1; }\n";

std::string g_device;

// main(): s = alloc_storage([1024]); t = alloc_tensor(s, 0, [256]); N x call_kernel(bump, t); ret t
Executable make_executable(int64_t calls) {
  Executable exe;
  exe.strings = {"global"};
  Constant size, shape, grid;
  size.shape = {1024};
  shape.shape = {256};
  grid.shape = {256};
  exe.constants = {size, shape, grid};
  exe.units = {KernelUnit{"bench", kSource}};
  KernelSignature sig;
  sig.name = "bump";
  sig.params = {{"a", KernelParamKind::kGlobalBuffer, DType::kInt32, 1, false}};
  exe.kernels = {sig};
  Function f;
  f.name = "main";
  f.result = ValueDesc{"t", ValueKind::kTensor, DType::kInt32, {256}};
  f.num_registers = 2;
  auto ins = [](Opcode op, std::initializer_list<uint64_t> ops, std::vector<uint32_t> list = {}) {
    Instruction i;
    i.op = op;
    size_t k = 0;
    for (uint64_t v : ops) i.ops[k++] = v;
    i.list = std::move(list);
    return i;
  };
  f.code.push_back(ins(Opcode::kAllocStorage, {0, 0, 0, static_cast<uint64_t>(DType::kUInt8), 0}));
  f.code.push_back(ins(Opcode::kAllocTensor, {1, 0, 0, 1, static_cast<uint64_t>(DType::kInt32)}));
  for (int64_t i = 0; i < calls; ++i) f.code.push_back(ins(Opcode::kCallKernel, {0, 2, kNoConstant}, {1}));
  f.code.push_back(ins(Opcode::kRet, {1}));
  exe.functions = {f};
  ScopeRequirement global;
  global.scope = "global";
  global.max_storage_bytes = 1024;
  exe.requirements.scopes = {global};
  return exe;
}

void check(cl_int status, const char* what) {
  if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, what));
}

void BM_BareOpenCL(benchmark::State& state) {
  const int64_t calls = state.range(0);
  auto device = opencl::select_device(g_device, {}).value_or_throw();
  auto ctx = opencl::Context::create(device).value_or_throw();
  cl_int status = CL_SUCCESS;
  size_t length = std::strlen(kSource);
  cl_program program = clCreateProgramWithSource(ctx->context(), 1, &kSource, &length, &status);
  check(status, "clCreateProgramWithSource");
  cl_device_id dev = ctx->device();
  // The same build options as the VM's programs, so both launch the same code.
  check(clBuildProgram(program, 1, &dev, opencl::ProgramCache::kBuildOptions, nullptr, nullptr), "clBuildProgram");
  cl_kernel kernel = clCreateKernel(program, "bump", &status);
  check(status, "clCreateKernel");
  cl_mem buffer = clCreateBuffer(ctx->context(), CL_MEM_READ_WRITE, 1024, nullptr, &status);
  check(status, "clCreateBuffer");
  check(clSetKernelArg(kernel, 0, sizeof(cl_mem), &buffer), "clSetKernelArg");
  const size_t global = 256;
  for (auto _ : state) {
    for (int64_t i = 0; i < calls; ++i) {
      check(clEnqueueNDRangeKernel(ctx->queue(), kernel, 1, nullptr, &global, nullptr, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel");
    }
    check(clFinish(ctx->queue()), "clFinish");
  }
  clReleaseMemObject(buffer);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
}

void BM_StowageVM(benchmark::State& state) {
  const int64_t calls = state.range(0);
  auto exe = std::make_shared<const Executable>(make_executable(calls));
  vm::VmOptions options;
  options.device = g_device;
  auto machine = vm::VirtualMachine::create(exe, options).value_or_throw();
  machine->invoke("main", {});  // warm: programs, kernel objects, storage
  machine->synchronize();
  for (auto _ : state) {
    vm::Value out = machine->invoke("main", {});
    machine->synchronize();
  }
}

// Keeps the median of each benchmark's repetitions, by name.
class MedianCollector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> median_ns;  // "BM_x/N" -> ns per iteration
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        median_ns[run.run_name.function_name + "/" + run.run_name.args] =
            run.GetAdjustedRealTime() * (run.time_unit == benchmark::kMicrosecond ? 1e3 : 1.0);
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> calls = {100, 1000};
  int repetitions = 9;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--calls=")) {
      calls.clear();
      std::string list(arg.substr(8));
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        calls.push_back(std::stoll(list.substr(pos, comma - pos)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (arg.starts_with("--device=")) {
      g_device = std::string(arg.substr(9));
    } else if (arg.starts_with("--repetitions=")) {
      repetitions = std::stoi(std::string(arg.substr(14)));
    } else {
      rest.push_back(argv[i]);
    }
  }
  for (int64_t n : calls) {
    benchmark::RegisterBenchmark("BM_BareOpenCL", BM_BareOpenCL)
        ->Arg(n)->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(repetitions)->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark("BM_StowageVM", BM_StowageVM)
        ->Arg(n)->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(repetitions)->ReportAggregatesOnly(true);
  }
  int bench_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&bench_argc, rest.data());
  MedianCollector reporter;
  try {
    benchmark::RunSpecifiedBenchmarks(&reporter);
    auto device = opencl::select_device(g_device, {}).value_or_throw();
    fmt::print("\nVM overhead on {} ({})\n", device.name, device.platform);
    fmt::print("| kernel calls | bare OpenCL us/call | VM us/call | VM added us/call | VM added us/instruction |\n");
    fmt::print("| ---: | ---: | ---: | ---: | ---: |\n");
    for (int64_t n : calls) {
      double bare = reporter.median_ns[fmt::format("BM_BareOpenCL/{}", n)] / 1e3;
      double vm = reporter.median_ns[fmt::format("BM_StowageVM/{}", n)] / 1e3;
      double instructions = static_cast<double>(n + 3);
      fmt::print("| {} | {:.2f} | {:.2f} | {:.3f} | {:.3f} |\n", n, bare / n, vm / n, (vm - bare) / n,
                 (vm - bare) / instructions);
    }
  } catch (const StowageError& e) {
    fmt::print(stderr, "vm_overhead: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
