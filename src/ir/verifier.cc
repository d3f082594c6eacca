#include "stowage/ir/verifier.h"

#include "stowage/ir/names.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_map>

#include "function_verifier.h"
#include "stowage/ir/printer.h"

namespace stowage::ir {
namespace {

using verify::at_loc;

// Builds `[FILE:][LINE:COL: ]error: CONTEXT: MESSAGE`.
class Reporter {
 public:
  explicit Reporter(std::string_view file_name) : file_name_(file_name) {}

  Error error(SourceLoc loc, std::string_view context, std::string_view message) const {
    std::string where;
    if (!file_name_.empty()) where = fmt::format("{}:", file_name_);
    if (loc.line != 0) where += fmt::format("{}:{}:", loc.line, loc.col);
    if (!where.empty()) where += " ";
    return Error(ErrorKind::kVerify, fmt::format("{}error: {}: {}", where, context, message));
  }

 private:
  std::string_view file_name_;
};

Status check_units(const Module& module, const Reporter& report) {
  std::unordered_map<std::string_view, const KernelSourceUnit*> units;
  std::unordered_map<std::string_view, const KernelSourceUnit*> kernels;
  for (const KernelSourceUnit& unit : module.units) {
    std::string context = fmt::format("kernels '{}'", unit.name);
    if (!is_identifier(unit.name)) return report.error(unit.loc, context, "the name is not an identifier");
    auto [earlier, inserted] = units.emplace(unit.name, &unit);
    if (!inserted) {
      return report.error(unit.loc, context,
                          fmt::format("defined twice (first{})", at_loc(earlier->second->loc)));
    }
    if (!kernel_source_is_printable(unit.source)) {
      return report.error(unit.loc, context, "the source contains '\"\"\"', which the text form cannot hold");
    }
    for (const KernelSignature& kernel : unit.signatures) {
      if (!is_identifier(kernel.name)) {
        return report.error(unit.loc, context, fmt::format("kernel name '{}' is not an identifier", kernel.name));
      }
      auto [first, is_new] = kernels.emplace(kernel.name, &unit);
      if (!is_new) {
        return report.error(unit.loc, context,
                            fmt::format("kernel '{}' is also defined in kernels '{}'", kernel.name, first->second->name));
      }
    }
  }
  return Status::ok();
}

Status check_function_names(const Module& module, const Reporter& report) {
  std::unordered_map<std::string_view, const Function*> functions;
  for (const Function& fn : module.functions) {
    std::string context = fmt::format("function '{}'", fn.name);
    if (!is_identifier(fn.name)) return report.error(fn.loc, context, "the name is not an identifier");
    auto [earlier, inserted] = functions.emplace(fn.name, &fn);
    if (!inserted) {
      return report.error(fn.loc, context, fmt::format("defined twice (first{})", at_loc(earlier->second->loc)));
    }
  }
  return Status::ok();
}

Status report_failure(const Function& fn, const verify::FunctionVerifier::Failure& failure, const Reporter& report) {
  using Where = verify::FunctionVerifier::Failure::Where;
  std::string context = fmt::format("function '{}'", fn.name);
  switch (failure.where) {
    case Where::kSignature: break;
    case Where::kParam: context += fmt::format(", parameter '{}'", failure.param); break;
    case Where::kBinding:
      context += fmt::format(", binding '{}'", print_binding(fn.bindings[failure.binding]));
      break;
    case Where::kReturn: context += fmt::format(", 'return {}'", fn.ret); break;
  }
  return report.error(failure.loc, context, failure.message);
}

}  // namespace

bool is_valid_variable_name(std::string_view name) { return !name_problem(name).has_value(); }

bool op_produces_value(Op op) {
  return op == Op::kAllocStorage || op == Op::kAllocTensor || op == Op::kEmpty || op == Op::kCall ||
         op == Op::kAllocDiscontiguousTensor || op == Op::kEmptyDiscontiguous;
}

Status verify_function(const Module& module, const Function& function, const TargetDesc& target,
                       std::string_view file_name) {
  verify::FunctionVerifier verifier(module, function, target);
  if (auto failure = verifier.run()) return report_failure(function, *failure, Reporter(file_name));
  return Status::ok();
}

Status verify_module(const Module& module, const TargetDesc& target, std::string_view file_name) {
  Reporter report(file_name);
  if (Status s = check_units(module, report); !s) return s;
  if (Status s = check_function_names(module, report); !s) return s;
  for (const Function& fn : module.functions) {
    if (Status s = verify_function(module, fn, target, file_name); !s) return s;
  }
  return Status::ok();
}

}  // namespace stowage::ir
