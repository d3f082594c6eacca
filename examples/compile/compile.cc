// Embedding the Stowage compiler: text IR in, a bytecode file out. Links the
// compiler alone (no VM, no OpenCL loader); libclang is loaded when the first
// kernel is read.
//
//   compile_example add_mul.stir add_mul.stw [target]
#include <stowage/bytecode/file.h>
#include <stowage/ir/compiler.h>
#include <stowage/support/file.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE.stir OUT.stw [target]\n", argv[0]);
    return 2;
  }
  auto text = stowage::read_regular_file(argv[1], stowage::ir::kMaxTextIrBytes, "text IR file");
  auto target = stowage::TargetDesc::load(argc > 3 ? argv[3] : "opencl");
  if (!text || !target) {
    std::fprintf(stderr, "error: %s\n", (!text ? text.error() : target.error()).message().c_str());
    return 2;
  }
  auto compiled = stowage::ir::compile_text(*text, argv[1], *target);
  if (!compiled) {
    std::fprintf(stderr, "error: %s\n", compiled.error().message().c_str());
    return 2;
  }
  if (auto written = stowage::write_bytecode_file(compiled->executable, argv[2]); !written) {
    std::fprintf(stderr, "error: %s\n", written.error().message().c_str());
    return 1;
  }
  std::printf("compiled %zu function(s) and %zu kernel(s) for '%s' into %s\n", compiled->executable.functions.size(),
              compiled->executable.kernels.size(), target->name.c_str(), argv[2]);
  return 0;
}
