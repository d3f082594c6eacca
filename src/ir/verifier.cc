#include "stowage/ir/verifier.h"

#include "stowage/ir/names.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_map>

#include "function_verifier.h"
#include "stowage/bytecode/storage_rules.h"
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

Status check_constant(const ConstantTensor& c, const TargetDesc& target, const Reporter& report) {
  std::string context = fmt::format("constant '{}'", c.name);
  auto fail = [&](std::string message) { return report.error(c.loc, context, message); };
  if (!is_valid_variable_name(c.name)) return fail("the name is not a valid variable name");
  if (c.type.kind != Type::Kind::kTensor) return fail(fmt::format("{} is not a Tensor type", print_type(c.type)));
  for (int64_t extent : c.type.shape) {
    if (extent < 0) return fail(fmt::format("{} has a negative extent", print_type(c.type)));
  }
  std::optional<uint64_t> nbytes = checked_nbytes(c.type.shape, c.type.dtype);
  if (!nbytes) return fail(fmt::format("{} is larger than 2^64 bytes", print_type(c.type)));
  if (!c.data) {
    return fail("it has no data (its text form says 'external'): give the data beside the text, e.g. "
                "stowage.parse(text, constants=...)");
  }
  if (c.data->size() != *nbytes) {
    return fail(fmt::format("its data holds {} bytes, its type {} needs {}", c.data->size(), print_type(c.type),
                            *nbytes));
  }
  const ScopeDesc* scope = target.find_scope(c.scope);
  if (scope == nullptr) return fail(fmt::format("unknown scope '{}' (target '{}')", c.scope, target.name));
  if (scope->kind == ScopeKind::kImage2d) {
    if (Status s = is_image_pixel_type(c.type.dtype); !s) {
      return fail(fmt::format("in image scope '{}': {}", c.scope, s.error().message()));
    }
    auto extent = image_extent(c.type.shape, scope->image_layout());
    if (!extent) {
      return fail(fmt::format("a tensor in image scope '{}' needs a last extent of 4 and at most 5 dimensions",
                              c.scope));
    }
    if (extent->height == 0 || extent->width == 0) return fail("an image constant needs at least one pixel");
    if (extent->height > target.max_image_height || extent->width > target.max_image_width) {
      return fail(fmt::format("its image of {}x{} pixels exceeds the target's {}x{}", extent->height, extent->width,
                              target.max_image_height, target.max_image_width));
    }
  }
  return Status::ok();
}

// Names unique, types, data and scopes right; on-chip constants fit the capacity.
Status check_constants(const Module& module, const TargetDesc& target, const Reporter& report) {
  std::unordered_map<std::string_view, const ConstantTensor*> seen;
  std::unordered_map<const ScopeDesc*, uint64_t> onchip_bytes;
  for (const ConstantTensor& c : module.constants) {
    auto [earlier, inserted] = seen.emplace(c.name, &c);
    if (!inserted) {
      return report.error(c.loc, fmt::format("constant '{}'", c.name),
                          fmt::format("defined twice (first{})", at_loc(earlier->second->loc)));
    }
    STOWAGE_TRY(check_constant(c, target, report));
    const ScopeDesc* scope = target.find_scope(c.scope);
    if (scope->capacity == 0) continue;
    uint64_t& total = onchip_bytes[scope];
    total += c.data->size();  // each below 2^64, and all in memory: no overflow
    if (total > scope->capacity) {
      return report.error(c.loc, fmt::format("constant '{}'", c.name),
                          fmt::format("the constants of scope '{}' need {} bytes, over its capacity of {} bytes",
                                      scope->name, total, scope->capacity));
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
    case Where::kReturn: context += fmt::format(", 'return {}'", print_returned(fn)); break;
  }
  return report.error(failure.loc, context, failure.message);
}

}  // namespace

bool is_valid_variable_name(std::string_view name) { return validate_name(name).is_ok(); }

bool op_produces_value(Op op) { return op_info(op).result != OpResult::kNone; }

Status verify_function(const Module& module, const Function& function, const TargetDesc& target,
                       std::string_view file_name) {
  verify::FunctionVerifier verifier(module, function, target);
  if (auto failure = verifier.run()) return report_failure(function, *failure, Reporter(file_name));
  return Status::ok();
}

Status verify_module(const Module& module, const TargetDesc& target, std::string_view file_name) {
  Reporter report(file_name);
  STOWAGE_TRY(check_units(module, report));
  STOWAGE_TRY(check_constants(module, target, report));
  STOWAGE_TRY(check_function_names(module, report));
  for (const Function& fn : module.functions) {
    STOWAGE_TRY(verify_function(module, fn, target, file_name));
  }
  return Status::ok();
}

}  // namespace stowage::ir
