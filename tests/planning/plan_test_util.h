// Helpers for the planning tests: a module planned by the planning pass between two
// runs of the verifier.
#pragma once

#include <string>
#include <string_view>

#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/planner.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"

namespace stowage::ir {

struct Planned {
  Module module;
  MemoryReport report;
  std::string text;  // the first function, planned
};

// Parses `source` (named `name` in errors), verifies, plans and verifies again; the
// error says which step failed, and for the planned program shows its first function.
inline Expected<Planned> plan_and_verify(const std::string& source, std::string_view name, const TargetDesc& target,
                                         const PlanOptions& options = {}) {
  auto module = parse_module(source, name);
  if (!module) return module.error();
  Planned out{module.take(), {}, ""};
  if (auto status = read_module_kernels(out.module); !status) return status.error();
  if (auto status = verify_module(out.module, target); !status) return status.error();
  auto report = plan_memory(out.module, target, options);
  if (!report) return report.error();
  out.report = report.take();
  if (auto status = verify_module(out.module, target); !status) {
    return Error(ErrorKind::kVerify, "planned program: " + status.error().message() + "\n" +
                                         print_function(out.module.functions[0]));
  }
  out.text = print_function(out.module.functions[0]);
  return out;
}

}  // namespace stowage::ir
