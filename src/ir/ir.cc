#include "stowage/ir/ir.h"

#include <array>

namespace stowage::ir {
namespace {
constexpr std::array<std::pair<Op, const char*>, 10> kOpNames = {{
    {Op::kAllocStorage, "alloc_storage"},
    {Op::kAllocTensor, "alloc_tensor"},
    {Op::kKillObject, "kill_object"},
    {Op::kCopyTensor, "copy_tensor"},
    {Op::kCallKernel, "call_kernel"},
    {Op::kEmpty, "empty"},
    {Op::kCall, "call"},
    {Op::kAllocDiscontiguousTensor, "alloc_discontiguous_tensor"},
    {Op::kEmptyDiscontiguous, "empty_discontiguous"},
    {Op::kView, "view"},
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

const ConstantTensor* Module::find_constant(std::string_view name) const {
  for (const auto& c : constants) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool operator==(const ConstantTensor& a, const ConstantTensor& b) {
  if (a.name != b.name || a.type != b.type || a.scope != b.scope) return false;
  if (a.data == b.data) return true;
  return a.data && b.data && *a.data == *b.data;
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
