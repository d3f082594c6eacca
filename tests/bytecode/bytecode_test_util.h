// Helpers for the bytecode tests: the add_mul example built by hand as the code
// generator would build it, and byte-level patching of written files.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stowage/bytecode/file.h"
#include "stowage/bytecode/format.h"
#include "stowage/bytecode/executable.h"
#include "stowage/bytecode/instruction_codec.h"

namespace stowage::testing {

// The loader's message for a file it must refuse ("<accepted>" when it reads it);
// a refusal must be of kind kInvalidInput.
inline std::string refusal_message(const std::vector<uint8_t>& file) {
  Expected<Executable> result = read_bytecode(file);
  if (result) return "<accepted>";
  EXPECT_EQ(result.error().kind(), ErrorKind::kInvalidInput) << result.error().message();
  return result.error().message();
}

inline Instruction make_ins(Opcode op, std::vector<uint64_t> ops, std::vector<uint32_t> list = {}) {
  Instruction ins;
  ins.op = op;
  for (size_t i = 0; i < ops.size(); ++i) ins.ops[i] = ops[i];
  ins.list = std::move(list);
  return ins;
}

inline Constant shape_constant(std::vector<int64_t> shape) {
  Constant c;
  c.kind = ConstantKind::kShape;
  c.shape = std::move(shape);
  return c;
}

inline ValueDesc tensor_value(std::string name, std::vector<int64_t> shape, DType dtype) {
  ValueDesc v;
  v.name = std::move(name);
  v.kind = ValueKind::kTensor;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

inline KernelParam buffer_param(std::string name, DType dtype, bool is_const) {
  KernelParam p;
  p.name = std::move(name);
  p.kind = KernelParamKind::kGlobalBuffer;
  p.dtype = dtype;
  p.is_const = is_const;
  return p;
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Registers of add_mul's main, as a code generator numbers them: parameters first,
// then one register per binding.
namespace add_mul_reg {
enum : uint32_t { kX, kY, kZ, kVtcm, kA, kB, kC, kD, kE, kCount };
}
namespace add_mul_const {
enum : uint32_t { kStorageSize, kTensorShape, kGrid };
}

// examples/add_mul.stir at storage level, compiled by hand.
inline Executable make_add_mul_executable() {
  using namespace add_mul_reg;
  using namespace add_mul_const;
  Executable exe;
  exe.strings = {"global.vtcm"};
  exe.constants = {shape_constant({4096}), shape_constant({4, 64}), shape_constant({256})};

  // examples/kernels/add_mul.cl, after a blank line as this helper always had it.
  const std::string source = "\n" + read_text_file(std::string(STOWAGE_SOURCE_DIR) + "/examples/kernels/add_mul.cl");
  exe.units = {KernelUnit{"vtcm_ops", source}};
  for (const char* name : {"compute_add_in_vtcm", "compute_mul_in_vtcm"}) {
    KernelSignature k;
    k.name = name;
    k.unit = 0;
    k.params = {buffer_param("a", DType::kInt32, true), buffer_param("b", DType::kInt32, true),
                buffer_param("c", DType::kInt32, false)};
    exe.kernels.push_back(k);
  }

  Function main;
  main.name = "main";
  for (const char* name : {"x", "y", "z"}) main.params.push_back(tensor_value(name, {4, 64}, DType::kInt32));
  main.result = tensor_value("", {4, 64}, DType::kInt32);
  main.num_registers = kCount;
  const uint64_t i32 = static_cast<uint64_t>(DType::kInt32);
  const uint64_t u8 = static_cast<uint64_t>(DType::kUInt8);
  main.code = {
      make_ins(Opcode::kAllocStorage, {kVtcm, kStorageSize, 0, u8, 0}),
      make_ins(Opcode::kAllocTensor, {kA, kVtcm, 0, kTensorShape, i32}),
      make_ins(Opcode::kCopyTensor, {kX, kA}),
      make_ins(Opcode::kAllocTensor, {kB, kVtcm, 1024, kTensorShape, i32}),
      make_ins(Opcode::kCopyTensor, {kY, kB}),
      make_ins(Opcode::kAllocTensor, {kC, kVtcm, 2048, kTensorShape, i32}),
      make_ins(Opcode::kCallKernel, {0, kGrid, kNoConstant}, {kA, kB, kC}),
      make_ins(Opcode::kKill, {kA}),
      make_ins(Opcode::kKill, {kB}),
      make_ins(Opcode::kAllocTensor, {kD, kVtcm, 0, kTensorShape, i32}),
      make_ins(Opcode::kCopyTensor, {kZ, kD}),
      make_ins(Opcode::kAllocTensor, {kE, kVtcm, 1024, kTensorShape, i32}),
      make_ins(Opcode::kCallKernel, {1, kGrid, kNoConstant}, {kC, kD, kE}),
      make_ins(Opcode::kRet, {kE}),
  };
  exe.functions = {main};

  ScopeRequirement vtcm;
  vtcm.scope = "global.vtcm";
  vtcm.kind = ScopeKind::kBuffer;
  vtcm.onchip = true;
  vtcm.capacity = 262144;
  vtcm.max_storage_bytes = 4096;
  vtcm.offset_alignment = 1024;  // as the code generator records it: every offset is a multiple of 1024
  exe.requirements.scopes = {vtcm};
  exe.debug_text = read_text_file(std::string(STOWAGE_SOURCE_DIR) + "/examples/add_mul.stir");
  return exe;
}

// ---------------------------------------------------------------------------
// Byte-level access to a written file
// ---------------------------------------------------------------------------

template <typename T>
T get_le(const std::vector<uint8_t>& file, uint64_t at) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(file.at(at + i)) << (8 * i);
  return value;
}

template <typename T>
void put_le(std::vector<uint8_t>& file, uint64_t at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) file.at(at + i) = static_cast<uint8_t>(value >> (8 * i));
}

// Recomputes both checksums so that a patched file reaches the validator.
inline void reseal(std::vector<uint8_t>& file) {
  using namespace bytecode;
  put_le<uint32_t>(file, HeaderField::kBodyCrc,
                   static_cast<uint32_t>(crc32_z(0, file.data() + kHeaderSize, file.size() - kHeaderSize)));
  put_le<uint32_t>(file, HeaderField::kHeaderCrc, 0);
  put_le<uint32_t>(file, HeaderField::kHeaderCrc, static_cast<uint32_t>(crc32_z(0, file.data(), kHeaderSize)));
}

struct SectionLocation {
  uint64_t entry = 0;  // byte offset of its section table entry
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Where section `kind` of a well-formed file lies.
inline SectionLocation find_section(const std::vector<uint8_t>& file, bytecode::SectionKind kind) {
  using namespace bytecode;
  uint64_t table = get_le<uint64_t>(file, HeaderField::kSectionTableOffset);
  uint32_t count = get_le<uint32_t>(file, HeaderField::kSectionCount);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t entry = table + uint64_t{i} * kSectionEntrySize;
    if (get_le<uint32_t>(file, entry + SectionEntryField::kKind) == static_cast<uint32_t>(kind)) {
      return {entry, get_le<uint64_t>(file, entry + SectionEntryField::kOffset),
              get_le<uint64_t>(file, entry + SectionEntryField::kSize)};
    }
  }
  return {};
}

// Byte offset in the file of word `word` of function `fn`'s instruction `index`
// (word 0 is the opcode word), computed from the encoding of `exe`.
inline uint64_t code_byte(const std::vector<uint8_t>& file, const Executable& exe, size_t fn, size_t index,
                          size_t word) {
  uint64_t words = 0;
  for (size_t f = 0; f < fn; ++f) {
    for (const Instruction& ins : exe.functions[f].code) words += encoded_words(ins);
  }
  for (size_t i = 0; i < index; ++i) words += encoded_words(exe.functions[fn].code[i]);
  return find_section(file, bytecode::SectionKind::kCode).offset + 4 * (words + word);
}

}  // namespace stowage::testing
