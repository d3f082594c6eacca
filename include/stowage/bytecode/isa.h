// The instruction set of the Stowage VM, described once. The code generator, the
// bytecode writer, the validating reader and the interpreter all read the table
// below, so they cannot disagree about an instruction's operands.
//
// Encoding (docs/bytecode.md): an instruction is a run of little-endian 32-bit words.
// Word 0 holds the opcode in its low 8 bits; its upper 24 bits are reserved and must
// be zero. The operands follow in the order of the opcode's format, each as wide as
// its kind says (OperandKind below). At most one operand of a format is a list.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace stowage {

// Kinds of operand, with their encoded width.
enum class OperandKind : uint8_t {
  kDef,      // 1 word: register written by the instruction (< function's register count)
  kReg,      // 1 word: register read by the instruction (< function's register count)
  kConst,    // 1 word: index into the constant pool
  kOptConst, // 1 word: index into the constant pool, or kNoConstant
  kString,   // 1 word: index into the string table
  kKernel,   // 1 word: index into the kernel table
  kFunc,     // 1 word: index into the function table
  kU32,      // 1 word: unsigned immediate
  kDType,    // 1 word: a DType code (< kDTypeCount)
  kU64,      // 2 words: unsigned 64-bit immediate, low word first
  kRegList,  // 1 + n words: count n (<= kMaxListLength), then n registers read
  kTensorConst,  // 1 word: index into the tensor constant table
};

inline constexpr uint32_t kNoConstant = 0xFFFFFFFFu;
// In call_kernel's list only (version 1.7): no register; the kernel's buffer
// parameter in that place gets a null pointer (an operand the launch leaves unread).
inline constexpr uint32_t kNullRegister = 0xFFFFFFFFu;
inline constexpr uint32_t kMaxListLength = 4096;
inline constexpr uint32_t kMaxOperands = 8;

// The opcode table: one row per instruction, operands in encoding order. The
// numeric values are part of the bytecode format: never renumber, only append.
//   X(enumerator, value, text name, operand kinds...)
#define STOWAGE_OPCODES(X)                                                                   \
  /* dst = alloc_storage(size shape, device, dtype, scope) */                              \
  X(kAllocStorage, 0, "alloc_storage", kDef, kConst, kU32, kDType, kString)                \
  /* dst = alloc_tensor(storage, byte offset, shape, dtype) */                             \
  X(kAllocTensor, 1, "alloc_tensor", kDef, kReg, kU64, kConst, kDType)                     \
  /* kill(reg): drop the register's reference now */                                      \
  X(kKill, 2, "kill", kReg)                                                                \
  /* copy_tensor(src, dst) */                                                              \
  X(kCopyTensor, 3, "copy_tensor", kReg, kReg)                                             \
  /* call_kernel(kernel, args..., global size shape, local size shape or none); an arg  */ \
  /* may be kNullRegister where the kernel's parameter is a buffer                      */ \
  X(kCallKernel, 4, "call_kernel", kKernel, kConst, kOptConst, kRegList)                   \
  /* dst = call(function, args...) */                                                      \
  X(kCall, 5, "call", kDef, kFunc, kRegList)                                               \
  /* dst = move(src) */                                                                    \
  X(kMove, 6, "move", kDef, kReg)                                                          \
  /* ret(reg) */                                                                           \
  X(kRet, 7, "ret", kReg)                                                                  \
  /* dst = load_const(constant): a scalar or shape constant into a register */             \
  X(kLoadConst, 8, "load_const", kDef, kConst)                                             \
  /* dst = alloc_discontiguous_tensor(table storage, table offsets shape, data storage,   */ \
  /*       data offsets shape, shape, dtype, table entry bytes): the VM writes the tables  */ \
  X(kAllocDiscontiguous, 9, "alloc_discontiguous_tensor", kDef, kReg, kConst, kReg, kConst, kConst, kDType, kU32) \
  /* dst = load_tensor_constant(tensor constant): the VM's device copy, made once per VM */ \
  X(kLoadTensorConstant, 10, "load_tensor_constant", kDef, kTensorConst) \
  /* dst = view(tensor, byte offset, shape, dtype): a tensor sharing the tensor's bytes */ \
  X(kView, 11, "view", kDef, kReg, kU64, kConst, kDType)                                  \
  /* ret_tuple(regs...): return a tuple of the registers' tensors, one per field of  */    \
  /* the function's tuple result                                                      */    \
  X(kRetTuple, 12, "ret_tuple", kRegList)

enum class Opcode : uint8_t {
#define STOWAGE_OPCODE_ENUM(name, value, ...) name = value,
  STOWAGE_OPCODES(STOWAGE_OPCODE_ENUM)
#undef STOWAGE_OPCODE_ENUM
};

struct OpcodeInfo {
  std::string_view name;
  uint8_t num_operands;
  std::array<OperandKind, kMaxOperands> operands;
};

namespace isa_detail {
template <typename... K>
constexpr OpcodeInfo make_info(std::string_view name, K... kinds) {
  return OpcodeInfo{name, static_cast<uint8_t>(sizeof...(kinds)), {kinds...}};
}
using enum OperandKind;
inline constexpr OpcodeInfo kTable[] = {
#define STOWAGE_OPCODE_INFO(name, value, text, ...) make_info(text, __VA_ARGS__),
    STOWAGE_OPCODES(STOWAGE_OPCODE_INFO)
#undef STOWAGE_OPCODE_INFO
};
}  // namespace isa_detail

inline constexpr uint32_t kOpcodeCount = sizeof(isa_detail::kTable) / sizeof(OpcodeInfo);

// Rows are indexed by opcode value, so values must be dense from zero.
inline const OpcodeInfo& opcode_info(Opcode op) { return isa_detail::kTable[static_cast<uint8_t>(op)]; }

// A decoded instruction. Scalar operands sit in `ops` in format order with the list
// operand skipped; the list operand's registers sit in `list`. The per-opcode
// operand positions are named below so that code reads `ins.ops[AllocTensor::kOffset]`.
struct Instruction {
  Opcode op = Opcode::kRet;
  std::array<uint64_t, kMaxOperands> ops{};
  std::vector<uint32_t> list;
  friend bool operator==(const Instruction&, const Instruction&) = default;
};

namespace operands {
struct AllocStorage { enum : uint8_t { kDst, kSize, kDevice, kDType, kScope }; };
struct AllocTensor { enum : uint8_t { kDst, kStorage, kOffset, kShape, kDType }; };
struct Kill { enum : uint8_t { kReg }; };
struct CopyTensor { enum : uint8_t { kSrc, kDst }; };
struct CallKernel { enum : uint8_t { kKernel, kGlobal, kLocal }; };  // args in list
struct Call { enum : uint8_t { kDst, kFunc }; };                       // args in list
struct Move { enum : uint8_t { kDst, kSrc }; };
struct Ret { enum : uint8_t { kReg }; };
struct RetTuple {};  // the fields' registers in list
struct LoadConst { enum : uint8_t { kDst, kConst }; };
struct LoadTensorConstant { enum : uint8_t { kDst, kConstant }; };
struct View { enum : uint8_t { kDst, kTensor, kOffset, kShape, kDType }; };
struct AllocDiscontiguous {
  enum : uint8_t { kDst, kTableStorage, kTableOffsets, kDataStorage, kDataOffsets, kShape, kDType, kEntryBytes };
};
}  // namespace operands

}  // namespace stowage

namespace stowage::isa_detail {
constexpr bool opcodes_are_dense() {
  uint32_t index = 0;
#define STOWAGE_OPCODE_CHECK(name, value, ...) \
  if (value != index++) return false;
  STOWAGE_OPCODES(STOWAGE_OPCODE_CHECK)
#undef STOWAGE_OPCODE_CHECK
  return index == kOpcodeCount;
}
static_assert(opcodes_are_dense(), "opcode values must equal their row in STOWAGE_OPCODES");
}  // namespace stowage::isa_detail
