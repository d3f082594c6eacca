// vm-run: runs a function of a Stowage bytecode file on an OpenCL device, with
// .npy files (or generated inputs: random, zeros) in, and .npy files or a summary
// of each result out.
//
// Exit codes: 0 success, 1 runtime error (device, OpenCL, capacity), 2 bad input
// (arguments, bytecode file, .npy files). Errors are one line on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>

#include "host_arrays.h"
#include "npy.h"
#include "profile_report.h"
#include "stowage/backend/opencl.h"
#include "stowage/bytecode/file.h"
#include "stowage/support/file.h"
#include "stowage/vm/vm.h"

namespace {

using namespace stowage;

constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;

struct Options {
  std::string file;
  std::string function = "main";
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::string device;
  int repeat = 1;
  int reps = 1;
  uint64_t seed = 0;
  bool profile = false;
  bool kernel_times = false;
  std::string profile_json;
  bool check_bounds = false;
  bool no_svm = false;
  bool info = false;
  bool list_devices = false;
};

// Keeps what an OpenCL driver's compiler prints straight to stderr (PoCL prints
// "N errors generated.") out of vm-run's output, whose errors are one line: a
// failed build is reported by the error itself (its first diagnostic), and
// STOWAGE_BUILD_LOG=FILE keeps the driver's whole log.
class QuietStderr {
 public:
  QuietStderr() {
    std::fflush(stderr);
    int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return;
    saved_ = ::dup(STDERR_FILENO);
    if (saved_ >= 0 && ::dup2(null, STDERR_FILENO) < 0) {
      ::close(saved_);
      saved_ = -1;
    }
    ::close(null);
  }
  ~QuietStderr() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
  }
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_ = -1;
};

// One line: newlines in driver messages (build logs) become "; ".
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ';');
  return text;
}

int fail(const Error& error) {
  std::cerr << "vm-run: error: " << one_line(error.message()) << "\n";
  return error.is_input_error() ? kExitBadInput : kExitRuntime;
}

std::string describe(const ValueDesc& d) {
  switch (d.kind) {
    case ValueKind::kTensor:
      return fmt::format("{}: Tensor[({}), {}]", d.name, fmt::join(d.shape, ", "), dtype_name(d.dtype));
    case ValueKind::kInt: return d.name + ": int";
    case ValueKind::kFloat: return d.name + ": float";
    case ValueKind::kBool: return d.name + ": bool";
    case ValueKind::kOther: return d.name + ": Object";
    case ValueKind::kTuple: {
      std::vector<std::string> fields;
      for (const ValueDesc& field : d.fields) fields.push_back(describe(field));
      return fmt::format("({})", fmt::join(fields, ", "));
    }
  }
  return d.name;
}

// How many values `f` returns: each field of a tuple, else its one result.
size_t output_count(const Function& f) { return f.result.kind == ValueKind::kTuple ? f.result.fields.size() : 1; }

std::string tensor_type(const std::vector<int64_t>& shape, DType dtype) {
  return fmt::format("Tensor[({}), {}]", fmt::join(shape, ", "), dtype_name(dtype));
}

// "result[0] NAME: TYPE" then, indented, the summary of its values (as
// iree-run-module prints its results).
void print_summary(size_t index, const std::string& name, const std::string& type, const std::string& summary) {
  fmt::print("result[{}]{}{}: {}\n", index, name.empty() ? "" : " ", name, type);
  if (!summary.empty()) fmt::print("  {}\n", summary);
}

// Copies each returned tensor to the host (waiting for the device) and writes it to
// its --output file; without --output, prints each result's type and a summary of
// its values. outputs.size() is 0 or the function's output count.
Status write_outputs(const Function& f, const vm::Value& result, const std::vector<std::string>& outputs) {
  std::vector<const vm::Value*> values;
  if (result.kind == vm::Value::Kind::kTuple) {
    for (const vm::Value& field : result.fields) values.push_back(&field);
  } else {
    values.push_back(&result);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const vm::Value& value = *values[i];
    const ValueDesc& desc = f.result.kind == ValueKind::kTuple && i < f.result.fields.size() ? f.result.fields[i]
                                                                                              : f.result;
    if (value.kind != vm::Value::Kind::kTensor) {
      if (outputs.empty()) {
        print_summary(i, desc.name, value.kind_name(),
                      value.kind == vm::Value::Kind::kInt     ? fmt::format("{}", value.int_value)
                      : value.kind == vm::Value::Kind::kFloat ? fmt::format("{:.6g}", value.float_value)
                                                              : "");
        continue;
      }
      return Error(ErrorKind::kInvalidInput,
                   fmt::format("'{}' returns {}, not a tensor to write", f.name, value.kind_name()));
    }
    vm::Tensor out = value.as_tensor();
    std::vector<std::byte> bytes(out.nbytes());
    out.copy_to_host(bytes);
    if (i < outputs.size()) {
      STOWAGE_TRY(npy::write_file(outputs[i], out.shape(), out.dtype(), bytes));
    } else if (outputs.empty()) {
      print_summary(i, desc.name, tensor_type(out.shape(), out.dtype()), host_arrays::summarize(out.dtype(), bytes));
    }
  }
  return Status::ok();
}

void print_info(const Executable& exe) {
  fmt::print("functions:\n");
  for (const auto& f : exe.functions) {
    std::vector<std::string> params;
    for (const auto& p : f.params) params.push_back(describe(p));
    fmt::print("  {}({}) -> {}  [{} registers, {} instructions]\n", f.name, fmt::join(params, ", "),
               describe(f.result), f.num_registers, f.code.size());
  }
  fmt::print("kernels:\n");
  for (const auto& k : exe.kernels) {
    std::vector<std::string> params;
    for (const auto& p : k.params) {
      std::string type = p.is_buffer() || p.kind == KernelParamKind::kScalar
                             ? fmt::format("{}{}{}", p.is_const ? "const " : "", dtype_name(p.dtype),
                                           p.lanes > 1 ? fmt::format("x{}", p.lanes) : "")
                             : "";
      params.push_back(fmt::format("{} {} {}", kernel_param_kind_name(p.kind), type, p.name));
    }
    fmt::print("  {} (unit '{}'): {}\n", k.name, exe.units[k.unit].name, fmt::join(params, ", "));
  }
  if (!exe.tensor_constants.empty()) {
    uint64_t tensor_bytes = 0;
    for (const auto& c : exe.tensor_constants) tensor_bytes += *checked_nbytes(c.shape, c.dtype);
    fmt::print("constants: {} tensor{}, {} bytes (uploaded once per VM, apart from activations)\n",
               exe.tensor_constants.size(), exe.tensor_constants.size() == 1 ? "" : "s", tensor_bytes);
    for (size_t i = 0; i < exe.constant_storages.size(); ++i) {
      const auto& s = exe.constant_storages[i];
      uint64_t count = 0;
      for (const auto& c : exe.tensor_constants) count += c.storage == i ? 1 : 0;
      if (s.kind == ScopeKind::kImage2d) {
        fmt::print("  scope {}: image of {}x{} {} pixels, {} bytes, {} tensor\n", s.scope, s.image.height,
                   s.image.width, dtype_name(s.pixel_dtype), s.nbytes, count);
      } else {
        fmt::print("  scope {}: buffer of {} bytes, {} tensor{}\n", s.scope, s.nbytes, count, count == 1 ? "" : "s");
      }
    }
  }
  fmt::print("requirements:\n");
  std::vector<std::string> features;
  if (exe.requirements.features & kFeatureImages) features.push_back("images");
  if (exe.requirements.features & kFeatureFp16) features.push_back("fp16");
  if (exe.requirements.features & kFeatureFp64) features.push_back("fp64");
  fmt::print("  features: {}\n", features.empty() ? "none" : fmt::format("{}", fmt::join(features, ", ")));
  for (const auto& s : exe.requirements.scopes) {
    fmt::print("  scope {}: {}{}, largest storage {} bytes, offsets aligned to {}\n", s.scope,
               s.kind == ScopeKind::kBuffer ? "buffer" : "image2d",
               s.onchip ? fmt::format(", on-chip capacity {} bytes", s.capacity) : "", s.max_storage_bytes,
               s.offset_alignment == (uint64_t{1} << 63) ? std::string("(all at 0)") : fmt::to_string(s.offset_alignment));
  }
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void print_profile(const vm::Profile& p, int repeat) {
  fmt::print("profile ({} invocation{}):\n", repeat, repeat == 1 ? "" : "s");
  fmt::print("  {:<12} {:>5}  {:<26} {:<24} {:>8} {:>12} {:>10}\n", "function", "index", "instruction", "detail",
             "count", "total us", "mean us");
  for (const auto& ip : p.instructions) {
    fmt::print("  {:<12} {:>5}  {:<26} {:<24} {:>8} {:>12.1f} {:>10.2f}\n", ip.function, ip.index,
               opcode_info(ip.op).name, ip.detail, ip.count, ip.total_us, ip.total_us / static_cast<double>(ip.count));
  }
  fmt::print("  device allocations: {} ({} bytes, {} in shared virtual memory), tensor views created: {}, kernel "
             "launches: {}\n",
             p.device_allocations, p.device_bytes_allocated, p.svm_allocations, p.sub_buffers_created,
             p.kernel_launches);
  fmt::print("  programs: {} built from source, {} loaded from the disk cache\n", p.programs_built, p.programs_loaded);
  fmt::print("  transfers: {} host to device ({} bytes), {} device to host ({} bytes); constants: {} bytes\n",
             p.host_to_device, p.host_to_device_bytes, p.device_to_host, p.device_to_host_bytes, p.constant_bytes);
  fmt::print("  bytes per scope:\n");
  for (const auto& s : p.scopes) {
    fmt::print("    {:<22} in use {:>10}  peak {:>10}  allocations {:>4}{}\n", s.scope, s.in_use, s.peak,
               s.allocations,
               s.onchip ? fmt::format("  capacity {}{}", s.capacity, s.emulated ? " (emulated on-chip)" : "") : "");
  }
}

// Kernels by their time on the device, most first, and how busy the device was.
void print_kernel_times(const vm::Profile& p, int invocations) {
  std::vector<const vm::InstructionProfile*> kernels;
  for (const auto& ip : p.instructions) {
    if (ip.device_count > 0) kernels.push_back(&ip);
  }
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const auto* a, const auto* b) { return a->device_us > b->device_us; });
  const double n = invocations;
  fmt::print("kernel times on the device ({} invocation{} after one not counted; OpenCL profiling events):\n",
             invocations, invocations == 1 ? "" : "s");
  fmt::print("  {:<12} {:>5}  {:<44} {:>8} {:>12} {:>7}\n", "function", "index", "kernel", "launches",
             "us each", "share");
  for (const auto* ip : kernels) {
    fmt::print("  {:<12} {:>5}  {:<44} {:>8} {:>12.2f} {:>6.1f}%\n", ip->function, ip->index, ip->detail,
               ip->device_count, ip->device_us / static_cast<double>(ip->device_count),
               p.device_busy_us > 0 ? 100.0 * ip->device_us / p.device_busy_us : 0.0);
  }
  const double idle = std::max(0.0, p.device_span_us - p.device_busy_us);
  fmt::print("  per invocation: {:.1f} us in kernels, {:.1f} us from the first kernel's start to the last one's end, "
             "{:.1f} us ({:.0f}%) idle between kernels\n",
             p.device_busy_us / n, p.device_span_us / n, idle / n,
             p.device_span_us > 0 ? 100.0 * idle / p.device_span_us : 0.0);
}

int run(const Options& opt) {
  if (opt.list_devices) {
    for (const auto& d : opencl::list_devices()) fmt::print("{}\n  {}\n", d.summary(), d.capabilities());
    if (opt.file.empty()) return 0;
  }
  if (opt.file.empty()) return fail(Error(ErrorKind::kInvalidInput, "no bytecode file given"));
  auto loaded = read_bytecode_file(opt.file);
  if (!loaded) return fail(loaded.error());
  auto exe = std::make_shared<const Executable>(loaded.take());
  if (opt.info) {
    print_info(*exe);
    auto device = opencl::select_device(opt.device, exe->requirements,
                                        opt.no_svm ? opencl::BufferViews::kSubBuffers
                                                   : opencl::BufferViews::kSvmWhereOffered);
    if (!device) return fail(device.error());
    fmt::print("device: {}\n", device->summary());
    if (opt.inputs.empty()) return 0;
  }

  int64_t index = exe->find_function(opt.function);
  if (index < 0) return fail(Error(ErrorKind::kInvalidInput, fmt::format("{}: no function '{}'", opt.file, opt.function)));
  const Function& f = exe->functions[static_cast<size_t>(index)];

  // NAME=FILE.npy names a parameter; a bare FILE.npy takes the next parameter not
  // named. In place of FILE.npy, `random` or `zeros` makes the input from the
  // parameter's shape and dtype in the file.
  std::map<std::string, std::string> input_files;
  std::vector<std::string> positional;
  for (const auto& spec : opt.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos) {
      positional.push_back(spec);
      continue;
    }
    if (eq == 0) return fail(Error(ErrorKind::kInvalidInput, fmt::format("--input '{}' is not NAME=FILE.npy", spec)));
    input_files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  for (const auto& p : f.params) {
    if (positional.empty()) break;
    if (input_files.count(p.name) != 0) continue;
    input_files[p.name] = positional.front();
    positional.erase(positional.begin());
  }
  if (!positional.empty()) {
    return fail(Error(ErrorKind::kInvalidInput, fmt::format("--input '{}': '{}' takes {} parameters, all given",
                                                            positional.front(), f.name, f.params.size())));
  }
  std::vector<vm::Value> args;
  // Generated inputs are drawn in parameter order from one engine, so that two
  // random inputs differ and a seed gives the same inputs every time.
  std::mt19937_64 engine(opt.seed);
  std::vector<std::string> generated;  // printed once every input is known good
  for (const auto& p : f.params) {
    auto it = input_files.find(p.name);
    if (it == input_files.end()) {
      return fail(Error(ErrorKind::kInvalidInput, fmt::format("missing --input {}=FILE.npy for parameter '{}' of '{}'",
                                                              p.name, p.name, f.name)));
    }
    if (p.kind != ValueKind::kTensor) {
      return fail(Error(ErrorKind::kInvalidInput, fmt::format("parameter '{}' is not a tensor", p.name)));
    }
    if (it->second == "random" || it->second == "zeros") {
      const std::string what = fmt::format("--input {}={}", p.name, it->second);
      auto bytes = it->second == "random" ? host_arrays::random(p.shape, p.dtype, engine, what)
                                          : host_arrays::zeros(p.shape, p.dtype, what);
      if (!bytes) return fail(bytes.error());
      generated.push_back(fmt::format("{}: {} {}{}\n", p.name, it->second, tensor_type(p.shape, p.dtype),
                                      it->second == "random" ? fmt::format(", seed {}", opt.seed) : ""));
      args.push_back(vm::Value::from(vm::host_tensor(p.shape, p.dtype, *bytes)));
      input_files.erase(it);
      continue;
    }
    // No file larger than the parameter's tensor (and a header) is read.
    std::optional<uint64_t> nbytes = checked_nbytes(p.shape, p.dtype);
    auto array = npy::read_file(it->second, nbytes.value_or(npy::kMaxDataBytes));
    if (!array) return fail(array.error());
    args.push_back(vm::Value::from(vm::host_tensor(array->shape, array->dtype, array->data)));
    input_files.erase(it);
  }
  if (!input_files.empty()) {
    return fail(Error(ErrorKind::kInvalidInput,
                      fmt::format("--input '{}': '{}' has no such parameter", input_files.begin()->first, f.name)));
  }
  // Checked before anything runs: one --output per returned value, in order.
  if (!opt.outputs.empty() && opt.outputs.size() != output_count(f)) {
    const size_t want = output_count(f);
    return fail(Error(ErrorKind::kInvalidInput,
                      fmt::format("'{}' returns {} output{}, but --output was given {} time{}; give it once per "
                                  "output, in order",
                                  f.name, want, want == 1 ? "" : "s", opt.outputs.size(),
                                  opt.outputs.size() == 1 ? "" : "s")));
  }
  for (const std::string& line : generated) fmt::print("{}", line);

  vm::VmOptions vm_options;
  vm_options.device = opt.device;
  vm_options.profile = opt.profile;
  vm_options.kernel_times = opt.kernel_times || !opt.profile_json.empty();
  vm_options.check_bounds = opt.check_bounds;
  vm_options.svm = !opt.no_svm;
  Expected<std::unique_ptr<vm::VirtualMachine>> machine = Error(ErrorKind::kRuntime, "not created");
  {
    QuietStderr quiet;  // the driver's compiler while it builds the kernels
    machine = vm::VirtualMachine::create(exe, vm_options);
  }
  if (!machine) return fail(machine.error());
  // Inputs go to the device once, however often the function runs.
  for (vm::Value& arg : args) arg = vm::Value::from((*machine)->upload(arg.as_tensor()));
  vm::Value result;
  if (vm_options.kernel_times) {  // the first launches of a kernel may include the driver's own set-up
    (*machine)->invoke(opt.function, args);
    (*machine)->synchronize();
    (*machine)->reset_profile();
  }
  // --reps R: R rounds of --repeat N invokes, each round timed to the device's end.
  std::vector<double> per_invoke_us;
  std::vector<double> enqueue_us;  // host time to issue a round, before waiting for the device
  uint64_t launches_before = (*machine)->profile().kernel_launches;
  std::chrono::duration<double, std::micro> took{};
  // Progress on a terminal only: one line with a bar, rewritten in place after each
  // round, then cleared (as stowage's own progress line draws it).
  const bool progress = opt.reps > 1 && ::isatty(STDERR_FILENO) == 1;
  std::string progress_line;
  auto draw_progress = [&](int done) {
    constexpr int kBarWidth = 24;
    const int filled = kBarWidth * done / opt.reps;
    progress_line = fmt::format("vm-run: rounds [{}{}] {}/{}", std::string(filled, '#'),
                                std::string(kBarWidth - filled, '.'), done, opt.reps);
    fmt::print(stderr, "\r{}", progress_line);
    std::fflush(stderr);
  };
  if (progress) draw_progress(0);
  for (int rep = 0; rep < opt.reps; ++rep) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < opt.repeat; ++i) {
      result = vm::Value();  // drop the last result so its storage is reused
      result = (*machine)->invoke(opt.function, args);
    }
    enqueue_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                         opt.repeat);
    (*machine)->synchronize();
    took = std::chrono::steady_clock::now() - start;
    per_invoke_us.push_back(took.count() / opt.repeat);
    if (progress) draw_progress(rep + 1);
  }
  if (progress) {
    fmt::print(stderr, "\r{:{}}\r", "", progress_line.size());
    std::fflush(stderr);
  }
  const double launches = static_cast<double>((*machine)->profile().kernel_launches - launches_before) /
                          (static_cast<double>(opt.repeat) * opt.reps);

  // --output files are written before anything is printed; without them the
  // results' summaries follow the timings.
  if (!opt.outputs.empty()) {
    if (Status status = write_outputs(f, result, opt.outputs); !status) return fail(status.error());
  }
  if (opt.repeat > 1 || opt.profile) {
    fmt::print("{}: {} invocation{} in {:.1f} us ({:.2f} us each) on {}\n", f.name, opt.repeat,
               opt.repeat == 1 ? "" : "s", took.count(), took.count() / opt.repeat, (*machine)->device().summary());
  }
  if (opt.reps > 1) {
    std::vector<double> sorted = per_invoke_us;
    std::sort(sorted.begin(), sorted.end());
    fmt::print("timing: {} rounds of {} invocations: median {:.2f} us, min {:.2f} us per invocation; {:.1f} kernel "
               "launches per invocation\n",
               opt.reps, opt.repeat, median_of(per_invoke_us), sorted.front(), launches);
    // When issuing takes as long as the whole round, the host, not the device, sets the pace.
    fmt::print("host: median {:.2f} us per invocation to issue its commands\n", median_of(enqueue_us));
  }
  if (opt.outputs.empty()) {
    if (Status status = write_outputs(f, result, opt.outputs); !status) return fail(status.error());
  }
  if (opt.profile) print_profile((*machine)->profile(), opt.repeat);
  if (opt.kernel_times) {
    print_kernel_times((*machine)->profile(), opt.repeat * opt.reps);
    print_node_times((*machine)->profile(), opt.repeat * opt.reps);
  }
  if (!opt.profile_json.empty()) {
    uint64_t dropped = 0;
    std::vector<vm::LaunchRecord> launches = (*machine)->launches(&dropped);
    Status written = write_file_atomically(opt.profile_json, vm::chrome_trace(*exe, launches), "trace file",
                                           WrittenFile::kOutput);
    if (!written) return fail(written.error());
    fmt::print("trace: {} kernel launches written to {}{}\n", launches.size(), opt.profile_json,
               dropped == 0 ? "" : fmt::format(" ({} past the first {} not recorded)", dropped,
                                               vm::VirtualMachine::kMaxRecordedLaunches));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs a function of a Stowage bytecode file on an OpenCL device.", "vm-run"};
  app.footer(
      "Without --output, each result's type, min, max, mean and first values are printed.\n"
      "Exit status: 0 success, 1 runtime error (device, OpenCL, capacity, host memory), 2 bad input\n"
      "(arguments, the bytecode file, .npy files read or written).");
  Options opt;
  app.add_option("file", opt.file, "bytecode file (.stw)");
  app.add_option("--function,-f", opt.function, "function to run")->capture_default_str();
  app.add_option("--input,-i", opt.inputs,
                 "NAME=FILE.npy for a tensor parameter, or FILE.npy for the next parameter not named; in place of "
                 "FILE.npy, 'random' (floats in [-1, 1), integers in [0, 10), from --seed) or 'zeros' makes the "
                 "input from the parameter's shape and dtype in the file (./random for a file so named)");
  app.add_option("--output,-o", opt.outputs,
                 "where to write the result (.npy); for a function returning a tuple, once per output, in order")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--device,-d", opt.device,
                 "opencl:N, gpu, cpu or part of a device name (default: STOWAGE_DEVICE, else the first suitable)");
  app.add_option("--seed", opt.seed, "seed of the random inputs")->capture_default_str();
  app.add_option("--repeat,-r", opt.repeat, "invoke N times")->check(CLI::Range(1, 100000000))->capture_default_str();
  app.add_option("--reps", opt.reps,
                 "time R rounds of --repeat invocations; print their median and min (progress on a terminal)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_flag("--profile", opt.profile, "per-instruction time, device allocations, bytes per scope");
  app.add_flag("--kernel-times", opt.kernel_times,
               "each kernel's time on the device and the device's idle time between kernels (profiling events)");
  app.add_option("--profile-json", opt.profile_json,
                 "write the kernel launches as a Chrome trace (chrome://tracing, Perfetto), each named after the "
                 "model nodes it computes; times kernels as --kernel-times does")
      ->type_name("FILE");
  app.add_flag("--check-bounds", opt.check_bounds,
               "guard the end of every storage and fail on the kernel that writes past one (slow)");
  app.add_flag("--no-svm", opt.no_svm,
               "give kernels sub-buffers even where the device offers shared virtual memory (VmOptions::svm)");
  app.add_flag("--info", opt.info, "print functions, kernels and requirements");
  app.add_flag("--list-devices", opt.list_devices, "print the OpenCL devices");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "vm-run: error: " << one_line(e.what()) << " (see vm-run --help)\n";
    return kExitBadInput;
  }
  try {
    return run(opt);
  } catch (const StowageError& e) {
    return fail(e.error());
  } catch (const std::bad_alloc&) {
    std::cerr << "vm-run: error: out of host memory\n";
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::cerr << "vm-run: error: " << one_line(e.what()) << "\n";
    return kExitRuntime;
  }
}
