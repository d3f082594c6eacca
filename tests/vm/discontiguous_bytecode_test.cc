// alloc_discontiguous_tensor in the bytecode: each validation rule with its exact
// message, and the VM refusing a discontiguous tensor where a kernel wants a buffer.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bytecode/bytecode_test_util.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

using testing::code_byte;
using testing::make_add_mul_executable;
using testing::make_ins;
using testing::shape_constant;
namespace reg = testing::add_mul_reg;
namespace cst = testing::add_mul_const;

// The add_mul example with tensor `a` made discontiguous: its table at byte 0 and
// its four blocks at the top of the same 4096-byte storage.
struct Fixture {
  Executable exe = make_add_mul_executable();
  uint32_t tables = 0, blocks = 0;

  Fixture(std::vector<int64_t> table_offsets = {0}, std::vector<int64_t> data_offsets = {3072, 3328, 3584, 3840},
          uint64_t entry_bytes = 4) {
    exe.constants.push_back(shape_constant(std::move(table_offsets)));
    tables = static_cast<uint32_t>(exe.constants.size() - 1);
    exe.constants.push_back(shape_constant(std::move(data_offsets)));
    blocks = static_cast<uint32_t>(exe.constants.size() - 1);
    exe.functions[0].code[1] =
        make_ins(Opcode::kAllocDiscontiguous, {reg::kA, reg::kVtcm, tables, reg::kVtcm, blocks, cst::kTensorShape,
                                               static_cast<uint64_t>(DType::kInt32), entry_bytes});
  }

  std::string refusal() const {
    Expected<Executable> result = read_bytecode(write_bytecode(exe));
    if (result) return "<accepted>";
    return result.error().message();
  }
  // The message for instruction 1 at its word `word`.
  std::string message(size_t word, std::string_view rest) const {
    return fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 1 "
                       "(alloc_discontiguous_tensor): {}",
                       code_byte(write_bytecode(exe), exe, 0, 1, word), rest);
  }
};

// Words of the instruction: opcode, dst, tables reg, table offsets, data reg, data
// offsets, shape, dtype, entry bytes.
enum Word : size_t { kTableOffsets = 3, kDataOffsets = 5, kShape = 6, kEntryBytes = 8 };

TEST(DiscontiguousBytecode, ValidFileRoundTripsAtVersion1Point1) {
  Fixture f;
  std::vector<uint8_t> file = write_bytecode(f.exe);
  EXPECT_EQ(file[10], 1);
  Expected<Executable> back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->minor_version, 1);
  EXPECT_EQ(write_bytecode(*back), file);
}

TEST(DiscontiguousBytecode, NeedsVersion1Point1) {
  Fixture f;
  std::vector<uint8_t> file = write_bytecode(f.exe);
  testing::put_le<uint16_t>(file, bytecode::HeaderField::kMinor, 0);
  testing::reseal(file);
  Expected<Executable> result = read_bytecode(file);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message(), f.message(0, "the file declares version 1.0; this instruction needs 1.1"));
}

TEST(DiscontiguousBytecode, CountsMatchTheShape) {
  Fixture blocks({0}, {3072, 3328, 3584});
  EXPECT_EQ(blocks.refusal(), blocks.message(kDataOffsets, "3 data offsets, the shape has 4 blocks"));
  Fixture tables({0, 16}, {3072, 3328, 3584, 3840});
  EXPECT_EQ(tables.refusal(), tables.message(kTableOffsets, "2 table offsets, the shape needs 1"));
}

TEST(DiscontiguousBytecode, EntryWidthIsFourOrEight) {
  Fixture f({0}, {3072, 3328, 3584, 3840}, 6);
  EXPECT_EQ(f.refusal(), f.message(kEntryBytes, "table entry size 6 is not 4 or 8"));
}

TEST(DiscontiguousBytecode, OffsetsFitAnEntryAndAreAligned) {
  Fixture wide({0}, {3072, 3328, 3584, int64_t{1} << 32});
  EXPECT_EQ(wide.refusal(), wide.message(kDataOffsets, "block 3 at offset 4294967296 is not a multiple of 4 or does "
                                                       "not fit a 4-byte entry"));
  Fixture odd({2}, {3072, 3328, 3584, 3840});
  EXPECT_EQ(odd.refusal(), odd.message(kTableOffsets, "table 0 at offset 2 is not a multiple of 4 or does not fit a "
                                                      "4-byte entry"));
}

TEST(DiscontiguousBytecode, TablesAndBlocksLieInsideAKnownStorage) {
  Fixture block({0}, {3072, 3328, 3584, 3900});
  EXPECT_EQ(block.refusal(), block.message(kDataOffsets, "block 3: 256 bytes at offset 3900 do not fit in a storage "
                                                         "of 4096 bytes (instruction 0)"));
  Fixture table({4088}, {3072, 3328, 3584, 3840});
  EXPECT_EQ(table.refusal(), table.message(kTableOffsets, "table 0: 16 bytes at offset 4088 do not fit in a storage "
                                                          "of 4096 bytes (instruction 0)"));
}

TEST(DiscontiguousBytecode, ShapeHasRankTwoOrMore) {
  Fixture f({}, {0});
  f.exe.functions[0].code[1].ops[operands::AllocDiscontiguous::kShape] = cst::kGrid;  // [256]
  EXPECT_EQ(f.refusal(), f.message(kShape, "shape of rank 1 is not a discontiguous shape (rank >= 2, size within 64 "
                                           "bits)"));
}

TEST(DiscontiguousVmErrors, KernelWantingABufferGetsOneClearError) {
  Fixture f;
  auto exe = std::make_shared<const Executable>(read_bytecode(write_bytecode(f.exe)).value_or_throw());
  auto machine = vm::VirtualMachine::create(exe).value_or_throw();
  std::vector<int32_t> data(256, 1);
  auto input = vm::Value::from(vm::host_tensor({4, 64}, DType::kInt32, std::as_bytes(std::span(data))));
  std::string message;
  try {
    machine->invoke("main", {input, input, input});
  } catch (const StowageError& e) {
    message = e.what();
  }
  EXPECT_EQ(message,
            "function 'main' instruction 6 (call_kernel): kernel 'compute_add_in_vtcm' argument 0: a discontiguous "
            "tensor fills three consecutive parameters (tables, root offset, data) with the same register");
}

}  // namespace
}  // namespace stowage
