// Tuple results (version 1.4): a function's result of kind tuple and the ret_tuple
// instruction. The round trip, and one malformed file per rule with its exact
// message naming the section and byte.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace testing;
using bytecode::HeaderField;
using bytecode::SectionKind;
namespace reg = add_mul_reg;

// add_mul's main returning the tuple (c, e) instead of e alone: c is the sum, e the product.
Executable make_tuple_executable() {
  Executable exe = make_add_mul_executable();
  Function& main = exe.functions[0];
  main.result = ValueDesc{};
  main.result.name = "";
  main.result.kind = ValueKind::kTuple;
  main.result.fields = {tensor_value("c", {4, 64}, DType::kInt32), tensor_value("e", {4, 64}, DType::kInt32)};
  main.code.back() = make_ins(Opcode::kRetTuple, {}, {reg::kC, reg::kE});
  exe.minor_version = 4;  // as read back
  return exe;
}

std::string refusal(const std::vector<uint8_t>& file) { return testing::refusal_message(file); }

std::string refusal(const Executable& exe) { return refusal(write_bytecode(exe)); }

// Byte offsets in the functions section of main's description: u64 count, str
// "main", u32 parameter count, three parameters of 29 bytes (str of one letter, kind,
// dtype, reserved, rank 2 shape), then the result.
constexpr uint64_t kFirstParam = 8 + 8 + 4;
constexpr uint64_t kParamBytes = 29;
constexpr uint64_t kResult = kFirstParam + 3 * kParamBytes;
constexpr uint64_t kResultKind = kResult + 4;          // after its empty name
constexpr uint64_t kFieldCount = kResultKind + 1 + 1 + 2 + 4;  // kind, dtype, reserved, rank 0
constexpr uint64_t kFirstField = kFieldCount + 4;

uint64_t functions_at(const std::vector<uint8_t>& file) { return find_section(file, SectionKind::kFunctions).offset; }

// The message for main's instruction `index` at its word `word`.
std::string code_message(const Executable& exe, size_t index, size_t word, std::string_view rest) {
  std::vector<uint8_t> file = write_bytecode(exe);
  return fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction {} ({}): {}",
                     code_byte(file, exe, 0, index, word), index, opcode_info(exe.functions[0].code[index].op).name,
                     rest);
}

std::string functions_message(const std::vector<uint8_t>& file, uint64_t at, std::string_view rest) {
  return fmt::format("bytecode: section 'functions' at byte {}: function 0 'main': {}", functions_at(file) + at, rest);
}

TEST(TupleBytecode, RoundTripsAtVersion14) {
  const Executable exe = make_tuple_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, HeaderField::kMinor), 4);
  EXPECT_EQ(file[functions_at(file) + kResultKind], 5);  // ValueKind::kTuple
  EXPECT_EQ(get_le<uint32_t>(file, functions_at(file) + kFieldCount), 2u);
  Expected<Executable> back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(back->functions[0].result.fields[1].name, "e");
  EXPECT_EQ(back->functions[0].code.back().list, (std::vector<uint32_t>{reg::kC, reg::kE}));
  EXPECT_EQ(write_bytecode(*back), file);
  // Files without tuples keep their older version.
  EXPECT_EQ(get_le<uint16_t>(write_bytecode(make_add_mul_executable()), HeaderField::kMinor), 0);
}

TEST(TupleBytecode, ATupleOfOneIsValid) {
  Executable exe = make_tuple_executable();
  exe.functions[0].result.fields.pop_back();
  exe.functions[0].code.back().list = {reg::kE};
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
}

// A reader refuses a newer minor by its version before reading anything else, as
// runtimes of 1.3 refuse these files.
TEST(TupleBytecode, OlderReadersRefuseItByItsVersion) {
  std::vector<uint8_t> file = write_bytecode(make_tuple_executable());
  ASSERT_EQ(bytecode::kMinorVersion, 7);
  put_le<uint16_t>(file, HeaderField::kMinor, 8);
  reseal(file);
  EXPECT_EQ(refusal(file), "bytecode: header at byte 10: version 1.8 is newer than this runtime's 1.7");
}

TEST(TupleBytecode, ATupleResultNeedsVersion14) {
  std::vector<uint8_t> file = write_bytecode(make_tuple_executable());
  put_le<uint16_t>(file, HeaderField::kMinor, 3);
  reseal(file);
  EXPECT_EQ(refusal(file), functions_message(file, kResultKind, "a tuple result needs version 1.4; the file declares "
                                                                "1.3"));
}

TEST(TupleBytecode, OnlyAResultIsATuple) {
  Executable exe = make_tuple_executable();
  exe.functions[0].params[1] = exe.functions[0].result;  // named "": its kind follows 4 bytes of name
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(refusal(file), functions_message(file, kFirstParam + kParamBytes + 4,
                                             "a parameter cannot be a tuple; only a result can"));
}

TEST(TupleBytecode, FieldsAreTensors) {
  Executable exe = make_tuple_executable();
  ValueDesc& second = exe.functions[0].result.fields[1];
  second.kind = ValueKind::kInt;
  second.shape = {};
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(refusal(file), functions_message(file, kFirstField + kParamBytes + 5,
                                             "a tuple field of kind 1 is not a tensor; a tuple holds tensors"));

  exe = make_tuple_executable();
  ValueDesc nested = exe.functions[0].result;
  exe.functions[0].result.fields[0] = nested;
  file = write_bytecode(exe);
  EXPECT_EQ(refusal(file),
            functions_message(file, kFirstField + 4, "a tuple field cannot be a tuple; a tuple holds tensors"));
}

TEST(TupleBytecode, FieldCountIsCheckedBeforeUse) {
  Executable exe = make_tuple_executable();
  exe.functions[0].result.fields.clear();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(refusal(file), functions_message(file, kFieldCount, "a tuple result has no fields"));

  file = write_bytecode(make_tuple_executable());
  const uint64_t count_at = functions_at(file) + kFieldCount;
  put_le<uint32_t>(file, count_at, 0xFFFFFFFFu);
  reseal(file);
  EXPECT_EQ(refusal(file), functions_message(file, kFieldCount, "tuple field count 4294967295 exceeds the limit 4096"));

  put_le<uint32_t>(file, count_at, 4096);  // within the limit, not within the section
  reseal(file);
  const uint64_t left = find_section(file, SectionKind::kFunctions).size - (kFieldCount + 4);
  EXPECT_EQ(refusal(file),
            functions_message(file, kFieldCount,
                              fmt::format("tuple field count 4096 cannot fit in the {} bytes left in the section",
                                          left)));
}

// ---------------------------------------------------------------------------
// ret_tuple, refused at its words
// ---------------------------------------------------------------------------

TEST(TupleBytecode, RetTupleReturnsOneRegisterPerField) {
  Executable exe = make_tuple_executable();
  exe.functions[0].code.back().list = {reg::kE};
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 1, "1 registers returned, the function's tuple result has 2 fields"));
  exe.functions[0].code.back().list = {reg::kC, reg::kE, reg::kX};
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 1, "3 registers returned, the function's tuple result has 2 fields"));
}

TEST(TupleBytecode, RetTupleRegistersAreDistinct) {
  Executable exe = make_tuple_executable();
  exe.functions[0].code.back().list = {reg::kE, reg::kE};
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 3, "register 8 is returned twice (fields 0 and 1)"));
}

TEST(TupleBytecode, RetTupleRegistersAreInRangeAndLive) {
  Executable exe = make_tuple_executable();
  exe.functions[0].code.back().list = {reg::kC, 99};
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 3, "register 99 out of range (function has 9 registers)"));
  exe.functions[0].code.back().list = {reg::kA, reg::kE};  // a was killed by instruction 7
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 2, "register 4 is read after it was killed"));
}

TEST(TupleBytecode, RetTupleListLengthIsCapped) {
  Executable exe = make_tuple_executable();
  exe.functions[0].code.back().list.assign(kMaxListLength + 1, reg::kE);
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 1,
                                       fmt::format("list of {} registers exceeds the limit {}", kMaxListLength + 1,
                                                   kMaxListLength)));
}

TEST(TupleBytecode, ATupleResultReturnsOnlyWithRetTuple) {
  Executable exe = make_tuple_executable();
  exe.functions[0].code.back() = make_ins(Opcode::kRet, {reg::kE});
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 0, "the function's result is a tuple; it returns with ret_tuple"));

  exe = make_tuple_executable();
  exe.functions[0].code.push_back(make_ins(Opcode::kKill, {reg::kX}));
  EXPECT_EQ(refusal(exe), code_message(exe, 14, 0, "the function's code does not end with ret_tuple"));
}

TEST(TupleBytecode, RetTupleOnlyInATupleFunction) {
  Executable exe = make_add_mul_executable();
  exe.functions[0].code.back() = make_ins(Opcode::kRetTuple, {}, {reg::kC, reg::kE});
  EXPECT_EQ(refusal(exe), code_message(exe, 13, 1, "the function's result is not a tuple; it returns with ret"));

  std::vector<uint8_t> file = write_bytecode(exe);  // version 1.4, for its ret_tuple
  EXPECT_EQ(get_le<uint16_t>(file, HeaderField::kMinor), 4);
  put_le<uint16_t>(file, HeaderField::kMinor, 3);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 13 "
                                       "(ret_tuple): ret_tuple needs version 1.4; the file declares 1.3",
                                       code_byte(file, exe, 0, 13, 0)));
}

// Flipped bits in the function table and the code, checksums recomputed: each file
// is refused, or valid and written back byte for byte.
TEST(TupleBytecode, EveryBitFlipOfTheFunctionsAndCodeIsValidatedNotCrashed) {
  const std::vector<uint8_t> file = write_bytecode(make_tuple_executable());
  size_t refused = 0;
  for (SectionKind kind : {SectionKind::kFunctions, SectionKind::kCode}) {
    const SectionLocation section = find_section(file, kind);
    for (uint64_t byte = section.offset; byte < section.offset + section.size; ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<uint8_t> flipped = file;
        flipped[byte] ^= static_cast<uint8_t>(1u << bit);
        reseal(flipped);
        Expected<Executable> result = read_bytecode(flipped);
        if (!result) {
          ++refused;
          EXPECT_EQ(result.error().kind(), ErrorKind::kInvalidInput);
          continue;
        }
        EXPECT_EQ(write_bytecode(*result), flipped) << "byte " << byte << " bit " << bit;
      }
    }
  }
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace stowage
