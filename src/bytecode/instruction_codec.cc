#include "stowage/bytecode/instruction_codec.h"

#include <fmt/format.h>

#include "stowage/support/dtype.h"

namespace stowage {
namespace {

constexpr uint32_t kOpcodeMask = 0xFFu;

// The operands of an opcode, as a span over its table row.
std::span<const OperandKind> operand_kinds(const OpcodeInfo& info) { return {info.operands.data(), info.num_operands}; }

}  // namespace

std::string_view operand_kind_name(OperandKind kind) {
  switch (kind) {
    case OperandKind::kDef: return "def";
    case OperandKind::kReg: return "reg";
    case OperandKind::kConst: return "const";
    case OperandKind::kOptConst: return "optconst";
    case OperandKind::kString: return "string";
    case OperandKind::kKernel: return "kernel";
    case OperandKind::kFunc: return "func";
    case OperandKind::kU32: return "u32";
    case OperandKind::kDType: return "dtype";
    case OperandKind::kU64: return "u64";
    case OperandKind::kRegList: return "reglist";
    case OperandKind::kTensorConst: return "tensorconst";
  }
  return "unknown";
}

uint32_t operand_kind_words(OperandKind kind) { return kind == OperandKind::kU64 ? 2 : 1; }

size_t encoded_words(const Instruction& ins) {
  size_t words = 1;
  for (OperandKind kind : operand_kinds(opcode_info(ins.op))) {
    words += operand_kind_words(kind);
    if (kind == OperandKind::kRegList) words += ins.list.size();
  }
  return words;
}

void encode_instruction(const Instruction& ins, std::vector<uint32_t>& out) {
  out.push_back(static_cast<uint32_t>(ins.op));
  size_t slot = 0;
  for (OperandKind kind : operand_kinds(opcode_info(ins.op))) {
    if (kind == OperandKind::kRegList) {
      out.push_back(static_cast<uint32_t>(ins.list.size()));
      out.insert(out.end(), ins.list.begin(), ins.list.end());
      continue;
    }
    uint64_t value = ins.ops[slot++];
    out.push_back(static_cast<uint32_t>(value));
    if (kind == OperandKind::kU64) out.push_back(static_cast<uint32_t>(value >> 32));
  }
}

size_t decode_instruction(std::span<const uint32_t> words, Instruction& out, DecodeFailure& failure) {
  failure = DecodeFailure{};
  auto fail = [&](size_t word, std::string message) -> size_t {
    failure.word = word;
    failure.message = std::move(message);
    return 0;
  };
  out = Instruction{};
  if (words.empty()) return fail(0, "no instruction word left");
  uint32_t head = words[0];
  uint32_t opcode = head & kOpcodeMask;
  if (opcode >= kOpcodeCount) return fail(0, fmt::format("unknown opcode {}", opcode));
  out.op = static_cast<Opcode>(opcode);
  failure.known_opcode = true;
  const OpcodeInfo& info = opcode_info(out.op);
  if ((head & ~kOpcodeMask) != 0) {
    return fail(0, fmt::format("reserved bits of the opcode word are set (word 0x{:08x})", head));
  }

  size_t pos = 1;
  size_t slot = 0;
  std::span<const OperandKind> kinds = operand_kinds(info);
  for (size_t index = 0; index < kinds.size(); ++index) {
    OperandKind kind = kinds[index];
    uint32_t width = operand_kind_words(kind);
    if (width > words.size() - pos) {
      return fail(
          pos, fmt::format("operand {} ({}) runs past the end of the function's code", index, operand_kind_name(kind)));
    }
    if (kind == OperandKind::kRegList) {
      uint32_t count = words[pos];
      if (count > kMaxListLength) {
        return fail(pos, fmt::format("list of {} registers exceeds the limit {}", count, kMaxListLength));
      }
      if (count > words.size() - pos - 1) {
        return fail(pos, fmt::format("list of {} registers runs past the end of the function's code", count));
      }
      out.list.assign(words.begin() + pos + 1, words.begin() + pos + 1 + count);
      pos += 1 + count;
      continue;
    }
    uint64_t value = words[pos];
    if (kind == OperandKind::kU64) value |= uint64_t{words[pos + 1]} << 32;
    if (kind == OperandKind::kDType && !dtype_from_code(value)) {
      return fail(pos, fmt::format("invalid dtype code {}", value));
    }
    out.ops[slot++] = value;
    pos += width;
  }
  return pos;
}

}  // namespace stowage
