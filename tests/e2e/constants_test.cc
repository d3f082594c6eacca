// Device-resident tensors and constants end to end: the parameters of a tensor-level
// program feed its kernel, results stay on the device, constants (buffer and
// texture, small and 50 MB) are uploaded once per VM, through the C++ API and vm-run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "npy.h"
#include "opencl_target.h"
#include "process.h"
#include "source_files.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/builder.h"
#include "stowage/ir/compiler.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

namespace fs = std::filesystem;

const TargetDesc& opencl() { return testing::opencl_target(); }

std::shared_ptr<const Executable> compile_example(const std::string& name) {
  auto compiled = ir::compile_text(testing::read_source_file("examples/" + name), name, opencl()).value_or_throw();
  return std::make_shared<const Executable>(std::move(compiled.executable));
}

template <typename T>
vm::Tensor host(std::vector<int64_t> shape, const std::vector<T>& values) {
  DType dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kInt32;
  return vm::host_tensor(std::move(shape), dtype, std::as_bytes(std::span(values)));
}

std::vector<int32_t> ints(int seed) {
  std::vector<int32_t> v(256);
  for (int i = 0; i < 256; ++i) v[i] = (i * 37 + seed * 11) % 201 - 100;
  return v;
}

TEST(DeviceTensors, TheIssueProgramRunsWithParametersStraightInTheKernel) {
  auto machine = vm::VirtualMachine::create(compile_example("vadd.stir")).value_or_throw();
  std::vector<int32_t> x = ints(1), y = ints(2), want(256);
  for (int i = 0; i < 256; ++i) want[i] = x[i] + y[i];
  vm::Value out = machine->invoke("main", {vm::Value::from(host({4, 64}, x)), vm::Value::from(host({4, 64}, y))});
  EXPECT_FALSE(out.as_tensor().on_host());
  EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), want);
  // t = f(x, y); u = f(t, y): t goes in as it lies on the device.
  machine->reset_profile();
  vm::Value again = machine->invoke("main", {out, vm::Value::from(host({4, 64}, y))});
  vm::Profile p = machine->profile();
  EXPECT_EQ(p.host_to_device, 1u);  // y
  EXPECT_EQ(p.device_to_host, 0u);
  for (int i = 0; i < 256; ++i) want[i] += y[i];
  EXPECT_EQ(again.as_tensor().to_vector<int32_t>(), want);
}

TEST(DeviceTensors, TheIssueProgramRunsThroughVmRun) {
  fs::path dir = fs::temp_directory_path() / ("stowage-vadd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(write_bytecode_file(*compile_example("vadd.stir"), (dir / "vadd.stw").string()));
  std::vector<int32_t> x = ints(3), y = ints(4);
  for (auto [name, data] : {std::pair{"x", &x}, std::pair{"y", &y}}) {
    std::vector<std::byte> raw(1024);
    std::memcpy(raw.data(), data->data(), raw.size());
    ASSERT_TRUE(npy::write_file((dir / (std::string(name) + ".npy")).string(), {4, 64}, DType::kInt32, raw));
  }
  testing::RunResult r = testing::run_process(
      {std::string(STOWAGE_BINARY_DIR) + "/src/vm-run", (dir / "vadd.stw").string(), "--input",
       "x=" + (dir / "x.npy").string(), "--input", "y=" + (dir / "y.npy").string(), "--output",
       (dir / "out.npy").string(), "--repeat", "3"},
      dir / "stdout.txt", dir / "stderr.txt", std::chrono::seconds(120));
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.stderr_text;
  auto out = npy::read_file((dir / "out.npy").string());
  ASSERT_TRUE(out) << out.error().message();
  std::vector<int32_t> got(256);
  ASSERT_EQ(out->data.size(), 1024u);
  std::memcpy(got.data(), out->data.data(), 1024);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(got[i], x[i] + y[i]) << i;
  fs::remove_all(dir);
}

TEST(Constants, TheExampleRunsAndUploadsItsConstantsOnce) {
  auto exe = compile_example("scale_bias.stir");
  ASSERT_EQ(exe->tensor_constants.size(), 2u);
  auto machine = vm::VirtualMachine::create(exe).value_or_throw();
  // One storage holds both constants; compiled in this process, each constant is written
  // from where the module keeps it (a file read back is one piece: one write).
  EXPECT_EQ(machine->profile().host_to_device, 2u);
  EXPECT_EQ(machine->profile().constant_bytes, 144u);
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * static_cast<float>(i) - 3.0f;
  vm::Tensor input = machine->upload(host({16, 4}, x));
  const float scale[4] = {0.5f, 2.0f, -1.0f, 4.0f}, bias[4] = {1.0f, 0.0f, 0.25f, -3.0f};
  for (int round = 0; round < 100; ++round) {
    vm::Value out = machine->invoke("main", {vm::Value::from(input)});
    if (round % 25 != 0) continue;
    std::vector<float> y = out.as_tensor().to_vector<float>();
    for (int i = 0; i < 64; ++i) ASSERT_EQ(y[i], x[i] * scale[i % 4] + bias[i % 4]) << i;
  }
  EXPECT_EQ(machine->profile().host_to_device, 3u);  // the constants and the input, each once
  EXPECT_EQ(machine->profile().device_to_host, 4u);
}

TEST(Constants, ATextureConstantIsAnImageInItsLayout) {
  ir::ModuleBuilder mb;
  mb.add_kernels("ops", R"(
__constant sampler_t nearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void image_to_buffer(read_only image2d_t src, __global float4* dst, int width) {
  int x = get_global_id(0), y = get_global_id(1);
  dst[y * width + x] = read_imagef(src, nearest, (int2)(x, y));
}
)");
  // [2, 3, 5, 4] in the activation layout: an image of 2 x 3 = 6 rows of 5 pixels.
  std::vector<float> values(2 * 3 * 5 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 9.0f;
  auto bytes = std::make_shared<std::vector<std::byte>>(values.size() * 4);
  std::memcpy(bytes->data(), values.data(), bytes->size());
  mb.add_constant("w", ir::Type::tensor({2, 3, 5, 4}, DType::kFloat32), bytes, "global.texture");
  ir::FunctionBuilder fb = mb.function("main");
  std::string out = fb.empty({2, 3, 5, 4}, DType::kFloat32);
  fb.call_kernel("image_to_buffer", {ir::Arg::variable("w"), ir::Arg::variable(out), ir::Arg::integer(5)}, {5, 6});
  mb.add_function(fb.ret(out));
  auto compiled = ir::compile_module(mb.module(), opencl()).value_or_throw();
  ASSERT_EQ(compiled.executable.constant_storages.size(), 1u);
  EXPECT_EQ(compiled.executable.constant_storages[0].image.height, 6u);
  EXPECT_EQ(compiled.executable.constant_storages[0].image.width, 5u);
  auto machine =
      vm::VirtualMachine::create(std::make_shared<const Executable>(compiled.executable)).value_or_throw();
  EXPECT_EQ(machine->invoke("main", {}).as_tensor().to_vector<float>(), values);
}

// A module with one 50 MB constant: compiled, saved, loaded (mapped), run 100 times
// with the constant uploaded once.
TEST(Constants, FiftyMegabytesCompileSaveLoadAndRun) {
  constexpr int64_t kElements = 50 * 1000 * 1000 / 4;  // 50 MB of float32
  constexpr int64_t kStride = 12207;                  // samples w across all of it
  auto data = std::make_shared<std::vector<std::byte>>(kElements * 4);
  auto* w = reinterpret_cast<float*>(data->data());
  for (int64_t i = 0; i < kElements; ++i) w[i] = static_cast<float>(i % 4093);
  ir::ModuleBuilder mb;
  mb.add_kernels("ops", R"(
__kernel void sample(__global const float* x, __global const float* w, __global float* y, int stride) {
  size_t i = get_global_id(0);
  y[i] = x[i] + w[i * stride];
}
)");
  mb.add_constant("w", ir::Type::tensor({kElements}, DType::kFloat32), data);
  ir::FunctionBuilder fb = mb.function("main");
  std::string x = fb.param("x", ir::Type::tensor({1024}, DType::kFloat32));
  std::string y = fb.empty({1024}, DType::kFloat32);
  fb.call_kernel("sample", {ir::Arg::variable(x), ir::Arg::variable("w"), ir::Arg::variable(y), ir::Arg::integer(kStride)},
                 {1024});
  mb.add_function(fb.ret(y));
  auto compiled = ir::compile_module(mb.module(), opencl()).value_or_throw();
  fs::path file = fs::temp_directory_path() / ("stowage-50mb-" + std::to_string(::getpid()) + ".stw");
  ASSERT_TRUE(write_bytecode_file(compiled.executable, file.string()));
  EXPECT_GT(fs::file_size(file), 50u * 1000 * 1000);
  auto loaded = read_bytecode_file(file.string());
  fs::remove(file);
  ASSERT_TRUE(loaded) << loaded.error().message();
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(loaded.take())).value_or_throw();
  std::vector<float> xs(1024);
  for (int i = 0; i < 1024; ++i) xs[i] = static_cast<float>(i);
  vm::Tensor input = machine->upload(host({1024}, xs));
  vm::Value out;
  for (int round = 0; round < 100; ++round) out = machine->invoke("main", {vm::Value::from(input)});
  std::vector<float> got = out.as_tensor().to_vector<float>();
  for (int i = 0; i < 1024; ++i) {
    ASSERT_EQ(got[i], static_cast<float>(i) + static_cast<float>((int64_t{i} * kStride) % 4093)) << i;
  }
  vm::Profile p = machine->profile();
  EXPECT_EQ(p.host_to_device, 2u);  // the constant once, the input once
  EXPECT_EQ(p.host_to_device_bytes, static_cast<uint64_t>(kElements * 4 + 4096));
  EXPECT_EQ(p.constant_bytes, static_cast<uint64_t>(kElements * 4));
}

}  // namespace
}  // namespace stowage
