// Embedding the Stowage runtime: load a bytecode file, pass DLPack tensors in, read
// a DLPack tensor out. Links the runtime alone (no compiler, no LLVM).
//
//   embed_example add_mul.stw [device]
#include <dlpack/dlpack.h>
#include <stowage/bytecode/file.h>
#include <stowage/vm/vm.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.stw [device]\n", argv[0]);
    return 2;
  }
  auto loaded = stowage::read_bytecode_file(argv[1]);
  if (!loaded) {
    std::fprintf(stderr, "error: %s\n", loaded.error().message().c_str());
    return 2;
  }
  auto exe = std::make_shared<const stowage::Executable>(loaded.take());
  stowage::vm::VmOptions options;
  if (argc > 2) options.device = argv[2];
  auto vm = stowage::vm::VirtualMachine::create(exe, options);
  if (!vm) {
    std::fprintf(stderr, "error: %s\n", vm.error().message().c_str());
    return 1;
  }
  std::printf("device: %s\n", (*vm)->device().summary().c_str());

  // Inputs as DLPack tensors over the application's own memory.
  std::vector<int64_t> shape = {4, 64};
  std::vector<int32_t> x(256), y(256), z(256);
  for (int i = 0; i < 256; ++i) {
    x[i] = i;
    y[i] = 2 * i - 100;
    z[i] = i % 7 - 3;
  }
  auto as_dlpack = [&](std::vector<int32_t>& data) {
    DLTensor t{};
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 2;
    t.dtype = {kDLInt, 32, 1};
    t.shape = shape.data();
    return stowage::vm::Value::from(stowage::vm::tensor_from_dlpack(t, nullptr).value_or_throw());
  };
  try {
    stowage::vm::Value out = (*vm)->invoke("main", {as_dlpack(x), as_dlpack(y), as_dlpack(z)});
    DLManagedTensor* result = out.as_tensor().to_dlpack();
    const auto* values = static_cast<const int32_t*>(result->dl_tensor.data);
    int mismatches = 0;
    for (int i = 0; i < 256; ++i) mismatches += values[i] != (x[i] + y[i]) * z[i];
    std::printf("result (4, 64) int32, row 0: ");
    for (int i = 0; i < 8; ++i) std::printf("%d ", values[i]);
    std::printf("...\n");
    std::printf("%s\n", mismatches == 0 ? "the result matches the host's (x + y) * z"
                                        : "MISMATCH against the host's (x + y) * z");
    result->deleter(result);
    return mismatches == 0 ? 0 : 1;
  } catch (const stowage::StowageError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
