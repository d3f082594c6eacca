// The planning pass: exact planned programs, spills, the report, and a property
// test that runs random planned programs on PoCL against every tensor in its own
// storage.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/vm/vm.h"

namespace stowage::ir {
namespace {

constexpr const char* kKernels = R"(kernels ops """
__kernel void add(__global const float* a, __global const float* b, __global float* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}

__kernel void scale(__global const float* a, __global float* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] * 1.5f - 2.0f;
}
"""

)";

TargetDesc opencl_target() { return TargetDesc::load("opencl").value_or_throw(); }

// The function's text after planning (kernel units left out).
std::string planned_function(const std::string& body, const TargetDesc& target, CompileResult* out = nullptr,
                             PlanOptions plan = {}) {
  CompileOptions options;
  options.plan = plan;
  auto result = compile_text(std::string(kKernels) + body, "t.stir", target, options);
  if (!result) return "ERROR " + result.error().message();
  std::string text = print_function(result->module.functions[0]);
  if (out != nullptr) *out = result.take();
  return text;
}

TEST(PlanPassTest, PacksReusesAndKillsAfterLastUse) {
  std::string planned = planned_function(R"(fn main(x: Tensor[(256), float32]) -> Tensor[(256), float32] {
  a = empty([256], float32, scope="global")
  copy_tensor(x, a)
  b = empty([256], float32, scope="global")
  call_kernel(scale, [a, b], grid=[256])
  c = empty([256], float32, scope="global")
  call_kernel(scale, [b, c], grid=[256])
  d = empty([256], float32, scope="global")
  call_kernel(add, [c, b, d], grid=[256])
  return d
}
)", opencl_target());
  EXPECT_EQ(planned, R"(fn main(x: Tensor[(256,), float32]) -> Tensor[(256,), float32] {
  arena0 = alloc_storage([2048], device=0, dtype=uint8, scope="global")
  a = alloc_tensor(arena0, 1024, [256], float32)
  copy_tensor(x, a)
  b = alloc_tensor(arena0, 0, [256], float32)
  call_kernel(scale, [a, b], grid=[256])
  kill_object(a)
  c = alloc_tensor(arena0, 1024, [256], float32)
  call_kernel(scale, [b, c], grid=[256])
  result0 = alloc_storage([1024], device=0, dtype=uint8, scope="global")
  d = alloc_tensor(result0, 0, [256], float32)
  call_kernel(add, [c, b, d], grid=[256])
  kill_object(b)
  kill_object(c)
  return d
}
)");
}

TEST(PlanPassTest, ReportsPlannedLowerBoundNaiveAndReuseOnly) {
  CompileResult compiled;
  planned_function(R"(fn main(x: Tensor[(256), float32]) -> Tensor[(256), float32] {
  a = empty([256], float32, scope="global")
  copy_tensor(x, a)
  b = empty([512], float32, scope="global")
  c = empty([256], float32, scope="global")
  call_kernel(scale, [a, c], grid=[256])
  kill_object(b)
  d = empty([256], float32, scope="global")
  call_kernel(scale, [c, d], grid=[256])
  return d
}
)", opencl_target(), &compiled);
  ASSERT_EQ(compiled.memory.scopes.size(), 1u);
  const ScopeReport& r = compiled.memory.scopes[0];
  EXPECT_EQ(r.scope, "global");
  EXPECT_EQ(r.tensors, 3u);
  EXPECT_EQ(r.lower_bound, 1024u + 2048u + 1024u);  // a, b, c alive together
  EXPECT_EQ(r.planned_bytes, r.lower_bound);
  EXPECT_EQ(r.naive_bytes, 4096u);
  EXPECT_TRUE(r.proven_optimal);
  std::string json = memory_report_json(compiled.memory);
  EXPECT_NE(json.find("\"planned_bytes\": 4096"), std::string::npos) << json;
}

TEST(PlanPassTest, OnChipTensorsThatDoNotFitSpillToTheFallback) {
  auto target = TargetDesc::from_json(R"({"scopes": [
    {"name": "global", "alignment": 128},
    {"name": "global.onchip", "aliases": ["global.vtcm"], "alignment": 128, "capacity": 2048, "onchip": true,
     "fallback": "global"}]})", "small").value_or_throw();
  CompileResult compiled;
  std::string planned = planned_function(R"(fn main(x: Tensor[(256), float32]) -> Tensor[(256), float32] {
  a = empty([256], float32, scope="global.vtcm")
  copy_tensor(x, a)
  b = empty([256], float32, scope="global.vtcm")
  call_kernel(scale, [a, b], grid=[256])
  c = empty([256], float32, scope="global.vtcm")
  call_kernel(add, [a, b, c], grid=[256])
  d = empty([256], float32, scope="global")
  call_kernel(add, [a, c, d], grid=[256])
  return d
}
)", target, &compiled);
  ASSERT_EQ(compiled.memory.scopes.size(), 2u) << planned;
  EXPECT_EQ(compiled.memory.scopes[0].scope, "global.vtcm");
  EXPECT_EQ(compiled.memory.scopes[0].tensors, 2u);
  EXPECT_LE(compiled.memory.scopes[0].planned_bytes, 2048u);
  EXPECT_EQ(compiled.memory.scopes[1].scope, "global");
  EXPECT_EQ(compiled.memory.scopes[1].spilled, 1u);
  // `a` lives longest: it is the one moved out.
  EXPECT_NE(planned.find("a = alloc_tensor(arena1"), std::string::npos) << planned;
}

TEST(PlanPassTest, ATensorPassedToACallLivesAsLongAsTheCallsResult) {
  // `same` returns its argument: r is a, so a's bytes must outlive r's last use.
  auto target = opencl_target();
  std::string text = std::string(kKernels) + R"(fn same(t: Tensor[(256), float32]) -> Tensor[(256), float32] {
  return t
}

fn main(x: Tensor[(256), float32]) -> Tensor[(256), float32] {
  a = empty([256], float32, scope="global")
  copy_tensor(x, a)
  r = call(same, [a])
  b = empty([256], float32, scope="global")
  call_kernel(scale, [r, b], grid=[256])
  c = empty([256], float32, scope="global")
  call_kernel(add, [r, b, c], grid=[256])
  return c
}
)";
  auto compiled = compile_text(text, "call.stir", target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  std::string planned = print_function(compiled->module.functions[1]);
  size_t kill_a = planned.find("kill_object(a)");
  size_t last_r = planned.find("call_kernel(add, [r, b, c]");
  ASSERT_NE(kill_a, std::string::npos) << planned;
  EXPECT_GT(kill_a, last_r) << planned;
  EXPECT_NE(planned.find("a = alloc_tensor(arena0, 0,"), std::string::npos) << planned;
  EXPECT_NE(planned.find("b = alloc_tensor(arena0, 1024,"), std::string::npos) << planned;
  // And it computes (x + (1.5x - 2)) on the device.
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(compiled->executable)).value_or_throw();
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  auto out = machine->invoke("main", {vm::Value::from(vm::host_tensor({256}, DType::kFloat32, std::as_bytes(std::span(x))))});
  std::vector<float> y = out.as_tensor().to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + (x[i] * 1.5f - 2.0f)) << i;
}

// Each field of a returned tuple is a result like a single returned tensor: a storage
// of its own, never packed with the temporaries nor with the other fields, never killed.
TEST(PlanPassTest, EveryReturnedTensorGetsAStorageOfItsOwn) {
  auto target = opencl_target();
  CompileResult compiled;
  std::string planned = planned_function(R"(fn main(x: Tensor[(256), float32]) -> Tuple[Tensor[(256), float32], Tensor[(16, 16), float32], Tensor[(256), float32]] {
  a = empty([256], float32, scope="global")
  call_kernel(scale, [x, a], grid=[256])
  b = empty([256], float32, scope="global")
  call_kernel(scale, [a, b], grid=[256])
  c = empty([256], float32, scope="global")
  call_kernel(add, [a, b, c], grid=[256])
  d = empty([256], float32, scope="global")
  call_kernel(scale, [c, d], grid=[256])
  v = view(d, 0, [16, 16], float32)
  e = empty([256], float32, scope="global")
  call_kernel(add, [c, x, e], grid=[256])
  return (b, v, e)
}
)", target, &compiled);
  EXPECT_EQ(planned, R"(fn main(x: Tensor[(256,), float32]) -> Tuple[Tensor[(256,), float32], Tensor[(16, 16), float32], Tensor[(256,), float32]] {
  arena0 = alloc_storage([2048], device=0, dtype=uint8, scope="global")
  a = alloc_tensor(arena0, 1024, [256], float32)
  call_kernel(scale, [x, a], grid=[256])
  result0 = alloc_storage([1024], device=0, dtype=uint8, scope="global")
  b = alloc_tensor(result0, 0, [256], float32)
  call_kernel(scale, [a, b], grid=[256])
  c = alloc_tensor(arena0, 0, [256], float32)
  call_kernel(add, [a, b, c], grid=[256])
  kill_object(a)
  result1 = alloc_storage([1024], device=0, dtype=uint8, scope="global")
  d = alloc_tensor(result1, 0, [256], float32)
  call_kernel(scale, [c, d], grid=[256])
  v = view(d, 0, [16, 16], float32)
  result2 = alloc_storage([1024], device=0, dtype=uint8, scope="global")
  e = alloc_tensor(result2, 0, [256], float32)
  call_kernel(add, [c, x, e], grid=[256])
  kill_object(c)
  return (b, v, e)
}
)");
  // The temporaries alone are packed: two of 1024 bytes alive together.
  ASSERT_EQ(compiled.memory.scopes.size(), 1u);
  EXPECT_EQ(compiled.memory.scopes[0].tensors, 2u);
  EXPECT_EQ(compiled.memory.scopes[0].planned_bytes, 2048u);

  // The code generator describes the tuple field by field and returns it with ret_tuple.
  const stowage::Function& lowered = compiled.executable.functions[0];
  ASSERT_EQ(lowered.result.kind, ValueKind::kTuple);
  ASSERT_EQ(lowered.result.fields.size(), 3u);
  EXPECT_EQ(lowered.result.fields[1].name, "v");
  EXPECT_EQ(lowered.result.fields[1].shape, (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(lowered.code.back().op, Opcode::kRetTuple);
  EXPECT_EQ(lowered.code.back().list.size(), 3u);
  EXPECT_EQ(compiled.executable.minor_version, 5);  // tuples (1.4) and the planner's figures (1.5)

  // On the device: the three results, each in a storage of its own.
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(compiled.executable)).value_or_throw();
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 3.0f;
  auto out = machine->invoke("main", {vm::Value::from(vm::host_tensor({256}, DType::kFloat32,
                                                                      std::as_bytes(std::span(x))))});
  ASSERT_EQ(out.kind, vm::Value::Kind::kTuple);
  ASSERT_EQ(out.fields.size(), 3u);
  std::vector<float> b = out.fields[0].as_tensor().to_vector<float>();
  std::vector<float> v = out.fields[1].as_tensor().to_vector<float>();
  std::vector<float> e = out.fields[2].as_tensor().to_vector<float>();
  EXPECT_EQ(out.fields[1].as_tensor().shape(), (std::vector<int64_t>{16, 16}));
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = x[i] * 1.5f - 2.0f, bi = a * 1.5f - 2.0f, c = a + bi;
    ASSERT_EQ(b[i], bi) << i;
    ASSERT_EQ(v[i], c * 1.5f - 2.0f) << i;
    ASSERT_EQ(e[i], c + x[i]) << i;
  }
  EXPECT_NE(out.fields[0].tensor->storage, out.fields[1].tensor->storage);
  EXPECT_NE(out.fields[1].tensor->storage, out.fields[2].tensor->storage);
  EXPECT_NE(out.fields[0].tensor->storage, out.fields[2].tensor->storage);
}

constexpr const char* kTextureKernels = R"(kernels tex """
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void add_one(read_only image2d_t in, write_only image2d_t out) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p, read_imagef(in, kSampler, p) + 1.0f);
}
"""

)";

TEST(PlanPassTest, TextureTensorsOfDisjointLifetimesShareOneImage) {
  auto target = opencl_target();
  std::string text = std::string(kTextureKernels) +
                     R"(fn main(x: Tensor[(8, 6, 4), float32]) -> Tensor[(8, 6, 4), float32] {
  a = empty([8, 6, 4], float32, scope="global.texture")
  copy_tensor(x, a)
  b = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [a, b], grid=[6, 8])
  c = empty([4, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [b, c], grid=[6, 4])
  d = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [b, d], grid=[6, 8])
  y = empty([8, 6, 4], float32, scope="global")
  copy_tensor(d, y)
  return y
}
)";
  auto compiled = compile_text(text, "tex.stir", target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  std::string planned = print_function(compiled->module.functions[0]);
  // a dies at b's kernel; c (smaller) and then d reuse a's image; b keeps its own.
  EXPECT_NE(planned.find("image0 = alloc_storage([8, 6], device=0, dtype=float32, scope=\"global.texture\")"),
            std::string::npos) << planned;
  EXPECT_NE(planned.find("c = alloc_tensor(image0, [0, 0], [4, 6, 4], float32)"), std::string::npos) << planned;
  EXPECT_NE(planned.find("d = alloc_tensor(image0, [0, 0], [8, 6, 4], float32)"), std::string::npos) << planned;
  EXPECT_EQ(planned.find("image2 ="), std::string::npos) << planned;
  ASSERT_EQ(compiled->memory.scopes.size(), 1u);
  const ScopeReport& r = compiled->memory.scopes[0];
  EXPECT_EQ(r.scope, "global.texture");
  EXPECT_EQ(r.images, 2u);
  EXPECT_EQ(r.tensors, 4u);
  EXPECT_EQ(r.planned_pixels, 2u * 48u);
  EXPECT_EQ(r.naive_pixels, 3u * 48u + 24u);
  EXPECT_NE(format_memory_report(compiled->memory).find("2 images for 4 tensors, 96 pixels planned, 168 if each had its own"),
            std::string::npos);
  // And it runs: d = x + 2.
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(compiled->executable)).value_or_throw();
  std::vector<float> x(8 * 6 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 50.0f;
  auto out = machine->invoke("main", {vm::Value::from(vm::host_tensor({8, 6, 4}, DType::kFloat32, std::as_bytes(std::span(x))))});
  std::vector<float> y = out.as_tensor().to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + 2.0f) << i;
}

TEST(PlanPassTest, TwoTextureTensorsWithDisjointLifetimesGetOneImage) {
  auto target = opencl_target();
  std::string text = std::string(kTextureKernels) +
                     R"(fn main(x: Tensor[(8, 6, 4), float32]) -> Tensor[(8, 6, 4), float32] {
  a = empty([8, 6, 4], float32, scope="global.texture")
  copy_tensor(x, a)
  y = empty([8, 6, 4], float32, scope="global")
  copy_tensor(a, y)
  b = empty([8, 6, 4], float32, scope="global.texture")
  copy_tensor(y, b)
  copy_tensor(b, y)
  return y
}
)";
  auto compiled = compile_text(text, "tex.stir", target);
  ASSERT_TRUE(compiled) << compiled.error().message();
  ASSERT_EQ(compiled->memory.scopes.size(), 1u);  // y, the result, has its own storage
  const ScopeReport& tex = compiled->memory.scopes[0];
  EXPECT_EQ(tex.scope, "global.texture");
  EXPECT_EQ(tex.images, 1u);
  EXPECT_EQ(tex.tensors, 2u);
}

// Random tensor-level programs: planned (packed) and every-tensor-its-own-storage
// (naive) must give bit-identical results on the device.
std::string random_program(std::mt19937_64& rng, int& num_classes, std::vector<int64_t>& sizes) {
  auto below = [&](uint64_t n) { return static_cast<int64_t>(rng() % n); };
  num_classes = 1 + static_cast<int>(below(3));
  sizes.clear();
  std::string params;
  for (int k = 0; k < num_classes; ++k) {
    sizes.push_back(32 * (1 + below(40)));
    params += fmt::format("{}x{}: Tensor[({}), float32]", k ? ", " : "", k, sizes[k]);
  }
  std::vector<std::vector<std::string>> live(num_classes);
  std::string body;
  int counter = 0;
  int steps = 5 + static_cast<int>(below(26));
  std::string last;
  int last_class = 0;
  for (int s = 0; s < steps; ++s) {
    int k = static_cast<int>(below(num_classes));
    std::string t = fmt::format("t{}", counter++);
    const char* scope = below(3) == 0 ? "global.vtcm" : "global";
    body += fmt::format("  {} = empty([{}], float32, scope=\"{}\")\n", t, sizes[k], scope);
    if (live[k].empty() || below(5) == 0) {
      body += fmt::format("  copy_tensor(x{}, {})\n", k, t);
    } else if (below(2) == 0) {
      body += fmt::format("  call_kernel(scale, [{}, {}], grid=[{}])\n", live[k][below(live[k].size())], t, sizes[k]);
    } else {
      body += fmt::format("  call_kernel(add, [{}, {}, {}], grid=[{}])\n", live[k][below(live[k].size())],
                          live[k][below(live[k].size())], t, sizes[k]);
    }
    live[k].push_back(t);
    last = t;
    last_class = k;
  }
  // The result depends on every tensor of its class.
  for (const auto& t : live[last_class]) {
    if (t == last) continue;
    std::string acc = fmt::format("t{}", counter++);
    body += fmt::format("  {} = empty([{}], float32, scope=\"global\")\n", acc, sizes[last_class]);
    body += fmt::format("  call_kernel(add, [{}, {}, {}], grid=[{}])\n", last, t, acc, sizes[last_class]);
    last = acc;
  }
  return fmt::format("fn main({}) -> Tensor[({}), float32] {{\n{}  return {}\n}}\n", params, sizes[last_class], body,
                     last);
}

std::vector<float> run_program(const Executable& exe, const std::vector<vm::Value>& inputs) {
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(exe)).value_or_throw();
  return machine->invoke("main", inputs).as_tensor().to_vector<float>();
}

TEST(PlanPassTest, RandomProgramsPlannedMatchEveryTensorInItsOwnStorage) {
  std::mt19937_64 rng(31337);
  auto target = opencl_target();
  for (int p = 0; p < 40; ++p) {
    int classes = 0;
    std::vector<int64_t> sizes;
    std::string text = std::string(kKernels) + random_program(rng, classes, sizes);
    CompileOptions packed_options, naive_options;
    naive_options.plan.strategy = PlanStrategy::kNaive;
    auto packed = compile_text(text, "random.stir", target, packed_options);
    ASSERT_TRUE(packed) << packed.error().message() << "\n" << text;
    auto naive = compile_text(text, "random.stir", target, naive_options);
    ASSERT_TRUE(naive) << naive.error().message() << "\n" << text;
    std::vector<vm::Value> inputs;
    for (int k = 0; k < classes; ++k) {
      std::vector<float> data(static_cast<size_t>(sizes[k]));
      for (auto& v : data) v = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 64.0f;
      inputs.push_back(vm::Value::from(vm::host_tensor({sizes[k]}, DType::kFloat32, std::as_bytes(std::span(data)))));
    }
    std::vector<float> a = run_program(packed->executable, inputs);
    std::vector<float> b = run_program(naive->executable, inputs);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "program " << p << "\n" << text;
    for (const auto& scope : packed->memory.scopes) {
      EXPECT_LE(scope.planned_bytes, scope.naive_bytes + 128 * scope.tensors) << text;
      EXPECT_GE(scope.planned_bytes, scope.lower_bound);
    }
  }
}

}  // namespace
}  // namespace stowage::ir
