#include "stowage/ir/ir.h"

#include <array>

namespace stowage::ir {
namespace {

template <typename... O>
constexpr OpInfo make_info(std::string_view name, OpResult result, O... operands) {
  static_assert(sizeof...(operands) <= kMaxOpOperands);
  return OpInfo{name, result, static_cast<uint8_t>(sizeof...(operands)), {operands...}};
}

using enum OpResult;
using enum Operand;
constexpr OpInfo kOps[] = {
#define STOWAGE_IR_OP_INFO(name, text, result, ...) make_info(text, result, __VA_ARGS__),
    STOWAGE_IR_OPS(STOWAGE_IR_OP_INFO)
#undef STOWAGE_IR_OP_INFO
};

}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<uint8_t>(op)]; }

const char* op_name(Op op) { return op_info(op).name.data(); }

std::optional<Op> parse_op(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].name == name) return static_cast<Op>(i);
  }
  return std::nullopt;
}

bool is_keyword(Operand operand) { return !keyword_name(operand).empty(); }

std::string_view keyword_name(Operand operand) {
  switch (operand) {
    case kDeviceKw: return "device";
    case kDTypeKw: return "dtype";
    case kScopeKw:
    case kScopeOptKw: return "scope";
    case kTableScopeKw: return "table_scope";
    case kGridKw: return "grid";
    case kLocalKw: return "local";
    default: return "";
  }
}

std::string_view operand_kind_name(Operand operand) {
  switch (operand) {
    case kVar: return "var";
    case kOffset: return "offset";
    case kSize: return "size";
    case kShape: return "shape";
    case kDType: return "dtype";
    case kKernel: return "kernel";
    case kFunction: return "function";
    case kArgs: return "args";
    case kTableOffsets: return "table_offsets";
    case kDataOffsets: return "data_offsets";
    case kDeviceKw: return "device_kw";
    case kDTypeKw: return "dtype_kw";
    case kScopeKw: return "scope_kw";
    case kScopeOptKw: return "scope_opt_kw";
    case kTableScopeKw: return "table_scope_kw";
    case kGridKw: return "grid_kw";
    case kLocalKw: return "local_kw";
  }
  return "?";
}

std::string_view op_result_name(OpResult result) {
  switch (result) {
    case kNone: return "none";
    case kStorage: return "storage";
    case kTensor: return "tensor";
    case kCall: return "call";
  }
  return "?";
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
