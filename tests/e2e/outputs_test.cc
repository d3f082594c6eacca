// Functions returning several values, end to end: compiled from text, run by the VM
// and by vm-run (one --output per output), with int64, int32 and bool tensors in
// and out, since models take int64 token ids and give several outputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "npy.h"
#include "process.h"
#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

namespace fs = std::filesystem;
using testing::run_process;
using testing::RunResult;

// main: int64 ids in; their doubles (int64), their high words (int32) and whether
// each is odd (bool, written through a uint8 view) out. flip: a bool tensor in and out.
constexpr const char* kProgram = R"(kernels ops """
__kernel void split(__global const long* x, __global long* doubled, __global int* high, __global uchar* odd) {
  size_t i = get_global_id(0);
  doubled[i] = x[i] * 2;
  high[i] = (int)(x[i] >> 32);
  odd[i] = (uchar)(x[i] & 1);
}

__kernel void negate(__global const uchar* b, __global uchar* out) {
  size_t i = get_global_id(0);
  out[i] = b[i] ? 0 : 1;
}
"""

fn main(x: Tensor[(8,), int64]) -> Tuple[Tensor[(8,), int64], Tensor[(8,), int32], Tensor[(8,), bool]] {
  d = empty([8], int64, scope="global")
  h = empty([8], int32, scope="global")
  o = empty([8], bool, scope="global")
  o_bytes = view(o, 0, [8], uint8)
  call_kernel(split, [x, d, h, o_bytes], grid=[8])
  return (d, h, o)
}

fn flip(b: Tensor[(8,), bool]) -> Tensor[(8,), bool] {
  b_bytes = view(b, 0, [8], uint8)
  out = empty([8], bool, scope="global")
  out_bytes = view(out, 0, [8], uint8)
  call_kernel(negate, [b_bytes, out_bytes], grid=[8])
  return out
}
)";

const std::vector<int64_t> kIds = {0, 1, -3, (int64_t{1} << 40) + 5, -(int64_t{1} << 35), 7, INT64_MAX / 4, -1};

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  auto span = std::as_bytes(std::span(values));
  return {span.begin(), span.end()};
}

template <typename T>
std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

std::vector<int64_t> doubled() {
  std::vector<int64_t> out;
  for (int64_t id : kIds) out.push_back(id * 2);
  return out;
}
std::vector<int32_t> high_words() {
  std::vector<int32_t> out;
  for (int64_t id : kIds) out.push_back(static_cast<int32_t>(id >> 32));
  return out;
}
std::vector<uint8_t> odd() {
  std::vector<uint8_t> out;
  for (int64_t id : kIds) out.push_back(static_cast<uint8_t>(id & 1));
  return out;
}

Executable compile_program() {
  auto target = TargetDesc::load("opencl").value_or_throw();
  return ir::compile_text(kProgram, "outputs.stir", target).value_or_throw().executable;
}

TEST(Outputs, TheVmReturnsEachOutputWithItsDtype) {
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(compile_program())).value_or_throw();
  std::vector<int64_t> ids = kIds;
  vm::Value out = machine->invoke("main", {vm::Value::from(vm::host_tensor({8}, DType::kInt64,
                                                                           std::as_bytes(std::span(ids))))});
  ASSERT_EQ(out.kind, vm::Value::Kind::kTuple);
  ASSERT_EQ(out.fields.size(), 3u);
  EXPECT_EQ(out.fields[0].as_tensor().dtype(), DType::kInt64);
  EXPECT_EQ(out.fields[0].as_tensor().to_vector<int64_t>(), doubled());
  EXPECT_EQ(out.fields[1].as_tensor().dtype(), DType::kInt32);
  EXPECT_EQ(out.fields[1].as_tensor().to_vector<int32_t>(), high_words());
  EXPECT_EQ(out.fields[2].as_tensor().dtype(), DType::kBool);
  EXPECT_EQ(out.fields[2].as_tensor().to_vector<uint8_t>(), odd());

  // Each output reaches the host through DLPack with its own dtype.
  DLManagedTensor* ids_out = out.fields[0].as_tensor().to_dlpack();
  EXPECT_EQ(ids_out->dl_tensor.dtype.code, kDLInt);
  EXPECT_EQ(ids_out->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(std::vector<int64_t>(static_cast<int64_t*>(ids_out->dl_tensor.data),
                                 static_cast<int64_t*>(ids_out->dl_tensor.data) + 8),
            doubled());
  ids_out->deleter(ids_out);
  DLManagedTensor* odd_out = out.fields[2].as_tensor().to_dlpack();
  EXPECT_EQ(odd_out->dl_tensor.dtype.code, 6);  // kDLBool
  EXPECT_EQ(odd_out->dl_tensor.dtype.bits, 8);
  odd_out->deleter(odd_out);

  // An int64 argument given through DLPack.
  std::vector<int64_t> shape = {8};
  DLTensor dl{};
  dl.data = ids.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 1;
  dl.dtype = {kDLInt, 64, 1};
  dl.shape = shape.data();
  vm::Value again = machine->invoke("main", {vm::Value::from(vm::tensor_from_dlpack(dl, nullptr).value_or_throw())});
  EXPECT_EQ(again.fields[0].as_tensor().to_vector<int64_t>(), doubled());
}

class VmRunOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stowage-outputs-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    stw_ = (dir_ / "outputs.stw").string();
    ASSERT_TRUE(write_bytecode_file(compile_program(), stw_));
    ids_ = (dir_ / "ids.npy").string();
    ASSERT_TRUE(npy::write_file(ids_, {8}, DType::kInt64, bytes_of(kIds)));
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult vm_run(std::vector<std::string> args) {
    args.insert(args.begin(), std::string(STOWAGE_BINARY_DIR) + "/src/vm-run");
    return run_process(args, dir_ / "stdout.txt", dir_ / "stderr.txt", std::chrono::seconds(60));
  }
  std::string stdout_text() const { return testing::read_text(dir_ / "stdout.txt"); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::string stw_;
  std::string ids_;
};

TEST_F(VmRunOutputs, WritesOneFilePerOutputInOrder) {
  RunResult r = vm_run({stw_, "--input", "x=" + ids_, "--output", path("d.npy"), "--output", path("h.npy"), "-o",
                        path("o.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  npy::Array d = npy::read_file(path("d.npy")).value_or_throw();
  EXPECT_EQ(d.dtype, DType::kInt64);
  EXPECT_EQ(d.shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(values_of<int64_t>(d.data), doubled());
  npy::Array h = npy::read_file(path("h.npy")).value_or_throw();
  EXPECT_EQ(h.dtype, DType::kInt32);
  EXPECT_EQ(values_of<int32_t>(h.data), high_words());
  npy::Array o = npy::read_file(path("o.npy")).value_or_throw();
  EXPECT_EQ(o.dtype, DType::kBool);
  EXPECT_EQ(values_of<uint8_t>(o.data), odd());
}

TEST_F(VmRunOutputs, ACountMismatchIsOneErrorBeforeAnythingRuns) {
  RunResult r = vm_run({stw_, "--input", "x=" + ids_, "--output", path("d.npy")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stderr_text, "vm-run: error: 'main' returns 3 outputs, but --output was given 1 time; give it once per "
                           "output, in order\n");
  EXPECT_FALSE(fs::exists(path("d.npy")));

  std::string b = path("b.npy");
  ASSERT_TRUE(npy::write_file(b, {8}, DType::kBool, bytes_of(odd())));
  r = vm_run({stw_, "-f", "flip", "--input", "b=" + b, "--output", path("1.npy"), "--output", path("2.npy")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stderr_text, "vm-run: error: 'flip' returns 1 output, but --output was given 2 times; give it once per "
                           "output, in order\n");
}

// Without --output, each output's name, type and a summary (integers exactly).
TEST_F(VmRunOutputs, WithoutOutputsItPrintsEachOutputsSummary) {
  RunResult r = vm_run({stw_, "--input", "x=" + ids_});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
  EXPECT_EQ(stdout_text(),
            "result[0] d: Tensor[(8), int64]\n"
            "  min -68719476736, max 4611686018427387902, mean 5.76461e+17; [0, 2, -6, 2199023255562, "
            "-68719476736, 14, 4611686018427387902, -2]\n"
            "result[1] h: Tensor[(8), int32]\n"
            "  min -8, max 536870911, mean 6.71089e+07; [0, 0, -1, 256, -8, 0, 536870911, -1]\n"
            "result[2] o: Tensor[(8), bool]\n"
            "  min 0, max 1, mean 0.75; [false, true, true, true, false, true, true, true]\n");
}

TEST_F(VmRunOutputs, InfoShowsTheReturnTypes) {
  RunResult r = vm_run({stw_, "--info"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::string out = stdout_text();
  EXPECT_NE(out.find("  main(x: Tensor[(8), int64]) -> (d: Tensor[(8), int64], h: Tensor[(8), int32], o: "
                     "Tensor[(8), bool])  ["),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  flip(b: Tensor[(8), bool]) -> out: Tensor[(8), bool]  ["), std::string::npos) << out;
}

TEST_F(VmRunOutputs, ABoolTensorGoesInAndComesOut) {
  std::string b = path("b.npy");
  ASSERT_TRUE(npy::write_file(b, {8}, DType::kBool, bytes_of(odd())));
  RunResult r = vm_run({stw_, "-f", "flip", "--input", "b=" + b, "--output", path("flipped.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  npy::Array flipped = npy::read_file(path("flipped.npy")).value_or_throw();
  EXPECT_EQ(flipped.dtype, DType::kBool);
  std::vector<uint8_t> want;
  for (uint8_t bit : odd()) want.push_back(bit ? 0 : 1);
  EXPECT_EQ(values_of<uint8_t>(flipped.data), want);
}

}  // namespace
}  // namespace stowage
