#include "stowage/ir/compiler.h"

#include "stowage/ir/codegen.h"

#include <algorithm>

#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/memory_layout.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"

namespace stowage::ir {
namespace {

std::vector<ConstantReport> report_constants(const Module& module, const ConstantPlan& plan) {
  std::vector<ConstantReport> out;
  for (const ConstantStoragePlan& storage : plan.storages) {
    auto it = std::find_if(out.begin(), out.end(), [&](const ConstantReport& r) { return r.scope == storage.scope; });
    if (it == out.end()) it = out.insert(out.end(), ConstantReport{storage.scope, 0, 0, 0});
    it->storage_bytes += storage.nbytes;
  }
  for (const ConstantSlot& slot : plan.slots) {
    const ConstantTensor& c = module.constants[slot.constant];
    auto it = std::find_if(out.begin(), out.end(), [&](const ConstantReport& r) { return r.scope == c.scope; });
    it->tensors += 1;
    it->bytes += c.data->size();
  }
  return out;
}

}  // namespace

Expected<CompileResult> compile_module(Module module, const TargetDesc& target, const CompileOptions& options) {
  STOWAGE_TRY(read_module_kernels(module, target.table_entry_bytes, options.file_name));
  STOWAGE_TRY(verify_module(module, target, options.file_name));
  MemoryReport memory;
  if (has_tensor_level_bindings(module)) {
    STOWAGE_TRY_ASSIGN(memory, plan_memory(module, target, options.plan));
    if (auto status = verify_module(module, target, options.file_name); !status) {
      return Error(ErrorKind::kRuntime, "the planned program fails verification (a planner bug): " +
                                            status.error().message());
    }
  }
  STOWAGE_TRY_ASSIGN(ConstantPlan constants, plan_constants(module, target));
  memory.constants = report_constants(module, constants);
  CodegenOptions codegen;
  codegen.constants = &constants;
  // The constants' bytes are in the executable's constant sections already: the
  // text keeps only small ones.
  if (options.keep_ir_text) codegen.debug_text = print_module(module, PrintOptions{kDebugTextConstantBytes});
  STOWAGE_TRY_ASSIGN(Executable exe, generate_executable(module, target, codegen));
  std::vector<FunctionLayout> layouts;
  for (const Function& f : module.functions) {
    STOWAGE_TRY_ASSIGN(FunctionLayout layout, memory_layout(f, target.table_entry_bytes));
    layouts.push_back(std::move(layout));
  }
  if (options.keep_memory_layout) {
    exe.memory_layouts = layouts;
    for (const ScopeReport& r : memory.scopes) {
      exe.memory_plans.push_back(ScopePlan{r.function, r.scope, r.tensors, r.planned_bytes, r.lower_bound,
                                           r.naive_bytes, r.reuse_only_bytes, r.spilled, r.spilled_bytes,
                                           r.discontiguous, r.blocks, r.seconds});
    }
    exe.minor_version = exe.required_minor_version();
  }
  return CompileResult{std::move(module), std::move(exe), std::move(memory), std::move(layouts)};
}

Expected<CompileResult> compile_text(std::string_view text, std::string_view file_name, const TargetDesc& target,
                                     const CompileOptions& options) {
  STOWAGE_TRY_ASSIGN(Module module, parse_module(text, file_name));
  CompileOptions named = options;
  named.file_name = std::string(file_name);
  return compile_module(std::move(module), target, named);
}

}  // namespace stowage::ir
