// Encoding and decoding of single instructions, driven by the opcode table of isa.h
// and nothing else: adding an opcode there is enough for both directions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/support/error.h"
#include "stowage/bytecode/isa.h"

namespace stowage {

// Words `ins` takes when encoded.
size_t encoded_words(const Instruction& ins);

// Appends the encoding of `ins` to `out`. Operands are written as the format says:
// one-word kinds take the low 32 bits of their `ops` slot, kU64 both halves (low
// first), the list its length then its registers. Nothing is range-checked here;
// read_bytecode validates what a writer produced.
void encode_instruction(const Instruction& ins, std::vector<uint32_t>& out);

// Why decoding failed, and where: the index (into the span given to
// decode_instruction) of the word at fault.
struct DecodeFailure {
  size_t word = 0;
  bool known_opcode = false;  // `out.op` holds the instruction's opcode
  std::string message;        // without the opcode's name
};

// Decodes the instruction at the front of `words` into `out` and returns the number
// of words it used, or 0 with `failure` filled in. Checks what the encoding alone
// decides: the opcode is known, the reserved bits of word 0 are zero, every operand
// lies inside `words`, a list is at most kMaxListLength long, a kDType operand names
// a dtype. Index ranges need the executable: the reader's validator checks those.
size_t decode_instruction(std::span<const uint32_t> words, Instruction& out, DecodeFailure& failure);

// Text names, as docs/bytecode.md uses them ("def", "reg", "const", ...).
std::string_view operand_kind_name(OperandKind kind);
// Encoded width of a kind in words; for kRegList the width of its length word.
uint32_t operand_kind_words(OperandKind kind);

}  // namespace stowage
