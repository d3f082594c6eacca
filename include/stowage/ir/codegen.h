// Code generation: a verified storage-level module to an Executable.
#pragma once

#include <string>

#include "stowage/bytecode/target.h"
#include "stowage/ir/constant_plan.h"
#include "stowage/ir/ir.h"
#include "stowage/support/error.h"
#include "stowage/bytecode/executable.h"

namespace stowage::ir {

struct CodegenOptions {
  std::string debug_text;  // stored in the executable's debug section when not empty
  // Where the constants go; null: planned here (plan_constants).
  const ConstantPlan* constants = nullptr;
};

// Lowers every function to register bytecode. The module must have passed the
// verifier and carry its kernel signatures; tensor-level `empty` bindings must
// have been planned away.
Expected<Executable> generate_executable(const Module& module, const TargetDesc& target,
                                         const CodegenOptions& options = {});

}  // namespace stowage::ir
