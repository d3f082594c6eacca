// The compiler pipeline: kernel signatures (libclang), verify, plan, verify,
// code generation. Used by stowc, the tests and the Python package.
#pragma once

#include <cstdint>
#include <string>

#include "stowage/bytecode/target.h"
#include "stowage/ir/ir.h"
#include "stowage/ir/planner.h"
#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"

namespace stowage::ir {

// Constants of at most this many bytes keep their data in the IR text stored in an
// executable's debug section; larger ones print as `external` (their bytes are in
// the constant sections).
inline constexpr uint64_t kDebugTextConstantBytes = 256;

// The largest text IR file the tools read: the bytecode's debug section, which
// carries the compiled text, holds at most this much (format.h's kMaxDebugTextLength).
inline constexpr uint64_t kMaxTextIrBytes = uint64_t{256} << 20;

struct CompileOptions {
  bool keep_ir_text = true;  // store the compiled IR in the executable's debug section
  bool keep_memory_layout = true;  // store the layouts in the executable (its memory layout section)
  PlanOptions plan;          // for functions with tensor-level `empty` bindings
  std::string file_name;     // where the module's text came from, named in errors at a line:col
};

struct CompileResult {
  Module module;            // the module as compiled (storage level)
  Executable executable;
  MemoryReport memory;      // what planning did; empty when nothing was planned
  // Where every function's tensors live, in the module's function order (the
  // executable's memory_layouts hold the same unless keep_memory_layout is false).
  std::vector<FunctionLayout> layouts;
};

Expected<CompileResult> compile_module(Module module, const TargetDesc& target, const CompileOptions& options = {});

// Parses `text` and compiles it; every error at a line:col of it (parser, kernel
// reader, verifier) names `file_name`.
Expected<CompileResult> compile_text(std::string_view text, std::string_view file_name, const TargetDesc& target,
                                     const CompileOptions& options = {});

}  // namespace stowage::ir
