// Well-formed files that break a rule of the format: each is refused with one
// error naming the section, byte offset, function, instruction and rule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace bytecode;
using testing::code_byte;
using testing::find_section;
using testing::make_add_mul_executable;
using testing::make_ins;
using testing::put_le;
using testing::reseal;
namespace reg = testing::add_mul_reg;
namespace cst = testing::add_mul_const;

std::string refusal(const std::vector<uint8_t>& file) { return testing::refusal_message(file); }

std::string refusal(const Executable& exe) { return refusal(write_bytecode(exe)); }

// The message for main's instruction `index` at its word `word`.
std::string code_message(const Executable& exe, size_t index, size_t word, std::string_view rest, size_t fn = 0) {
  std::vector<uint8_t> file = write_bytecode(exe);
  return fmt::format("bytecode: section 'code' at byte {}: function '{}' instruction {} ({}): {}",
                     code_byte(file, exe, fn, index, word), exe.functions[fn].name, index,
                     opcode_info(exe.functions[fn].code[index].op).name, rest);
}

uint32_t add_constant(Executable& exe, Constant c) {
  exe.constants.push_back(std::move(c));
  return static_cast<uint32_t>(exe.constants.size() - 1);
}

Constant int_constant(int64_t value) {
  Constant c;
  c.kind = ConstantKind::kInt;
  c.dtype = DType::kInt64;
  c.int_value = value;
  return c;
}

// The int constant 1 with another kind and dtype.
Constant relabelled(ConstantKind kind, DType dtype) {
  Constant c = int_constant(1);
  c.kind = kind;
  c.dtype = dtype;
  return c;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// A second function `helper(t) -> t` for call tests.
void add_helper(Executable& exe) {
  Function helper;
  helper.name = "helper";
  helper.params = {testing::tensor_value("t", {4, 64}, DType::kInt32)};
  helper.result = testing::tensor_value("", {4, 64}, DType::kInt32);
  helper.num_registers = 1;
  helper.code = {make_ins(Opcode::kRet, {0})};
  exe.functions.push_back(helper);
}

TEST(BytecodeValidation, TheExampleIsValid) {
  Expected<Executable> back = read_bytecode(write_bytecode(make_add_mul_executable()));
  ASSERT_TRUE(back) << back.error().message();
}

// ---------------------------------------------------------------------------
// One change to the example, refused at an instruction word of main
// ---------------------------------------------------------------------------

// `mutate` breaks one rule; the refusal names main's instruction `instruction`,
// its word `word`, and says `rest`.
struct CodeCase {
  std::string name;
  void (*mutate)(Executable& exe);
  size_t instruction;
  size_t word;
  std::string rest;
};

void PrintTo(const CodeCase& c, std::ostream* os) { *os << c.name; }

class CodeRefusalTest : public ::testing::TestWithParam<CodeCase> {};

TEST_P(CodeRefusalTest, NamesTheInstructionWord) {
  const CodeCase& c = GetParam();
  Executable exe = make_add_mul_executable();
  c.mutate(exe);
  EXPECT_EQ(refusal(exe), code_message(exe, c.instruction, c.word, c.rest));
}

using operands::AllocStorage;
using operands::AllocTensor;
using operands::CallKernel;
using operands::CopyTensor;

INSTANTIATE_TEST_SUITE_P(
    BytecodeValidation, CodeRefusalTest,
    ::testing::Values(
        // Operand indices
        CodeCase{"DefinedRegisterOutOfRange", [](Executable& e) { e.functions[0].code[1].ops[AllocTensor::kDst] = 17; },
                 1, 1, "register 17 out of range (function has 9 registers)"},
        CodeCase{"ReadRegisterOutOfRange", [](Executable& e) { e.functions[0].code[2].ops[CopyTensor::kSrc] = 9; }, 2,
                 1, "register 9 out of range (function has 9 registers)"},
        // 0xFFFFFFFF (kNullRegister) is a null buffer argument in call_kernel's list.
        CodeCase{"ListRegisterOutOfRange", [](Executable& e) { e.functions[0].code[6].list[2] = 0xFFFFFFFE; }, 6, 7,
                 "register 4294967294 out of range (function has 9 registers)"},
        CodeCase{"ConstantIndexOutOfRange", [](Executable& e) { e.functions[0].code[1].ops[AllocTensor::kShape] = 3; },
                 1, 5, "constant 3 out of range (executable has 3 constants)"},
        CodeCase{"OptionalConstantOutOfRange",
                 [](Executable& e) { e.functions[0].code[6].ops[CallKernel::kLocal] = 3; }, 6, 3,
                 "constant 3 out of range (executable has 3 constants)"},
        CodeCase{"StringIndexOutOfRange", [](Executable& e) { e.functions[0].code[0].ops[AllocStorage::kScope] = 1; },
                 0, 5, "string 1 out of range (executable has 1 strings)"},
        CodeCase{"KernelIndexOutOfRange", [](Executable& e) { e.functions[0].code[12].ops[CallKernel::kKernel] = 2; },
                 12, 1, "kernel 2 out of range (executable has 2 kernels)"},
        CodeCase{"FunctionIndexOutOfRange",
                 [](Executable& e) {
                   auto& code = e.functions[0].code;
                   code.insert(code.end() - 1, make_ins(Opcode::kCall, {reg::kD, 1}, {reg::kE}));
                 },
                 13, 2, "function 1 out of range (executable has 1 functions)"},
        // Encoding
        CodeCase{"BadDTypeCodeInCode",
                 [](Executable& e) { e.functions[0].code[1].ops[AllocTensor::kDType] = kDTypeCount; }, 1, 6,
                 fmt::format("invalid dtype code {}", kDTypeCount)},
        CodeCase{"ListLongerThanTheLimit",
                 [](Executable& e) { e.functions[0].code[6].list.assign(kMaxListLength + 1, reg::kA); }, 6, 4,
                 fmt::format("list of {} registers exceeds the limit {}", kMaxListLength + 1, kMaxListLength)},
        // Function structure
        CodeCase{"FunctionWithoutRet", [](Executable& e) { e.functions[0].code.pop_back(); }, 12, 0,
                 "the function's code does not end with ret"},
        // Register life in straight-line code
        CodeCase{"ReadBeforeWrite", [](Executable& e) { e.functions[0].code[2].ops[CopyTensor::kSrc] = reg::kD; }, 2, 1,
                 "register 7 is read before it is written"},
        // a was killed by instruction 7
        CodeCase{"ReadAfterKill", [](Executable& e) { e.functions[0].code[12].list[0] = reg::kA; }, 12, 5,
                 "register 4 is read after it was killed"},
        // Calls
        CodeCase{"CallKernelArgumentCountMismatch",
                 [](Executable& e) {
                   e.functions[0].code[6].list = {reg::kA, reg::kB};
                 },
                 6, 4, "2 arguments passed, kernel 'compute_add_in_vtcm' takes 3"},
        CodeCase{
            "GridIsNotAShape",
            [](Executable& e) { e.functions[0].code[6].ops[CallKernel::kGlobal] = add_constant(e, int_constant(256)); },
            6, 2, "grid constant 3 is not a shape"},
        CodeCase{"GridOfRankZero", [](Executable& e) { e.constants[cst::kGrid].shape = {}; }, 6, 2,
                 "grid has rank 0 (must be 1 to 3)"},
        CodeCase{"GridOfRankFour",
                 [](Executable& e) {
                   e.constants[cst::kGrid].shape = {1, 1, 1, 256};
                 },
                 6, 2, "grid has rank 4 (must be 1 to 3)"},
        CodeCase{"GridExtentZero", [](Executable& e) { e.constants[cst::kGrid].shape = {0}; }, 6, 2,
                 "grid extent 0 (extents must be > 0)"},
        CodeCase{"GridExtentNegative", [](Executable& e) { e.constants[cst::kGrid].shape = {-256}; }, 6, 2,
                 "grid constant 2 has a negative extent -256"},
        // Storage: scopes and static bounds
        CodeCase{"TensorShapeIsNotAShape",
                 [](Executable& e) {
                   e.functions[0].code[1].ops[AllocTensor::kShape] = add_constant(e, int_constant(1024));
                 },
                 1, 5, "shape constant 3 is not a shape"},
        CodeCase{"StorageSizeIsNotAShape",
                 [](Executable& e) {
                   e.functions[0].code[0].ops[AllocStorage::kSize] = add_constant(e, int_constant(4096));
                 },
                 0, 2, "size constant 3 is not a shape"},
        CodeCase{"NegativeTensorExtent",
                 [](Executable& e) {
                   e.constants[cst::kTensorShape].shape = {-4, 64};
                 },
                 1, 5, "shape constant 1 has a negative extent -4"},
        CodeCase{"ScopeNotInTheRequirements", [](Executable& e) { e.strings[0] = "global.onchip"; }, 0, 5,
                 "scope 'global.onchip' is not listed in the requirements"},
        CodeCase{"StorageLargerThanDeclared", [](Executable& e) { e.requirements.scopes[0].max_storage_bytes = 2048; },
                 0, 2, "storage of 4096 bytes exceeds max_storage_bytes 2048 of scope 'global.vtcm'"},
        CodeCase{"BufferStorageSizeIsOneExtent",
                 [](Executable& e) {
                   e.constants[cst::kStorageSize].shape = {64, 64};
                 },
                 0, 2, "size of a buffer storage must be [nbytes], has rank 2"},
        // 25 * 128; 3200 + 1024 > 4096
        CodeCase{"AllocTensorOutOfStaticBounds",
                 [](Executable& e) { e.functions[0].code[5].ops[AllocTensor::kOffset] = 3200; }, 5, 3,
                 "tensor: 1024 bytes at offset 3200 do not fit in a storage of 4096 bytes (instruction 0)"},
        // aligned, and offset + 1024 wraps
        CodeCase{"AllocTensorOffsetNearTwoToTheSixtyFour",
                 [](Executable& e) { e.functions[0].code[5].ops[AllocTensor::kOffset] = ~uint64_t{0} - 127; }, 5, 3,
                 fmt::format("tensor: 1024 bytes at offset {} do not fit in a storage of 4096 bytes (instruction 0)",
                             ~uint64_t{0} - 127)},
        CodeCase{"AllocTensorLargerThanItsStorage",
                 [](Executable& e) {
                   e.constants[cst::kTensorShape].shape = {64, 64};
                 },
                 1, 3, "tensor: 16384 bytes at offset 0 do not fit in a storage of 4096 bytes (instruction 0)"},
        CodeCase{"AllocTensorSizeOverflows",
                 [](Executable& e) {
                   e.constants[cst::kTensorShape].shape = {int64_t{1} << 62, 4};
                 },
                 1, 5, "tensor size overflows 64 bits"},
        CodeCase{"MisalignedTensorOffset",
                 [](Executable& e) { e.functions[0].code[5].ops[AllocTensor::kOffset] = 2048 + 64; }, 5, 3,
                 "offset 2112 is not a multiple of 1024, the alignment of scope 'global.vtcm'"},
        CodeCase{"BoundsFollowAStorageThroughMove",
                 [](Executable& e) {
                   auto& fn = e.functions[0];
                   const uint32_t alias = fn.num_registers++;
                   fn.code.insert(fn.code.begin() + 1, make_ins(Opcode::kMove, {alias, reg::kVtcm}));
                   fn.code[2].ops[AllocTensor::kStorage] = alias;
                   fn.code[2].ops[AllocTensor::kOffset] = 3200;
                 },
                 2, 3, "tensor: 1024 bytes at offset 3200 do not fit in a storage of 4096 bytes (instruction 0)"},
        // Tables: a tensor's shape has rank 16 at most
        CodeCase{
            "TensorShapeRankOverTheLimit",
            [](Executable& e) { e.constants[cst::kTensorShape].shape = std::vector<int64_t>(kMaxShapeRank + 1, 1); }, 1,
            5, "shape constant 1 has rank 17, more than 16"}),
    [](const ::testing::TestParamInfo<CodeCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// One change to the example, refused with a message about a table entry
// ---------------------------------------------------------------------------

// `mutate` breaks one rule; the refusal contains `part` (the section, entry and rule).
struct TableCase {
  std::string name;
  void (*mutate)(Executable& exe);
  std::string part;
};

void PrintTo(const TableCase& c, std::ostream* os) { *os << c.name; }

class TableRefusalTest : public ::testing::TestWithParam<TableCase> {};

TEST_P(TableRefusalTest, NamesTheEntry) {
  Executable exe = make_add_mul_executable();
  GetParam().mutate(exe);
  std::string message = refusal(exe);
  EXPECT_TRUE(contains(message, GetParam().part)) << message;
}

INSTANTIATE_TEST_SUITE_P(
    BytecodeValidation, TableRefusalTest,
    ::testing::Values(
        // Functions
        TableCase{"FunctionWithoutCodeSection",
                  [](Executable& e) {
                    add_helper(e);
                    e.functions[1].code.clear();
                  },
                  "section 'functions'"},
        TableCase{"FunctionWithoutCode",
                  [](Executable& e) {
                    add_helper(e);
                    e.functions[1].code.clear();
                  },
                  "function 1 'helper': the function has no code"},
        TableCase{"DuplicateFunctionNames",
                  [](Executable& e) {
                    add_helper(e);
                    e.functions[1].name = "main";
                  },
                  "function 1: function name 'main' is used twice"},
        TableCase{"FunctionNameWithNul", [](Executable& e) { e.functions[0].name = std::string("ma\0in", 5); },
                  "function 0: function name contains a NUL byte"},
        TableCase{"EmptyFunctionName", [](Executable& e) { e.functions[0].name = ""; },
                  "function 0: function name is empty"},
        TableCase{"TooFewRegistersForTheParameters", [](Executable& e) { e.functions[0].num_registers = 2; },
                  "function 0 'main': 2 registers cannot hold its 3 parameters"},
        TableCase{"TooManyRegisters", [](Executable& e) { e.functions[0].num_registers = kMaxRegisters + 1; },
                  "function 0 'main': 65537 registers exceed the limit 65536"},
        // Value descriptions; an int result keeps its shape
        TableCase{"NonTensorValueWithAShape", [](Executable& e) { e.functions[0].result.kind = ValueKind::kInt; },
                  "function 0 'main': a non-tensor value has a shape of rank 2"},
        TableCase{"ValueWithNegativeExtent", [](Executable& e) { e.functions[0].params[1].shape[0] = -4; },
                  "function 0 'main': negative extent -4 in dimension 0"},
        TableCase{"UnknownValueKind", [](Executable& e) { e.functions[0].params[0].kind = static_cast<ValueKind>(9); },
                  "function 0 'main': unknown value kind 9"},
        TableCase{"ParameterShapeRankOverTheLimit",
                  [](Executable& e) { e.functions[0].params[0].shape = std::vector<int64_t>(kMaxShapeRank + 1, 1); },
                  "shape rank 17 exceeds the limit 16"},
        // Constants: kind and dtype agree
        TableCase{"ShapeConstantDType", [](Executable& e) { e.constants[0].dtype = DType::kInt32; },
                  "constant 0: a shape constant's dtype must be int64"},
        TableCase{"FloatConstantDType",
                  [](Executable& e) { add_constant(e, relabelled(ConstantKind::kFloat, DType::kInt64)); },
                  "constant 3: a float constant cannot have dtype int64"},
        TableCase{"IntConstantDType",
                  [](Executable& e) { add_constant(e, relabelled(ConstantKind::kInt, DType::kFloat32)); },
                  "constant 3: an int constant cannot have dtype float32"},
        TableCase{"UnknownConstantKind", [](Executable& e) { e.constants[0].kind = static_cast<ConstantKind>(3); },
                  "constant 0: unknown constant kind 3"},
        // Kernel signatures
        TableCase{"KernelUnitOutOfRangeSection", [](Executable& e) { e.kernels[1].unit = 1; }, "section 'kernels'"},
        TableCase{"KernelUnitOutOfRange", [](Executable& e) { e.kernels[1].unit = 1; },
                  "kernel 1 'compute_mul_in_vtcm': unit 1 out of range (executable has 1 kernel units)"},
        TableCase{
            "UnknownKernelParameterKind",
            [](Executable& e) { e.kernels[0].params[2].kind = static_cast<KernelParamKind>(kKernelParamKindCount); },
            "kernel 0 'compute_add_in_vtcm' parameter 2: unknown parameter kind 7"},
        TableCase{"KernelParameterDType",
                  [](Executable& e) { e.kernels[0].params[1].dtype = static_cast<DType>(kDTypeCount); },
                  "parameter 1: invalid dtype code 12"},
        TableCase{"KernelParameterLanes", [](Executable& e) { e.kernels[0].params[0].lanes = 5; },
                  "parameter 0: 5 lanes (must be 1, 2, 3, 4, 8 or 16)"},
        TableCase{"EmptyKernelName", [](Executable& e) { e.kernels[0].name = ""; }, "kernel 0: kernel name is empty"},
        TableCase{"KernelParameterCount", [](Executable& e) { e.kernels[0].params.resize(kMaxKernelParams + 1); },
                  "parameter count 257 exceeds the limit 256"},
        // Scope requirements
        TableCase{"OffsetAlignmentNotAPowerOfTwo",
                  [](Executable& e) { e.requirements.scopes[0].offset_alignment = 96; },
                  "scope 0: offset_alignment 96 is not a power of two"},
        TableCase{"OffsetAlignmentZero", [](Executable& e) { e.requirements.scopes[0].offset_alignment = 0; },
                  "scope 0: offset_alignment 0 is not a power of two"},
        TableCase{
            "MaxStorageBytesOverCapacity",
            [](Executable& e) { e.requirements.scopes[0].max_storage_bytes = e.requirements.scopes[0].capacity + 1; },
            "scope 0: max_storage_bytes 262145 exceeds the on-chip capacity 262144"},
        TableCase{"ScopeListedTwice", [](Executable& e) { e.requirements.scopes.push_back(e.requirements.scopes[0]); },
                  "scope 1: scope 'global.vtcm' is listed twice"},
        TableCase{"UnknownScopeKind", [](Executable& e) { e.requirements.scopes[0].kind = static_cast<ScopeKind>(2); },
                  "scope 0: unknown scope kind 2"}),
    [](const ::testing::TestParamInfo<TableCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------

TEST(BytecodeValidation, ReservedOpcodeBits) {
  Executable exe = make_add_mul_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  uint64_t at = code_byte(file, exe, 0, 2, 0);
  put_le<uint32_t>(file, at, 0x00010000u | static_cast<uint32_t>(Opcode::kCopyTensor));
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 2 "
                                       "(copy_tensor): reserved bits of the opcode word are set (word 0x00010003)",
                                       at));
}

TEST(BytecodeValidation, UnknownOpcode) {
  Executable exe = make_add_mul_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  uint64_t at = code_byte(file, exe, 0, 2, 0);
  put_le<uint32_t>(file, at, 0xC8);
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 2: unknown opcode 200", at));
}

TEST(BytecodeValidation, InstructionRunsPastItsFunction) {
  Executable exe = make_add_mul_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  // main's code word count is the last u32 of the functions section.
  auto functions = find_section(file, SectionKind::kFunctions);
  uint64_t count_at = functions.offset + functions.size - 4;
  put_le<uint32_t>(file, count_at, testing::get_le<uint32_t>(file, count_at) - 1);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 13 (ret): "
                                       "operand 0 (reg) runs past the end of the function's code",
                                       code_byte(file, exe, 0, 13, 1)));
}

// ---------------------------------------------------------------------------
// Function structure
// ---------------------------------------------------------------------------

TEST(BytecodeValidation, CodeRangesOverlap) {
  Executable exe = make_add_mul_executable();
  add_helper(exe);
  std::vector<uint8_t> file = write_bytecode(exe);
  auto functions = find_section(file, SectionKind::kFunctions);
  uint64_t first_at = functions.offset + functions.size - 8;  // helper's first code word
  put_le<uint32_t>(file, first_at, 0);
  reseal(file);
  size_t main_words = 0;
  for (const Instruction& ins : exe.functions[0].code) main_words += encoded_words(ins);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'functions' at byte {}: code words [0, +2) overlap another "
                                       "function's [0, +{})",
                                       first_at, main_words));
}

TEST(BytecodeValidation, CodeRangeOutsideTheCodeSection) {
  Executable exe = make_add_mul_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  auto functions = find_section(file, SectionKind::kFunctions);
  uint64_t first_at = functions.offset + functions.size - 8;
  put_le<uint32_t>(file, first_at, 0xFFFFFFFF);  // first + count wraps 32 bits
  reseal(file);
  uint64_t words = find_section(file, SectionKind::kCode).size / 4;
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'functions' at byte {}: function 0 'main': code words "
                                       "[4294967295, +{}) lie outside the code section ({} words)",
                                       first_at, words, words));
}

// ---------------------------------------------------------------------------
// Register life in straight-line code
// ---------------------------------------------------------------------------

TEST(BytecodeValidation, RedefinitionAfterKillIsValid) {
  Executable exe = make_add_mul_executable();
  // d reuses a's register once a is dead.
  for (size_t i : {9u, 10u, 12u}) {
    Instruction& ins = exe.functions[0].code[i];
    if (ins.op == Opcode::kCallKernel)
      ins.list[1] = reg::kA;
    else if (ins.op == Opcode::kAllocTensor)
      ins.ops[operands::AllocTensor::kDst] = reg::kA;
    else
      ins.ops[operands::CopyTensor::kDst] = reg::kA;
  }
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

// ---------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------

TEST(BytecodeValidation, CallArgumentCountMismatch) {
  Executable exe = make_add_mul_executable();
  add_helper(exe);
  auto& code = exe.functions[0].code;
  code.insert(code.end() - 1, make_ins(Opcode::kCall, {reg::kD, 1}, {reg::kE, reg::kC}));
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 3, "2 arguments passed, function 'helper' takes 1"));
  code[13].list = {reg::kE};
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

// A grid whose product wraps 64 bits once launched 4 work items and exited 0.
TEST(BytecodeValidation, GridWorkItemsAreBounded) {
  Executable exe = make_add_mul_executable();
  exe.constants[cst::kGrid].shape = {INT64_MAX, INT64_MAX, 4};
  EXPECT_EQ(refusal(exe), code_message(exe, 6, 2,
                                       "grid [9223372036854775807, 9223372036854775807, 4] has 2^64 or more work "
                                       "items, more than the limit of 1099511627776 (2^40)"));
  exe.constants[cst::kGrid].shape = {1 << 20, (1 << 20) + 1};
  EXPECT_EQ(refusal(exe), code_message(exe, 6, 2,
                                       "grid [1048576, 1048577] has 1099512676352 work items, more than the limit of "
                                       "1099511627776 (2^40)"));
  exe.constants[cst::kGrid].shape = {1 << 20, 1 << 20};  // exactly the limit
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

// ---------------------------------------------------------------------------
// Kernel sources: self-contained
// ---------------------------------------------------------------------------

// The byte offset in `file` of byte `at` of unit 0's source.
uint64_t unit_source_byte(const std::vector<uint8_t>& file, const Executable& exe, uint64_t at) {
  testing::SectionLocation kernels = find_section(file, SectionKind::kKernels);
  return kernels.offset + 8 + 4 + exe.units[0].name.size() + 4 + at;
}

TEST(BytecodeValidation, KernelSourcesMayNotNameFiles) {
  const std::pair<std::string, std::string> cases[] = {
      {"#include \"/etc/passwd\"\n", "#include"},
      {"#  include </etc/passwd>\n", "#include"},
      {"#inc\\\nlude </etc/passwd>\n", "#include"},
      {"#include_next <x.h>\n", "#include_next"},
      {"#if __has_include(</etc/passwd>)\n#endif\n", "__has_include"},
  };
  for (const auto& [directive, form] : cases) {
    Executable exe = make_add_mul_executable();
    std::string& source = exe.units[0].source;
    size_t at = source.size();
    source += directive;
    uint64_t form_at = at + (form == "__has_include" ? 4 : 0);
    std::vector<uint8_t> file = write_bytecode(exe);
    EXPECT_EQ(refusal(file),
              fmt::format("bytecode: section 'kernels' at byte {}: kernel unit 0 'vtcm_ops': '{}' at byte {} of the "
                          "source could read a file of the machine it runs on; units must be self-contained",
                          unit_source_byte(file, exe, form_at), form, form_at))
        << directive;
  }
}

TEST(BytecodeValidation, LocalSizeMustDivideTheGrid) {
  Executable exe = make_add_mul_executable();
  uint32_t local = add_constant(exe, testing::shape_constant({100}));
  exe.functions[0].code[6].ops[operands::CallKernel::kLocal] = local;
  EXPECT_EQ(refusal(exe), code_message(exe, 6, 3, "grid extent 256 is not a multiple of local size 100 (dimension 0)"));
  exe.constants[local].shape = {16, 16};
  EXPECT_EQ(refusal(exe), code_message(exe, 6, 3, "local size has rank 2, the grid has rank 1"));
  exe.constants[local].shape = {64};
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

// ---------------------------------------------------------------------------
// Storage: scopes and static bounds
// ---------------------------------------------------------------------------

// A storage passed in as a parameter has no static size: the VM checks at run time.
TEST(BytecodeValidation, StorageFromAParameterIsNotCheckedStatically) {
  Executable exe = make_add_mul_executable();
  Function f;
  f.name = "view";
  ValueDesc storage;
  storage.name = "s";
  storage.kind = ValueKind::kOther;
  f.params = {storage};
  f.result = testing::tensor_value("", {4, 64}, DType::kInt32);
  f.num_registers = 2;
  f.code = {make_ins(Opcode::kAllocTensor, {1, 0, 3, cst::kTensorShape, static_cast<uint64_t>(DType::kInt32)}),
            make_ins(Opcode::kRet, {1})};
  exe.functions.push_back(f);
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

// The image scope used by the texture tests.
ScopeRequirement texture_scope() {
  ScopeRequirement s;
  s.scope = "global.texture";
  s.kind = ScopeKind::kImage2d;
  s.max_storage_bytes = 0;
  s.offset_alignment = 1;
  s.layout = ImageLayout::kActivation;
  s.max_image_width = 16384;
  s.max_image_height = 16384;
  return s;
}

TEST(BytecodeValidation, ImageStorage) {
  Executable exe = make_add_mul_executable();
  exe.requirements.scopes.push_back(texture_scope());
  exe.requirements.features = kFeatureImages;
  exe.strings.push_back("global.texture");
  uint32_t extent = add_constant(exe, testing::shape_constant({64, 4}));
  auto& fn = exe.functions[0];
  const uint32_t image = fn.num_registers++;
  const uint32_t view = fn.num_registers++;
  const uint64_t f32 = static_cast<uint64_t>(DType::kFloat32);
  const uint32_t pixels = add_constant(exe, testing::shape_constant({64, 4, 4}));  // 64 x 4 RGBA pixels
  fn.code.insert(fn.code.end() - 1, {make_ins(Opcode::kAllocStorage, {image, extent, 0, f32, 1}),
                                     make_ins(Opcode::kAllocTensor, {view, image, 0, pixels, f32})});
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  ASSERT_TRUE(back) << back.error().message();

  // The tensor's image extent must fit the storage's.
  exe.constants[pixels].shape = {65, 4, 4};
  EXPECT_EQ(refusal(exe), code_message(exe, 14, 5, "tensor in scope 'global.texture' needs an image of height 65 and "
                                                   "width 4, but the storage is [64, 4] (instruction 13)"));
  exe.constants[pixels].shape = {64, 4, 3};
  EXPECT_EQ(refusal(exe), code_message(exe, 14, 5, "shape of rank 3 is not an image shape (last extent 4, rank at most "
                                                   "5, extent within 64 bits)"));
  exe.constants[pixels].shape = {64, 4, 4};
  exe.constants[extent].shape = {64, 20000};
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 2, "image of 64x20000 pixels is empty or exceeds the 16384x16384 of "
                                                   "scope 'global.texture'"));
  exe.constants[extent].shape = {64, 4};

  // An offset in an image is the top-left pixel, y << 32 | x (version 1.6): 16 is [0, 16].
  fn.code[14].ops[operands::AllocTensor::kOffset] = 16;
  EXPECT_EQ(refusal(exe), code_message(exe, 14, 3, "tensor in scope 'global.texture' needs an image of height 64 and "
                                                   "width 4 at [0, 16], but the storage is [64, 4] (instruction 13)"));
  fn.code[14].ops[operands::AllocTensor::kOffset] = 0;
  exe.constants[extent].shape = {256};
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 2, "size of an image2d storage must be [height, width], has rank 1"));
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

TEST(BytecodeValidation, BadDTypeCodeInConstants) {
  Executable exe = make_add_mul_executable();
  exe.constants[0].dtype = static_cast<DType>(200);
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'constants' at byte {}: constant 0: invalid dtype code 200",
                                       find_section(file, SectionKind::kConstants).offset + 9));
}

// A tensor's shape has rank 16 at most; a shape constant as such may be longer,
// since it also lists a discontiguous tensor's block offsets (one per block).
// (The tables above have the two refusals.)
TEST(BytecodeValidation, LongShapeConstantIsValid) {
  Executable exe = make_add_mul_executable();
  add_constant(exe, testing::shape_constant(std::vector<int64_t>(1000, 4096)));
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

TEST(BytecodeValidation, ImagesNeedTheImagesFeature) {
  Executable exe = make_add_mul_executable();
  exe.requirements.scopes.push_back(texture_scope());
  EXPECT_TRUE(contains(refusal(exe), "scope 'global.texture' is image2d but the images feature bit is not set"));
  exe = make_add_mul_executable();
  exe.kernels[0].params[0].kind = KernelParamKind::kImage2dRead;
  EXPECT_TRUE(
      contains(refusal(exe), "kernel 'compute_add_in_vtcm' takes an image but the images feature bit is not set"));
  exe.requirements.features = kFeatureImages;
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  EXPECT_TRUE(back) << back.error().message();
}

}  // namespace
}  // namespace stowage
