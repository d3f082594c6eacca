// The IR's ops, described once: each op's name, what it binds and its operands in
// the order the text form writes them. The parser, the printer, the verifier's
// check of which Binding fields an op uses, and the op names all read this table,
// so adding an op is a row here plus its semantics (verifier rule, planner, codegen,
// the builder method). The C++ builder checks each binding it records against its
// row; the Python builder (stowage/builder.py) reads the table through the bindings
// and converts each operand by its kind, making a method for an op it has none for.
//
//   X(enumerator, text name, result, operands...)
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace stowage::ir {

// What an op binds.
enum class OpResult : uint8_t {
  kNone,     // no result: `op(...)`
  kStorage,  // a Storage
  kTensor,   // a Tensor of the binding's shape and dtype
  kCall,     // the callee's return type
};

// An operand: the Binding field it fills and how the text form writes it.
// Positional ones come first, separated by commas; keyword ones follow as
// `, key=value` in any order.
enum class Operand : uint8_t {
  kVar,           // positional variable: vars[next]
  kOffset,        // positional integer: offset
  kSize,          // positional int list: shape, read as "storage size"
  kShape,         // positional int list: shape
  kDType,         // positional dtype word: dtype
  kKernel,        // positional identifier: callee (a kernel)
  kFunction,      // positional identifier: callee (a function)
  kArgs,          // positional argument list: args
  kTableOffsets,  // positional int, or int list: table_offsets
  kDataOffsets,   // positional int list: data_offsets
  kDeviceKw,      // keyword `device=INT`: device (required)
  kDTypeKw,       // keyword `dtype=DTYPE`: dtype (required)
  kScopeKw,       // keyword `scope="S"`: scope (required)
  kScopeOptKw,    // keyword `scope="S"`: scope (optional, default "global"; always printed)
  kTableScopeKw,  // keyword `table_scope="S"`: table_scope (optional, default "global"; always printed)
  kGridKw,        // keyword `grid=[...]`: grid (required)
  kLocalKw,       // keyword `local=[...]`: local (optional, printed when given)
};

#define STOWAGE_IR_OPS(X)                                                                                     \
  X(kAllocStorage, "alloc_storage", kStorage, kSize, kDeviceKw, kDTypeKw, kScopeKw)                           \
  X(kAllocTensor, "alloc_tensor", kTensor, kVar, kOffset, kShape, kDType)                                     \
  X(kKillObject, "kill_object", kNone, kVar)                                                                  \
  X(kCopyTensor, "copy_tensor", kNone, kVar, kVar)                                                            \
  X(kCallKernel, "call_kernel", kNone, kKernel, kArgs, kGridKw, kLocalKw)                                     \
  X(kEmpty, "empty", kTensor, kShape, kDType, kScopeOptKw)                                                    \
  X(kCall, "call", kCall, kFunction, kArgs)                                                                   \
  X(kAllocDiscontiguousTensor, "alloc_discontiguous_tensor", kTensor, kVar, kTableOffsets, kVar, kDataOffsets, \
    kShape, kDType)                                                                                           \
  X(kEmptyDiscontiguous, "empty_discontiguous", kTensor, kShape, kDType, kScopeOptKw, kTableScopeKw)          \
  X(kView, "view", kTensor, kVar, kOffset, kShape, kDType)

#define STOWAGE_IR_OP_ONE(...) +1
inline constexpr size_t kOpCount = 0 STOWAGE_IR_OPS(STOWAGE_IR_OP_ONE);
#undef STOWAGE_IR_OP_ONE

inline constexpr size_t kMaxOpOperands = 6;

struct OpInfo {
  std::string_view name;
  OpResult result;
  uint8_t num_operands;
  std::array<Operand, kMaxOpOperands> operands;

  std::span<const Operand> operand_list() const { return {operands.data(), num_operands}; }
  bool has(Operand operand) const {
    for (Operand o : operand_list()) {
      if (o == operand) return true;
    }
    return false;
  }
};

bool is_keyword(Operand operand);
// Stable names of the table's words, for the bindings: "var", "shape", "grid_kw", ...;
// "none", "storage", "tensor", "call".
std::string_view operand_kind_name(Operand operand);
std::string_view op_result_name(OpResult result);
// The keyword an operand is written with ("device", "scope", ...); empty for positional ones.
std::string_view keyword_name(Operand operand);

}  // namespace stowage::ir
