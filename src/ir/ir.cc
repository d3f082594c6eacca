#include "stowage/ir/ir.h"

#include <array>

namespace stowage::ir {
namespace {
constexpr std::array<std::pair<Op, const char*>, 9> kOpNames = {{
    {Op::kAllocStorage, "alloc_storage"},
    {Op::kAllocTensor, "alloc_tensor"},
    {Op::kKillObject, "kill_object"},
    {Op::kCopyTensor, "copy_tensor"},
    {Op::kCallKernel, "call_kernel"},
    {Op::kEmpty, "empty"},
    {Op::kCall, "call"},
    {Op::kAllocDiscontiguousTensor, "alloc_discontiguous_tensor"},
    {Op::kEmptyDiscontiguous, "empty_discontiguous"},
}};
}  // namespace

const char* op_name(Op op) {
  for (const auto& [o, name] : kOpNames) {
    if (o == op) return name;
  }
  return "?";
}

std::optional<Op> parse_op(std::string_view name) {
  for (const auto& [o, n] : kOpNames) {
    if (name == n) return o;
  }
  return std::nullopt;
}

const Function* Module::find_function(std::string_view name) const {
  for (const auto& f : functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const KernelSignature* Module::find_kernel(std::string_view name) const {
  for (const auto& unit : units) {
    for (const auto& sig : unit.signatures) {
      if (sig.name == name) return &sig;
    }
  }
  return nullptr;
}

}  // namespace stowage::ir
