// The Stowage IR: a module of functions in A-normal form plus OpenCL C kernel units.
//
// A binding is `result = op(operands)` (or `op(operands)` for ops without a result).
// Operands are kept in typed fields rather than a generic list, so every pass reads
// `b.offset` rather than decoding positions. Which fields an op uses:
//
//   op                          result   fields used
//   alloc_storage               Storage  shape (size), device, dtype, scope
//   alloc_tensor                Tensor   vars[0] storage, offset, shape, dtype
//   kill_object                 -        vars[0]
//   copy_tensor                 -        vars[0] src, vars[1] dst
//   call_kernel                 -        callee (kernel), args, grid, local (may be empty)
//   empty                       Tensor   shape, dtype, scope
//   call                        any      callee (function), args
//   alloc_discontiguous_tensor  Tensor   vars[0] table storage, table_offsets, vars[1] data
//                                        storage, data_offsets, shape, dtype
//   empty_discontiguous         Tensor   shape, dtype, scope (blocks), table_scope
//   view                        Tensor   vars[0] tensor, offset (bytes), shape, dtype
//
// Module-level constants (ConstantTensor) are read by name in any function.
//
// A discontiguous tensor of shape [d0, ..., dn] is made of d0*...*d(n-1) blocks of dn
// elements each, found through n levels of pointer tables (docs/discontiguous.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stowage/bytecode/executable.h"
#include "stowage/bytecode/kernel_signature.h"
#include "stowage/bytecode/origins.h"
#include "stowage/ir/op_table.h"
#include "stowage/support/dtype.h"

namespace stowage::ir {

struct SourceLoc {
  uint32_t line = 0;  // 1-based; 0 when the node was not read from text
  uint32_t col = 0;
};

struct Type {
  enum class Kind : uint8_t { kTensor, kStorage, kShape, kTuple, kInt, kFloat, kBool, kObject };
  Kind kind = Kind::kObject;
  std::vector<int64_t> shape;  // kTensor
  DType dtype = DType::kFloat32;  // kTensor
  std::vector<Type> fields;    // kTuple

  static Type tensor(std::vector<int64_t> shape, DType dtype) {
    Type t;
    t.kind = Kind::kTensor;
    t.shape = std::move(shape);
    t.dtype = dtype;
    return t;
  }
  static Type of(Kind kind) {
    Type t;
    t.kind = kind;
    return t;
  }
  friend bool operator==(const Type& a, const Type& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == Kind::kTensor) return a.shape == b.shape && a.dtype == b.dtype;
    if (a.kind == Kind::kTuple) return a.fields == b.fields;
    return true;
  }
};

// The ops, in the order of their table (op_table.h).
enum class Op : uint8_t {
#define STOWAGE_IR_OP_ENUM(name, ...) name,
  STOWAGE_IR_OPS(STOWAGE_IR_OP_ENUM)
#undef STOWAGE_IR_OP_ENUM
};

const OpInfo& op_info(Op op);
const char* op_name(Op op);
std::optional<Op> parse_op(std::string_view name);

// An argument of call_kernel / call: a variable or a scalar literal; or, for a
// kernel's buffer parameter that the launch leaves unread, null (a null pointer:
// the host's driver need not make any memory resident for it).
struct Arg {
  enum class Kind : uint8_t { kVar, kInt, kFloat, kNull };
  Kind kind = Kind::kVar;
  std::string var;
  int64_t int_value = 0;
  double float_value = 0.0;
  SourceLoc loc;

  static Arg variable(std::string name) {
    Arg a;
    a.var = std::move(name);
    return a;
  }
  static Arg integer(int64_t v) {
    Arg a;
    a.kind = Kind::kInt;
    a.int_value = v;
    return a;
  }
  static Arg floating(double v) {
    Arg a;
    a.kind = Kind::kFloat;
    a.float_value = v;
    return a;
  }
  static Arg null() {
    Arg a;
    a.kind = Kind::kNull;
    return a;
  }
  friend bool operator==(const Arg& a, const Arg& b) {
    return a.kind == b.kind && a.var == b.var && a.int_value == b.int_value &&
           (a.float_value == b.float_value || (a.float_value != a.float_value && b.float_value != b.float_value));
  }
};

struct Binding {
  std::string result;  // empty for ops without a result
  Op op = Op::kKillObject;
  std::vector<std::string> vars;  // variable operands, see the table above
  std::vector<Arg> args;          // call_kernel / call
  std::vector<int64_t> shape;     // alloc_storage size, alloc_tensor / empty shape
  int64_t offset = 0;             // alloc_tensor in a buffer scope: bytes
  ImageOffset image_offset;       // alloc_tensor in an image scope: its top-left pixel
  int64_t device = 0;             // alloc_storage
  DType dtype = DType::kUInt8;    // alloc_storage / alloc_tensor / empty
  std::string scope;              // alloc_storage / empty / empty_discontiguous (the blocks')
  std::string table_scope;        // empty_discontiguous: where its tables go
  std::vector<int64_t> table_offsets;  // alloc_discontiguous_tensor, breadth-first
  std::vector<int64_t> data_offsets;   // alloc_discontiguous_tensor, one per block
  std::string callee;             // call_kernel: kernel name; call: function name
  std::vector<int64_t> grid;      // call_kernel global size
  std::vector<int64_t> local;     // call_kernel local size; empty lets the driver choose
  SourceLoc loc;
  std::vector<SourceLoc> var_locs;  // where each of `vars` was written, when parsed
  // The model nodes this binding computes (a front end's import); carried to the
  // executable's origins for profiles, not part of the text form.
  std::vector<NodeOrigin> origins;

  // Structural equality (source locations and origins do not count).
  friend bool operator==(const Binding& a, const Binding& b) {
    return a.result == b.result && a.op == b.op && a.vars == b.vars && a.args == b.args &&
           a.shape == b.shape && a.offset == b.offset && a.image_offset == b.image_offset && a.device == b.device &&
           a.dtype == b.dtype && a.scope == b.scope && a.callee == b.callee && a.grid == b.grid &&
           a.local == b.local && a.table_scope == b.table_scope && a.table_offsets == b.table_offsets &&
           a.data_offsets == b.data_offsets;
  }
};

struct Param {
  std::string name;
  Type type;
  SourceLoc loc;
  friend bool operator==(const Param& a, const Param& b) { return a.name == b.name && a.type == b.type; }
};

struct Function {
  std::string name;
  std::vector<Param> params;
  Type ret_type;
  std::vector<Binding> bindings;
  // What the function returns: one variable (`return a`, ret_type its type), or,
  // with `returns_tuple`, a tuple of tensors (`return (a, b)`, ret_type
  // Tuple[type of a, type of b]). A tuple of one is written `return (a,)`.
  std::vector<std::string> returns;
  bool returns_tuple = false;
  SourceLoc loc;
  SourceLoc ret_loc;
  friend bool operator==(const Function& a, const Function& b) {
    return a.name == b.name && a.params == b.params && a.ret_type == b.ret_type &&
           a.bindings == b.bindings && a.returns == b.returns && a.returns_tuple == b.returns_tuple;
  }
};

// One unit of OpenCL C source. `signatures` is filled by the kernel reader
// (libclang) and is not part of the module's identity.
struct KernelSourceUnit {
  std::string name;
  std::string source;
  SourceLoc loc;             // where the unit's source text begins in the text form
  std::vector<KernelSignature> signatures;
  friend bool operator==(const KernelSourceUnit& a, const KernelSourceUnit& b) {
    return a.name == b.name && a.source == b.source;
  }
};

// A named tensor whose bytes are part of the module (a weight). Every function
// may read it by name, as if it were a variable defined before its first binding;
// nothing may write or kill it. The planner packs the constants of each scope into
// one storage, which the VM fills once.
struct ConstantTensor {
  std::string name;
  Type type;                      // a Tensor type
  std::string scope = "global";
  // Row-major, little-endian; shared so that copies of a module are cheap. Null
  // when the text form said `external` and no data was given yet.
  std::shared_ptr<const std::vector<std::byte>> data;
  SourceLoc loc;
  // Equal names, types, scopes and bytes.
  friend bool operator==(const ConstantTensor& a, const ConstantTensor& b);
};

struct Module {
  std::vector<KernelSourceUnit> units;
  std::vector<ConstantTensor> constants;
  std::vector<Function> functions;
  // The target the module was made for (a shipped target name or a target JSON
  // file; "" when none): an importer that chose kernels for a target records it so
  // that compiling for another is refused. Not part of the text form, and not
  // compared by ==, which compares the program.
  std::string target;
  friend bool operator==(const Module& a, const Module& b) {
    return a.units == b.units && a.constants == b.constants && a.functions == b.functions;
  }

  const Function* find_function(std::string_view name) const;
  const ConstantTensor* find_constant(std::string_view name) const;
  // The signature of kernel `name` in any unit, once the kernel reader has run.
  const KernelSignature* find_kernel(std::string_view name) const;
};

}  // namespace stowage::ir
