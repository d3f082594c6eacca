// libFuzzer target for the compiler: any text must be parsed or refused with one
// error, never a crash, leak, hang or sanitizer report. What parses must print to
// a text that parses to the same module; what compiles must be written to bytes
// that the validating loader accepts and writes back identically.
//
//   text -> parse -> print -> parse -> compile (kernels, verify, plan, verify,
//   codegen) -> write -> read -> write
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "stowage/bytecode/file.h"
#include "stowage/bytecode/target.h"
#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"

namespace {

using namespace stowage;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "compiler_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

const TargetDesc& target() {
  static const TargetDesc desc = TargetDesc::load("opencl").value_or_throw();
  return desc;
}

// The kinds a compile may refuse an input with. kRuntime is the compiler's own
// failure (a planned program that fails verification): a finding.
bool is_refusal(const Error& error) {
  return error.kind() == ErrorKind::kInvalidInput || error.kind() == ErrorKind::kVerify ||
         error.kind() == ErrorKind::kUnsupported;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Expected<ir::Module> module = ir::parse_module(text, "fuzz.stir");
  if (!module) {
    if (module.error().kind() != ErrorKind::kInvalidInput) {
      fail("parse error of another kind", module.error().message());
    }
    return 0;
  }
  std::string printed = ir::print_module(*module);
  Expected<ir::Module> reparsed = ir::parse_module(printed, "printed.stir");
  if (!reparsed) fail("the printed module does not parse", reparsed.error().message());
  if (!(*reparsed == *module)) fail("the printed module parses to another module", printed);

  ir::CompileOptions options;
  options.plan.time_limit_seconds = 2;
  Expected<ir::CompileResult> compiled = ir::compile_module(module.take(), target(), options);
  if (!compiled) {
    if (!is_refusal(compiled.error())) fail("compile failed", compiled.error().message());
    return 0;
  }
  std::vector<uint8_t> bytes = write_bytecode(compiled->executable);
  Expected<Executable> loaded = read_bytecode(bytes);
  if (!loaded) fail("the loader refuses what the compiler wrote", loaded.error().message());
  if (write_bytecode(*loaded) != bytes) fail("the loaded executable writes other bytes", printed);
  return 0;
}
