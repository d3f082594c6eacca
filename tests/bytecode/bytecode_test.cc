// Round trips of the bytecode file, the file API and the instruction codec.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include <sys/resource.h>
#include <sys/stat.h>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using testing::make_add_mul_executable;
using testing::make_ins;

TEST(Bytecode, AddMulRoundTrips) {
  Executable exe = make_add_mul_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  Expected<Executable> back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(back->functions[0].code.size(), 14u);
  EXPECT_EQ(back->debug_text, exe.debug_text);
  EXPECT_FALSE(back->debug_text.empty());
  // Writing is deterministic and reading loses nothing.
  EXPECT_EQ(write_bytecode(*back), file);
}

TEST(Bytecode, LayoutFollowsTheFormatHeader) {
  const Executable exe = make_add_mul_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  using namespace bytecode;
  ASSERT_GE(file.size(), kHeaderSize);
  EXPECT_TRUE(std::equal(kMagic.begin(), kMagic.end(), file.begin()));
  EXPECT_EQ(testing::get_le<uint16_t>(file, HeaderField::kMajor), kMajorVersion);
  EXPECT_EQ(testing::get_le<uint16_t>(file, HeaderField::kMinor), 0);  // the lowest minor its code needs
  EXPECT_EQ(testing::get_le<uint64_t>(file, HeaderField::kFileSize), file.size());
  EXPECT_EQ(testing::get_le<uint32_t>(file, HeaderField::kSectionCount), 7u);  // debug text present
  for (uint32_t k = kFirstSectionKind; k <= kLastSectionKind; ++k) {
    auto kind = static_cast<SectionKind>(k);
    // No constants, no memory layout, no memory plan and no origins here.
    if (kind == SectionKind::kTensorConstants || kind == SectionKind::kConstantData ||
        kind == SectionKind::kMemoryLayout || kind == SectionKind::kMemoryPlan || kind == SectionKind::kOrigins)
      continue;
    auto s = testing::find_section(file, kind);
    EXPECT_NE(s.entry, 0u) << section_name(static_cast<SectionKind>(k));
    EXPECT_EQ(s.offset % kSectionAlignment, 0u);
  }
  // The code section holds exactly the encoded words of main.
  uint64_t words = 0;
  for (const Instruction& ins : exe.functions[0].code) words += encoded_words(ins);
  EXPECT_EQ(testing::find_section(file, SectionKind::kCode).size, 4 * words);
}

TEST(Bytecode, EmptyExecutableRoundTripsWithoutDebugSection) {
  Executable exe;
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(testing::get_le<uint32_t>(file, bytecode::HeaderField::kSectionCount), 6u);
  Expected<Executable> back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
}

TEST(Bytecode, ScalarConstantsAndSeveralFunctionsRoundTrip) {
  Executable exe = make_add_mul_executable();
  Constant i;
  i.kind = ConstantKind::kInt;
  i.dtype = DType::kInt32;
  i.int_value = -7;
  Constant f;
  f.kind = ConstantKind::kFloat;
  f.dtype = DType::kFloat16;
  f.float_value = 0.5;
  exe.constants.push_back(i);
  exe.constants.push_back(f);
  Function helper;
  helper.name = "helper";
  helper.params = {testing::tensor_value("t", {4, 64}, DType::kInt32)};
  helper.result.kind = ValueKind::kInt;
  helper.result.dtype = DType::kInt32;
  helper.num_registers = 3;
  helper.code = {make_ins(Opcode::kLoadConst, {1, 3}), make_ins(Opcode::kMove, {2, 1}), make_ins(Opcode::kRet, {2})};
  exe.functions.push_back(helper);
  // main calls helper on x before returning.
  auto& code = exe.functions[0].code;
  exe.functions[0].num_registers += 1;
  code.insert(code.end() - 1, make_ins(Opcode::kCall, {testing::add_mul_reg::kCount, 1}, {0}));
  Expected<Executable> back = read_bytecode(write_bytecode(exe));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
}

class BytecodeFiles : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / fmt::format("stowage_bytecode_test_{}", ::getpid());
    std::filesystem::create_directories(dir);
    dirs_.push_back(dir);
    return (dir / name).string();
  }
  void TearDown() override {
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir);
  }
  std::vector<std::filesystem::path> dirs_;
};

TEST_F(BytecodeFiles, WriteThenReadFile) {
  Executable exe = make_add_mul_executable();
  std::string file = path("add_mul.stw");
  Status written = write_bytecode_file(exe, file);
  ASSERT_TRUE(written) << written.error().message();
  Expected<Executable> back = read_bytecode_file(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
}

TEST_F(BytecodeFiles, MissingFileIsAnIoError) {
  std::string file = path("absent.stw");
  Expected<Executable> back = read_bytecode_file(file);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(back.error().message(), fmt::format("cannot open '{}': No such file or directory", file));
}

TEST_F(BytecodeFiles, DirectoryIsAnIoError) {
  std::string dir = path("a_directory");
  std::filesystem::create_directories(dir);
  Expected<Executable> back = read_bytecode_file(dir);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(back.error().message(), fmt::format("cannot read '{}': it is a directory", dir));
}

TEST_F(BytecodeFiles, MalformedFileIsInvalidInput) {
  std::string file = path("short.stw");
  std::ofstream(file, std::ios::binary) << "\x89STW";
  Expected<Executable> back = read_bytecode_file(file);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(back.error().message(), "bytecode: header at byte 0: file is 4 bytes, shorter than the 64-byte header");
}

TEST_F(BytecodeFiles, InvalidExecutableIsNotWritten) {
  Executable exe = make_add_mul_executable();
  exe.functions[0].code.pop_back();  // no ret
  std::string file = path("bad.stw");
  Status written = write_bytecode_file(exe, file);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(written.error().message().find("does not end with ret"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(BytecodeFiles, UnwritablePathIsAnIoError) {
  std::string file = path("no_such_dir") + "/x.stw";
  Status written = write_bytecode_file(make_add_mul_executable(), file);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().kind(), ErrorKind::kIo);
}

// A write that fails part-way (here the file-size limit; a full disk alike) is an
// error, and the file that was at the path is still there, whole.
TEST_F(BytecodeFiles, AWriteThatFailsPartWayLeavesTheFileThatWasThereWhole) {
  std::string file = path("model.stw");
  ASSERT_TRUE(write_bytecode_file(make_add_mul_executable(), file));
  const auto before = std::filesystem::file_size(file);
  std::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status written = write_bytecode_file(make_add_mul_executable(), file);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(written.error().message(), fmt::format("cannot write bytecode file '{}': File too large", file));
  EXPECT_EQ(std::filesystem::file_size(file), before);
  Expected<Executable> back = read_bytecode_file(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, make_add_mul_executable());
  // No temporary file is left beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(file).parent_path())) {
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

// A bytecode file is readable by others as any new file is (the umask decides), not
// private as the kernel cache's files are.
TEST_F(BytecodeFiles, AWrittenFileHasTheModeTheUmaskGives) {
  std::string file = path("shared.stw");
  const mode_t old_mask = ::umask(027);
  Status written = write_bytecode_file(make_add_mul_executable(), file);
  ::umask(old_mask);
  ASSERT_TRUE(written) << written.error().message();
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// Leaves the example's file in the build tree, where the loader fuzzer takes its
// seed from (docs/bytecode.md, "Fuzzing").
TEST(Bytecode, WritesTheFuzzSeed) {
  auto dir = std::filesystem::path(STOWAGE_BINARY_DIR) / "fuzz_seeds";
  std::filesystem::create_directories(dir);
  std::string file = (dir / "add_mul.stw").string();
  ASSERT_TRUE(write_bytecode_file(make_add_mul_executable(), file));
  Expected<Executable> back = read_bytecode_file(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, make_add_mul_executable());
}

// ---------------------------------------------------------------------------
// Instruction codec
// ---------------------------------------------------------------------------

// An instruction of `op` with distinct operand values that fit their kinds.
Instruction sample_instruction(Opcode op) {
  Instruction ins;
  ins.op = op;
  const OpcodeInfo& info = opcode_info(op);
  size_t slot = 0;
  for (size_t i = 0; i < info.num_operands; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kRegList) {
      ins.list = {3, 1, 4, 1, 5};
      continue;
    }
    if (kind == OperandKind::kU64) {
      ins.ops[slot] = 0x123456789abcdef0ull + slot;
    } else if (kind == OperandKind::kDType) {
      ins.ops[slot] = static_cast<uint64_t>(DType::kFloat16);
    } else {
      ins.ops[slot] = 10 + slot;
    }
    ++slot;
  }
  return ins;
}

TEST(InstructionCodec, EveryOpcodeRoundTrips) {
  for (uint32_t code = 0; code < kOpcodeCount; ++code) {
    Instruction ins = sample_instruction(static_cast<Opcode>(code));
    std::vector<uint32_t> words;
    encode_instruction(ins, words);
    EXPECT_EQ(words.size(), encoded_words(ins));
    EXPECT_EQ(words[0], code);
    words.push_back(0xdeadbeef);  // what follows is not consumed
    Instruction back;
    DecodeFailure failure;
    size_t used = decode_instruction(words, back, failure);
    EXPECT_EQ(used, words.size() - 1) << opcode_info(ins.op).name << ": " << failure.message;
    EXPECT_EQ(back, ins) << opcode_info(ins.op).name;
  }
}

TEST(InstructionCodec, AllocTensorEncoding) {
  Instruction ins = make_ins(Opcode::kAllocTensor, {4, 3, 0x100000400ull, 1, 3});
  std::vector<uint32_t> words;
  encode_instruction(ins, words);
  EXPECT_EQ(words, (std::vector<uint32_t>{1, 4, 3, 0x400, 1, 1, 3}));
}

TEST(InstructionCodec, EveryTruncationIsRefused) {
  for (uint32_t code = 0; code < kOpcodeCount; ++code) {
    Instruction ins = sample_instruction(static_cast<Opcode>(code));
    std::vector<uint32_t> words;
    encode_instruction(ins, words);
    for (size_t n = 0; n < words.size(); ++n) {
      Instruction back;
      DecodeFailure failure;
      EXPECT_EQ(decode_instruction(std::span(words).first(n), back, failure), 0u);
      EXPECT_NE(failure.message.find(n == 0 ? "no instruction word" : "past the end"), std::string::npos)
          << failure.message;
    }
  }
}

TEST(InstructionCodec, RefusesBadWords) {
  Instruction back;
  DecodeFailure failure;
  std::vector<uint32_t> unknown = {kOpcodeCount};
  EXPECT_EQ(decode_instruction(unknown, back, failure), 0u);
  EXPECT_EQ(failure.message, fmt::format("unknown opcode {}", kOpcodeCount));
  EXPECT_FALSE(failure.known_opcode);

  std::vector<uint32_t> reserved = {0x100 | static_cast<uint32_t>(Opcode::kRet), 0};
  EXPECT_EQ(decode_instruction(reserved, back, failure), 0u);
  EXPECT_EQ(failure.message, "reserved bits of the opcode word are set (word 0x00000107)");
  EXPECT_TRUE(failure.known_opcode);

  std::vector<uint32_t> dtype = {static_cast<uint32_t>(Opcode::kAllocTensor), 0, 0, 0, 0, 0, kDTypeCount};
  EXPECT_EQ(decode_instruction(dtype, back, failure), 0u);
  EXPECT_EQ(failure.message, fmt::format("invalid dtype code {}", kDTypeCount));
  EXPECT_EQ(failure.word, 6u);

  std::vector<uint32_t> long_list = {static_cast<uint32_t>(Opcode::kCall), 0, 0, kMaxListLength + 1};
  EXPECT_EQ(decode_instruction(long_list, back, failure), 0u);
  EXPECT_EQ(failure.message,
            fmt::format("list of {} registers exceeds the limit {}", kMaxListLength + 1, kMaxListLength));
  EXPECT_EQ(failure.word, 3u);
}

// docs/bytecode.md lists every opcode as the table of isa.h defines it.
TEST(InstructionCodec, SpecListsEveryOpcodeAsTheTableSays) {
  std::string spec = testing::read_text_file(std::string(STOWAGE_SOURCE_DIR) + "/docs/bytecode.md");
  ASSERT_FALSE(spec.empty());
  for (uint32_t code = 0; code < kOpcodeCount; ++code) {
    const OpcodeInfo& info = opcode_info(static_cast<Opcode>(code));
    std::string operands;
    for (size_t i = 0; i < info.num_operands; ++i) {
      operands += fmt::format("{}{}", i ? ", " : "", operand_kind_name(info.operands[i]));
    }
    std::string row = fmt::format("| {} | `{}` | {} |", code, info.name, operands);
    EXPECT_NE(spec.find(row), std::string::npos) << "missing row: " << row;
  }
}

}  // namespace
}  // namespace stowage
