// The VM on the default OpenCL device (PoCL's CPU device in CI), with executables
// built by hand so that these tests need no compiler.
#include "stowage/vm/vm.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <numeric>

#include "bytecode/bytecode_test_util.h"

namespace stowage::vm {
namespace {

using stowage::testing::make_add_mul_executable;
using stowage::testing::buffer_param;
using stowage::testing::make_ins;

Tensor int_tensor(const std::vector<int32_t>& values) {
  return host_tensor({4, 64}, DType::kInt32, std::as_bytes(std::span(values)));
}

struct Inputs {
  std::vector<int32_t> x, y, z;
  std::vector<Value> args() const {
    return {Value::from(int_tensor(x)), Value::from(int_tensor(y)), Value::from(int_tensor(z))};
  }
  std::vector<int32_t> expected() const {
    std::vector<int32_t> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = (x[i] + y[i]) * z[i];
    return out;
  }
};

Inputs make_inputs(int seed) {
  Inputs in;
  for (int i = 0; i < 256; ++i) {
    in.x.push_back(i * 3 - 100 + seed);
    in.y.push_back(7 - i + seed * 2);
    in.z.push_back((i % 13) - 6);
  }
  return in;
}

std::unique_ptr<VirtualMachine> make_vm(Executable exe, const VmOptions& options = {}) {
  auto vm = VirtualMachine::create(std::make_shared<const Executable>(std::move(exe)), options);
  if (!vm) throw StowageError(vm.error());
  return vm.take();
}

// Gives the add_mul kernel's launch (instruction 6) the local size `local`.
void set_local_size(Executable& exe, std::vector<int64_t> local) {
  Constant constant;
  constant.shape = std::move(local);
  exe.constants.push_back(std::move(constant));
  exe.functions[0].code[6].ops[operands::CallKernel::kLocal] = exe.constants.size() - 1;
}

// The error that invoking main with `args` raises; a test failure when main returns.
StowageError invoke_error(VirtualMachine& vm, std::vector<Value> args) {
  try {
    vm.invoke("main", std::move(args));
  } catch (const StowageError& e) {
    return e;
  }
  ADD_FAILURE() << "main returned instead of raising";
  return StowageError(ErrorKind::kRuntime, "main returned instead of raising");
}

TEST(VmTest, RunsTheAddMulExampleAndMatchesTheHost) {
  auto vm = make_vm(make_add_mul_executable());
  Inputs in = make_inputs(0);
  Value out = vm->invoke("main", in.args());
  ASSERT_EQ(out.kind, Value::Kind::kTensor);
  Tensor result = out.as_tensor();
  EXPECT_EQ(result.shape(), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(result.scope(), "global.vtcm");
  EXPECT_EQ(result.to_vector<int32_t>(), in.expected());
}

// With shared virtual memory (where the device offers it) tensors need no
// sub-buffers; without, one per distinct range of a storage.
class VmStorageTest : public ::testing::TestWithParam<bool> {};

TEST_P(VmStorageTest, SecondInvokeMakesNoDeviceAllocation) {
  VmOptions options;
  options.svm = GetParam();
  auto vm = make_vm(make_add_mul_executable(), options);
  Inputs first = make_inputs(1);
  {
    Value out = vm->invoke("main", {Value::from(int_tensor(first.x)), Value::from(int_tensor(first.y)),
                                    Value::from(int_tensor(first.z))});
    EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), first.expected());
  }
  Profile p1 = vm->profile();
  const bool svm = options.svm && vm->device().svm_coarse_grain;
  EXPECT_EQ(p1.device_allocations, 4u);   // the vtcm storage and the three arguments' buffers
  EXPECT_EQ(p1.svm_allocations, svm ? 4u : 0u);  // all four: arguments are uploaded into SVM too
  EXPECT_EQ(p1.sub_buffers_created, svm ? 0u : 3u);  // else one per distinct range (five alloc_tensor sites)
  EXPECT_EQ(p1.host_to_device, 3u);       // each argument uploaded once
  EXPECT_EQ(p1.device_to_host, 1u);       // the result read back
  vm->reset_profile();
  Inputs second = make_inputs(2);
  Value out = vm->invoke("main", {Value::from(int_tensor(second.x)), Value::from(int_tensor(second.y)),
                                  Value::from(int_tensor(second.z))});
  EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), second.expected());
  Profile p2 = vm->profile();
  EXPECT_EQ(p2.device_allocations, 0u);  // the arguments' buffers are reused too
  EXPECT_EQ(p2.svm_allocations, 0u);
  EXPECT_EQ(p2.sub_buffers_created, 0u);
  EXPECT_EQ(p2.kernel_launches, 2u);
  EXPECT_EQ(p2.host_to_device, 3u);
}

INSTANTIATE_TEST_SUITE_P(SvmOnAndOff, VmStorageTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Svm" : "SubBuffers"; });

TEST(VmTest, KernelTimesCountEveryLaunchOnTheDevice) {
  VmOptions options;
  options.kernel_times = true;
  auto made = VirtualMachine::create(std::make_shared<const Executable>(make_add_mul_executable()), options);
  ASSERT_TRUE(made) << made.error().message();
  auto vm = made.take();
  Inputs in = make_inputs(6);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(vm->invoke("main", in.args()).as_tensor().to_vector<int32_t>(), in.expected());
  Profile p = vm->profile();  // reads the events without a synchronize first
  std::vector<std::string> kernels;
  double summed_us = 0;
  for (const auto& ip : p.instructions) {
    if (ip.op != Opcode::kCallKernel) {
      EXPECT_EQ(ip.device_count, 0u) << ip.index;
      continue;
    }
    kernels.push_back(ip.detail);
    EXPECT_EQ(ip.device_count, 3u) << ip.detail;
    EXPECT_GT(ip.device_us, 0.0) << ip.detail;
    EXPECT_EQ(ip.count, 0u);  // host times are --profile's, not asked for
    summed_us += ip.device_us;
  }
  EXPECT_EQ(kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(p.device_busy_us, summed_us);
  EXPECT_GE(p.device_span_us, p.device_busy_us * 0.999);  // one in-order queue: kernels never overlap
  vm->reset_profile();
  Profile cleared = vm->profile();
  EXPECT_TRUE(cleared.instructions.empty());
  EXPECT_EQ(cleared.device_busy_us, 0.0);
  EXPECT_EQ(cleared.device_span_us, 0.0);

  auto plain = make_vm(make_add_mul_executable());
  plain->invoke("main", in.args());
  EXPECT_TRUE(plain->profile().instructions.empty());
}

TEST(VmTest, AHeldResultKeepsItsStorageAndTheNextInvokeAllocatesAnew) {
  auto vm = make_vm(make_add_mul_executable());
  Inputs a = make_inputs(3);
  Inputs b = make_inputs(4);
  Value first = vm->invoke("main", {Value::from(int_tensor(a.x)), Value::from(int_tensor(a.y)),
                                    Value::from(int_tensor(a.z))});
  Value second = vm->invoke("main", {Value::from(int_tensor(b.x)), Value::from(int_tensor(b.y)),
                                     Value::from(int_tensor(b.z))});
  // vtcm and three argument buffers, then a second vtcm: the first is held by the
  // first result. The argument buffers are free again and reused.
  EXPECT_EQ(vm->profile().device_allocations, 5u);
  // The first result was not overwritten by the second invoke.
  EXPECT_EQ(first.as_tensor().to_vector<int32_t>(), a.expected());
  EXPECT_EQ(second.as_tensor().to_vector<int32_t>(), b.expected());
}

TEST(VmTest, OnChipCapacityIsEnforcedAndReportedAsEmulated) {
  Executable exe = make_add_mul_executable();
  exe.requirements.scopes[0].capacity = 6000;  // room for one 4096-byte storage only
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(5);
  Value held = vm->invoke("main", in.args());
  const StowageError e = invoke_error(*vm, in.args());
  EXPECT_EQ(std::string(e.what()),
            "function 'main' instruction 0 (alloc_storage): scope 'global.vtcm' (emulated on-chip): allocating 4096 "
            "bytes exceeds the capacity of 6000 bytes (4096 in use)");
  Profile p = vm->profile();
  ASSERT_EQ(p.scopes.size(), 2u);  // global.vtcm, and global for the uploaded arguments
  EXPECT_EQ(p.scopes[0].scope, "global.vtcm");
  EXPECT_TRUE(p.scopes[0].emulated);
  EXPECT_EQ(p.scopes[0].in_use, 4096u);
  EXPECT_EQ(p.scopes[1].scope, "global");
  EXPECT_EQ(p.scopes[1].in_use, 3 * 1024u);
  held = Value();  // releasing the result returns the bytes
  EXPECT_EQ(vm->profile().scopes[0].in_use, 4096u);  // still cached by the call site, reusable
  Value again = vm->invoke("main", in.args());
  EXPECT_EQ(again.as_tensor().to_vector<int32_t>(), in.expected());
}

TEST(VmTest, WrongArgumentsAreRefusedWithTheirName) {
  auto vm = make_vm(make_add_mul_executable());
  std::vector<int32_t> small(128, 1);
  Tensor wrong = host_tensor({2, 64}, DType::kInt32, std::as_bytes(std::span(small)));
  Inputs in = make_inputs(0);
  const StowageError e =
      invoke_error(*vm, {Value::from(int_tensor(in.x)), Value::from(wrong), Value::from(int_tensor(in.z))});
  EXPECT_EQ(std::string(e.what()),
            "invoke 'main': argument 1 'y' must be Tensor[(4, 64), int32], got Tensor[(2, 64), int32]");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_THROW(vm->invoke("nope", {}), StowageError);
  EXPECT_THROW(vm->invoke("main", {}), StowageError);
}

TEST(VmTest, OpenCLErrorsNameFunctionInstructionAndStatus) {
  Executable exe = make_add_mul_executable();
  set_local_size(exe, {100});  // does not divide the global size 256
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(0);
  const StowageError e = invoke_error(*vm, in.args());
  EXPECT_EQ(std::string(e.what()),
            "function 'main' instruction 6 (call_kernel): OpenCL error CL_INVALID_WORK_GROUP_SIZE (-54) from "
            "clEnqueueNDRangeKernel('compute_add_in_vtcm')");
  EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
}

// An Executable made in memory skips the loader's checks; the launch still refuses
// a grid whose work-item count wraps 64 bits (it once ran 4 work items and returned
// a wrong result), and refuses it again on the next invoke.
TEST(VmTest, AGridPastTheWorkItemLimitIsRefusedAtLaunch) {
  Executable exe = make_add_mul_executable();
  exe.constants[stowage::testing::add_mul_const::kGrid].shape = {INT64_MAX, INT64_MAX, 4};
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const StowageError e = invoke_error(*vm, in.args());
    EXPECT_EQ(std::string(e.what()),
              "function 'main' instruction 6 (call_kernel): kernel 'compute_add_in_vtcm': grid "
              "[9223372036854775807, 9223372036854775807, 4] has more than 1099511627776 (2^40) work items");
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  EXPECT_EQ(vm->profile().kernel_launches, 0u);
}

// A local size past what the device runs in one work group is refused with the
// limit's name instead of the driver's bare status.
TEST(VmTest, ALocalSizePastTheDevicesWorkGroupIsRefused) {
  Executable exe = make_add_mul_executable();
  auto probe = make_vm(make_add_mul_executable());
  uint64_t max_group = probe->device().max_work_group_size;
  ASSERT_GT(max_group, 0u);
  int64_t too_many = static_cast<int64_t>(std::bit_ceil(max_group + 1));
  exe.constants[stowage::testing::add_mul_const::kGrid].shape = {too_many};
  set_local_size(exe, {too_many});
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(0);
  const StowageError e = invoke_error(*vm, in.args());
  std::string message = e.what();
  EXPECT_TRUE(message.starts_with(fmt::format("function 'main' instruction 6 (call_kernel): kernel "
                                              "'compute_add_in_vtcm': local size [{}] exceeds the device's",
                                              too_many)) ||
              message.starts_with(fmt::format("function 'main' instruction 6 (call_kernel): kernel "
                                              "'compute_add_in_vtcm': local size [{}] makes work groups of {} items",
                                              too_many, too_many)))
      << message;
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(vm->profile().kernel_launches, 0u);
}

// main calls itself until the depth limit: the message names the outermost frames
// only, instead of all 256 (once 9.8 KB on one line).
TEST(VmTest, TheCallDepthMessageStaysShort) {
  Executable exe = make_add_mul_executable();
  Function& main = exe.functions[0];
  main.num_registers = 4;
  main.code = {make_ins(Opcode::kCall, {3, 0}, {0, 1, 2}), make_ins(Opcode::kRet, {3})};
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(0);
  const StowageError e = invoke_error(*vm, in.args());
  std::string expected;
  for (int i = 0; i < 8; ++i) expected += "function 'main' instruction 0 (call): ";
  EXPECT_EQ(std::string(e.what()), expected + "call depth exceeds 256 when calling 'main'");
  EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
}

TEST(VmTest, AParameterIsADeviceTensorKernelsTakeAsItIs) {
  Executable exe = make_add_mul_executable();
  // Pass parameter x straight to the kernel instead of its copy in vtcm.
  exe.functions[0].code[6].list = {0, 5, 6};
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(0);
  Value out = vm->invoke("main", in.args());
  EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), in.expected());
}

TEST(VmTest, AResultPassedToTheNextInvokeIsNotCopied) {
  auto vm = make_vm(make_add_mul_executable());
  Inputs in = make_inputs(7);
  Value first = vm->invoke("main", in.args());
  vm->reset_profile();
  // (first + y) * z, with `first` as it lies on the device.
  Value second = vm->invoke("main", {first, Value::from(int_tensor(in.y)), Value::from(int_tensor(in.z))});
  Profile p = vm->profile();
  EXPECT_EQ(p.host_to_device, 2u);  // y and z; not `first`
  EXPECT_EQ(p.device_to_host, 0u);
  std::vector<int32_t> expected = in.expected();
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = (expected[i] + in.y[i]) * in.z[i];
  EXPECT_EQ(second.as_tensor().to_vector<int32_t>(), expected);
  EXPECT_EQ(first.as_tensor().to_vector<int32_t>(), in.expected());  // unchanged by the second invoke
}

TEST(VmTest, UploadMakesADeviceTensorOnce) {
  auto vm = make_vm(make_add_mul_executable());
  Inputs in = make_inputs(8);
  Tensor x = vm->upload(int_tensor(in.x));
  Tensor y = vm->upload(int_tensor(in.y));
  Tensor z = vm->upload(int_tensor(in.z));
  EXPECT_FALSE(x.on_host());
  EXPECT_EQ(x.scope(), "global");
  EXPECT_EQ(vm->upload(x).object(), x.object());  // already here: the same tensor
  vm->reset_profile();
  for (int i = 0; i < 3; ++i) {
    Value out = vm->invoke("main", {Value::from(x), Value::from(y), Value::from(z)});
    EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), in.expected());
  }
  EXPECT_EQ(vm->profile().host_to_device, 0u);
  EXPECT_EQ(vm->profile().device_to_host, 3u);
}

TEST(VmTest, AResultOutlivesItsVm) {
  Inputs in = make_inputs(9);
  Tensor kept;
  {
    auto vm = make_vm(make_add_mul_executable());
    kept = vm->invoke("main", in.args()).as_tensor();
  }
  EXPECT_EQ(kept.to_vector<int32_t>(), in.expected());
}

TEST(VmTest, ATensorOfAnotherVmIsRefusedWithItsName) {
  auto a = make_vm(make_add_mul_executable());
  auto b = make_vm(make_add_mul_executable());
  Inputs in = make_inputs(10);
  Tensor x = a->upload(int_tensor(in.x));
  const StowageError e =
      invoke_error(*b, {Value::from(x), Value::from(int_tensor(in.y)), Value::from(int_tensor(in.z))});
  EXPECT_EQ(std::string(e.what()),
            "invoke 'main': argument 0 'x' lives on another VM's device or context; pass a host copy "
            "(Tensor::copy_to_host) or upload it to this VM");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_THROW(b->upload(x), StowageError);
}

TEST(VmTest, DeviceDLPackExportSharesTheBuffer) {
  auto vm = make_vm(make_add_mul_executable());
  Inputs in = make_inputs(11);
  Tensor out = vm->invoke("main", in.args()).as_tensor();
  DLManagedTensor* dl = out.to_dlpack_device(Tensor::DeviceCopy::kNever);
  EXPECT_EQ(dl->dl_tensor.device.device_type, kDLOpenCL);
  EXPECT_EQ(dl->dl_tensor.device.device_id, out.device_index());
  EXPECT_EQ(dl->dl_tensor.data, static_cast<void*>(out.object()->storage->mem()));
  EXPECT_EQ(dl->dl_tensor.byte_offset, out.object()->offset);
  ASSERT_EQ(dl->dl_tensor.ndim, 2);
  EXPECT_EQ(dl->dl_tensor.shape[0], 4);
  // The bytes at (data, byte_offset) are the result's.
  std::vector<int32_t> read(256);
  ASSERT_EQ(clEnqueueReadBuffer(out.object()->context->queue(), static_cast<cl_mem>(dl->dl_tensor.data), CL_TRUE,
                                dl->dl_tensor.byte_offset, 1024, read.data(), 0, nullptr, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(read, in.expected());
  dl->deleter(dl);
}

TEST(VmTest, KillDropsTheReferenceAtOnce) {
  // main(x) { s = alloc_storage; t = alloc_tensor(s); copy(x, t); kill t; kill s; ret x }
  Executable exe = make_add_mul_executable();
  Function& f = exe.functions[0];
  f.code = {
      make_ins(Opcode::kAllocStorage, {3, 0, 0, 5, 0}),
      make_ins(Opcode::kAllocTensor, {4, 3, 0, 1, 3}),
      make_ins(Opcode::kCopyTensor, {0, 4}),
      make_ins(Opcode::kKill, {4}),
      make_ins(Opcode::kKill, {3}),
      make_ins(Opcode::kRet, {0}),
  };
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(0);
  vm->invoke("main", in.args());
  // After the run only the call site's cache holds the storage.
  Profile p = vm->profile();
  EXPECT_EQ(p.scopes[0].in_use, 4096u);
  EXPECT_EQ(p.scopes[0].peak, 4096u);
}

// main(x) = (x + k) + k2 through a kernel taking a scalar: register 5 is loaded once
// (5), register 6 twice (3, then 4), so only 6's loads run in every invocation.
Executable make_add_scalar_executable() {
  Executable exe = make_add_mul_executable();
  exe.units = {KernelUnit{"scalar_ops",
                          "__kernel void add_scalar(__global const int* a, __global int* b, int k) {\n"
                          "  b[get_global_id(0)] = a[get_global_id(0)] + k;\n}\n"}};
  KernelSignature k;
  k.name = "add_scalar";
  k.params = {buffer_param("a", DType::kInt32, true), buffer_param("b", DType::kInt32, false)};
  KernelParam scalar;
  scalar.name = "k";
  scalar.kind = KernelParamKind::kScalar;
  scalar.dtype = DType::kInt32;
  k.params.push_back(scalar);
  exe.kernels = {k};
  for (int64_t v : {5, 3, 4}) {
    Constant c;
    c.kind = ConstantKind::kInt;
    c.dtype = DType::kInt32;
    c.int_value = v;
    exe.constants.push_back(c);  // constants 3, 4, 5
  }
  Function& f = exe.functions[0];
  f.params.resize(1);
  f.num_registers = 7;
  const uint64_t i32 = static_cast<uint64_t>(DType::kInt32);
  const uint64_t u8 = static_cast<uint64_t>(DType::kUInt8);
  f.code = {
      make_ins(Opcode::kAllocStorage, {1, 0, 0, u8, 0}),
      make_ins(Opcode::kAllocTensor, {2, 1, 0, 1, i32}),
      make_ins(Opcode::kLoadConst, {5, 3}),
      make_ins(Opcode::kLoadConst, {6, 4}),
      make_ins(Opcode::kCallKernel, {0, 2, kNoConstant}, {0, 2, 6}),
      make_ins(Opcode::kAllocTensor, {3, 1, 1024, 1, i32}),
      make_ins(Opcode::kCallKernel, {0, 2, kNoConstant}, {2, 3, 5}),
      make_ins(Opcode::kLoadConst, {6, 5}),
      make_ins(Opcode::kKill, {2}),
      make_ins(Opcode::kAllocTensor, {4, 1, 2048, 1, i32}),
      make_ins(Opcode::kCallKernel, {0, 2, kNoConstant}, {3, 4, 6}),
      make_ins(Opcode::kRet, {4}),
  };
  return exe;
}

TEST(VmTest, ARegisterLoadedOnceIsLoadedWhenTheVmIsMade) {
  VmOptions options;
  options.profile = true;
  auto vm = make_vm(make_add_scalar_executable(), options);
  for (int run = 0; run < 3; ++run) {
    Inputs in = make_inputs(run);
    Value out = vm->invoke("main", {Value::from(int_tensor(in.x))});
    std::vector<int32_t> want = in.x;
    for (int32_t& v : want) v += 3 + 5 + 4;
    EXPECT_EQ(out.as_tensor().to_vector<int32_t>(), want);
  }
  std::vector<std::pair<uint32_t, uint64_t>> loads;  // (instruction, times run)
  for (const InstructionProfile& i : vm->profile().instructions) {
    if (i.op == Opcode::kLoadConst) loads.emplace_back(i.index, i.count);
  }
  EXPECT_EQ(loads, (std::vector<std::pair<uint32_t, uint64_t>>{{3, 3}, {7, 3}}));
}

TEST(VmTest, DLPackRoundTrip) {
  auto vm = make_vm(make_add_mul_executable());
  Inputs in = make_inputs(6);
  std::vector<int64_t> shape = {4, 64};
  auto dl = [&](std::vector<int32_t>& data) {
    DLTensor t{};
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 2;
    t.dtype = {kDLInt, 32, 1};
    t.shape = shape.data();
    return tensor_from_dlpack(t, nullptr).value_or_throw();
  };
  Value out = vm->invoke("main", {Value::from(dl(in.x)), Value::from(dl(in.y)), Value::from(dl(in.z))});
  DLManagedTensor* managed = out.as_tensor().to_dlpack();
  ASSERT_EQ(managed->dl_tensor.ndim, 2);
  EXPECT_EQ(managed->dl_tensor.dtype.code, kDLInt);
  EXPECT_EQ(managed->dl_tensor.dtype.bits, 32);
  const int32_t* data = static_cast<const int32_t*>(managed->dl_tensor.data);
  EXPECT_EQ(std::vector<int32_t>(data, data + 256), in.expected());
  managed->deleter(managed);
}

// add_mul's main returning (c, e): the sum and the product (version 1.4).
Executable make_tuple_executable() {
  namespace reg = stowage::testing::add_mul_reg;
  Executable exe = make_add_mul_executable();
  Function& main = exe.functions[0];
  main.result = ValueDesc{};
  main.result.kind = ValueKind::kTuple;
  main.result.fields = {stowage::testing::tensor_value("c", {4, 64}, DType::kInt32),
                        stowage::testing::tensor_value("e", {4, 64}, DType::kInt32)};
  main.code.back() = make_ins(Opcode::kRetTuple, {}, {reg::kC, reg::kE});
  return exe;
}

TEST(VmTest, RetTupleReturnsATupleOfItsTensorsInOrder) {
  auto vm = make_vm(make_tuple_executable());
  Inputs in = make_inputs(3);
  Value out = vm->invoke("main", in.args());
  ASSERT_EQ(out.kind, Value::Kind::kTuple);
  EXPECT_STREQ(out.kind_name(), "Tuple");
  ASSERT_EQ(out.fields.size(), 2u);
  std::vector<int32_t> sum(in.x.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = in.x[i] + in.y[i];
  ASSERT_EQ(out.fields[0].kind, Value::Kind::kTensor);
  EXPECT_EQ(out.fields[0].as_tensor().to_vector<int32_t>(), sum);
  EXPECT_EQ(out.fields[1].as_tensor().to_vector<int32_t>(), in.expected());
  EXPECT_EQ(out.fields[1].as_tensor().shape(), (std::vector<int64_t>{4, 64}));
}

// A tuple a call returns is a value like any other: a register holds it, `ret` passes it on.
TEST(VmTest, ATupleFromACallPassesThroughRet) {
  Executable exe = make_tuple_executable();
  Function outer;
  outer.name = "outer";
  for (const char* name : {"x", "y", "z"}) {
    outer.params.push_back(stowage::testing::tensor_value(name, {4, 64}, DType::kInt32));
  }
  outer.result.kind = ValueKind::kOther;
  outer.num_registers = 4;
  outer.code = {make_ins(Opcode::kCall, {3, 0}, {0, 1, 2}), make_ins(Opcode::kRet, {3})};
  exe.functions.push_back(outer);
  auto vm = make_vm(std::move(exe));
  Inputs in = make_inputs(4);
  Value out = vm->invoke("outer", in.args());
  ASSERT_EQ(out.kind, Value::Kind::kTuple);
  ASSERT_EQ(out.fields.size(), 2u);
  EXPECT_EQ(out.fields[1].as_tensor().to_vector<int32_t>(), in.expected());
}

}  // namespace
}  // namespace stowage::vm
