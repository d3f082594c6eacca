// Tensor constants in bytecode files (version 1.2): the round trip, mapped and
// copied reads, and one malformed file per rule with its exact message.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace testing;
using bytecode::SectionKind;

ByteView bytes_view(const std::vector<uint8_t>& bytes) { return ByteView::copy_of(bytes); }

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
  return out;
}

// main(x): loads the three constants and returns x. Storage 0 (global, 2048 bytes)
// holds w [4, 64] int32 at 0 and v [16] float32 at 1024; storage 1 is an image of
// 2x3 float32 pixels holding p [2, 3, 4] float32.
Executable make_weights_executable() {
  Executable exe;
  exe.constants = {shape_constant({4, 64})};
  ConstantStorage buffer;
  buffer.scope = "global";
  buffer.nbytes = 2048;
  buffer.segments = {DataSegment{0, bytes_view(pattern(1024, 1))}, DataSegment{1024, bytes_view(pattern(64, 9))}};
  ConstantStorage image;
  image.scope = "global.texture";
  image.kind = ScopeKind::kImage2d;
  image.pixel_dtype = DType::kFloat32;
  image.image = {2, 3};
  image.nbytes = 96;
  image.segments = {DataSegment{0, bytes_view(pattern(96, 3))}};
  exe.constant_storages = {buffer, image};
  exe.tensor_constants = {TensorConstant{"w", DType::kInt32, {4, 64}, 0, 0},
                          TensorConstant{"v", DType::kFloat32, {16}, 0, 1024},
                          TensorConstant{"p", DType::kFloat32, {2, 3, 4}, 1, 0}};
  Function main;
  main.name = "main";
  main.params = {tensor_value("x", {4, 64}, DType::kInt32)};
  main.result = tensor_value("", {4, 64}, DType::kInt32);
  main.num_registers = 4;
  main.code = {make_ins(Opcode::kLoadTensorConstant, {1, 0}), make_ins(Opcode::kLoadTensorConstant, {2, 1}),
               make_ins(Opcode::kLoadTensorConstant, {3, 2}), make_ins(Opcode::kRet, {0})};
  exe.functions = {main};
  ScopeRequirement global;
  global.scope = "global";
  global.max_storage_bytes = 2048;
  global.offset_alignment = 1024;
  ScopeRequirement texture;
  texture.scope = "global.texture";
  texture.kind = ScopeKind::kImage2d;
  texture.layout = ImageLayout::kActivation;
  texture.offset_alignment = 1;
  texture.max_image_height = 2;
  texture.max_image_width = 3;
  exe.requirements.scopes = {global, texture};
  exe.requirements.features = kFeatureImages;
  exe.minor_version = 2;
  return exe;
}

std::string refusal(const std::vector<uint8_t>& file) {
  auto exe = read_bytecode(file);
  if (exe) return "accepted";
  EXPECT_EQ(exe.error().kind(), ErrorKind::kInvalidInput);
  return exe.error().message();
}

std::string refusal(const Executable& exe) { return refusal(write_bytecode(exe)); }

// Offsets inside the tensor constants section of the file of make_weights_executable.
struct Fields {
  uint64_t section;
  uint64_t storage(size_t i) const { return section + 8 + 46 * i; }  // u64 count, then 46-byte storages ("global")
  // Within storage 0: str "global" (10), kind, pixel, reserved (4), nbytes, height, width, data offset.
  uint64_t storage0_data_offset() const { return storage(0) + 14 + 24; }
};

TEST(ConstantsBytecode, RoundTripsAndDeclaresVersion12) {
  const Executable exe = make_weights_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, bytecode::HeaderField::kMinor), 2);
  auto data = find_section(file, SectionKind::kConstantData);
  EXPECT_EQ(data.offset % 64, 0u);
  EXPECT_EQ(data.size, 2048u + 96u);  // storage 1 starts at 2048, a multiple of 64
  EXPECT_EQ(std::memcmp(file.data() + data.offset + 1024, pattern(64, 9).data(), 64), 0);
  auto back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(back->constant_storages[0].segments.size(), 1u);  // read back as one piece, equal all the same
  EXPECT_EQ(write_bytecode(*back), file);
}

TEST(ConstantsBytecode, AMappedFileKeepsItsBytesWhereTheyLie) {
  const Executable exe = make_weights_executable();
  std::string path = fmt::format("{}/stowage-constants-{}.stw", std::filesystem::temp_directory_path().string(),
                                 ::getpid());
  ASSERT_TRUE(write_bytecode_file(exe, path));
  auto back = read_bytecode_file(path);
  std::filesystem::remove(path);  // the mapping stays valid
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  // The constant's bytes are in the mapping, 64-byte aligned as the file has them.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(back->constant_storages[0].segments[0].bytes.data()) % 64, 0u);
}

// Writing a new file where a loaded one lies replaces it (a rename): the loaded
// executable keeps the old bytes it mapped, never a file truncated under it (SIGBUS).
TEST(ConstantsBytecode, AFileRewrittenWhileLoadedLeavesTheLoadedExecutableWhole) {
  const Executable exe = make_weights_executable();
  std::string path = fmt::format("{}/stowage-rewritten-{}.stw", std::filesystem::temp_directory_path().string(),
                                 ::getpid());
  ASSERT_TRUE(write_bytecode_file(exe, path));
  auto loaded = read_bytecode_file(path);
  ASSERT_TRUE(loaded) << loaded.error().message();
  ASSERT_TRUE(write_bytecode_file(make_add_mul_executable(), path));  // a smaller file at the same path
  EXPECT_EQ(*loaded, exe);  // reads every constant byte through the mapping
  auto again = read_bytecode_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(*again, make_add_mul_executable());
}

TEST(ConstantsBytecode, StorageRules) {
  Executable exe = make_weights_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  Fields f{find_section(file, SectionKind::kTensorConstants).offset};
  std::string where = fmt::format("bytecode: section 'tensor constants' at byte");

  Executable bad = make_weights_executable();
  bad.constant_storages[0].scope = "shared";
  EXPECT_EQ(refusal(bad),
            fmt::format("{} {}: constant storage 0: scope 'shared' is not listed in the requirements", where,
                        f.storage(0)));

  bad = make_weights_executable();
  bad.constant_storages[1].pixel_dtype = DType::kInt32;
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: constant storage 1: an image storage holds RGBA float32 or float16 "
                                      "pixels, not int32",
                                      where, f.storage(1) + 4 + 14 + 1));

  bad = make_weights_executable();
  bad.constant_storages[1].nbytes = 95;
  std::vector<uint8_t> short_image = write_bytecode(bad);
  uint64_t image_nbytes_at = find_section(short_image, SectionKind::kTensorConstants).offset + 8 + 46 + 22;
  EXPECT_EQ(refusal(short_image), fmt::format("{} {}: constant storage 1: an image of 2x3 float32 pixels holds 96 "
                                              "bytes, not 95",
                                              where, image_nbytes_at));

  bad = make_weights_executable();
  bad.constant_storages[1].image = {3, 3};
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: constant storage 1: image of 3x3 pixels is empty or exceeds the 2x3 of "
                                      "scope 'global.texture'",
                                      where, f.storage(1) + 4 + 14 + 4 + 8));

  // A data offset that is not a multiple of 64, and one outside the section.
  std::vector<uint8_t> patched = file;
  put_le<uint64_t>(patched, f.storage0_data_offset(), 8);
  reseal(patched);
  EXPECT_EQ(refusal(patched),
            fmt::format("{} {}: constant storage 0: data offset 8 is not a multiple of 64", where,
                        f.storage0_data_offset()));
  patched = file;
  put_le<uint64_t>(patched, f.storage0_data_offset(), 1u << 20);
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("{} {}: constant storage 0: data [1048576, +2048) lies outside the "
                                          "2144-byte section 'constant data'",
                                          where, f.storage0_data_offset()));
  // Storage 1's data may not start inside storage 0's.
  patched = file;
  put_le<uint64_t>(patched, f.storage(1) + 4 + 14 + 4 + 24, 1024);
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("{} {}: constant storage 1: its data at 1024 overlaps or precedes constant "
                                          "storage 0's, which ends at 2048",
                                          where, f.storage(1)));
}

TEST(ConstantsBytecode, TensorConstantRules) {
  Executable exe = make_weights_executable();
  std::string where = "bytecode: section 'tensor constants' at byte";
  std::vector<uint8_t> file = write_bytecode(exe);
  // Tensor constants follow the count and the storages (46 and 54 bytes) and their own count:
  // "w" is (4 + 1) + 4 + (4 + 2 x 8) + 4 + 8 = 41 bytes, "v" 33.
  uint64_t first = find_section(file, SectionKind::kTensorConstants).offset + 8 + 46 + 54 + 8;
  uint64_t second = first + 41;

  Executable bad = make_weights_executable();
  bad.tensor_constants[1].offset = 2000;
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: tensor constant 1: constant storage 0: 64 bytes at offset 2000 do "
                                      "not fit in a storage of 2048 bytes",
                                      where, second + 4 + 1 + 4 + 4 + 8 + 4));

  bad = make_weights_executable();
  bad.tensor_constants[1].offset = 512;
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: tensor constant 1: offset 512 is not a multiple of 1024, the "
                                      "alignment of scope 'global'",
                                      where, second + 4 + 1 + 4 + 4 + 8 + 4));

  bad = make_weights_executable();
  bad.tensor_constants[1].offset = 0;
  bad.requirements.scopes[0].offset_alignment = 1;
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: constant 'v' overlaps constant 'w' in constant storage 0", where, second));

  bad = make_weights_executable();
  bad.tensor_constants[1].name = "w";
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: tensor constant 1: name 'w' is used twice", where, second));

  bad = make_weights_executable();
  bad.tensor_constants[1].storage = 7;
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: tensor constant 1: storage 7 out of range (executable has 2 constant "
                                      "storages)",
                                      where, second + 4 + 1 + 4 + 4 + 8));

  bad = make_weights_executable();
  bad.tensor_constants[2].dtype = DType::kFloat16;
  uint64_t third = second + 33;
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: tensor constant 2: a float16 constant in an image of float32 pixels",
                                      where, third + 4 + 1));

  bad = make_weights_executable();
  bad.tensor_constants[2].shape = {3, 3, 4};
  EXPECT_EQ(refusal(bad), fmt::format("{} {}: tensor constant 2: constant in scope 'global.texture' needs an image "
                                      "of height 3 and width 3, but the storage is [2, 3]",
                                      where, third + 4 + 1 + 4));

  bad = make_weights_executable();
  bad.functions[0].code[2].ops[1] = 3;
  std::vector<uint8_t> code_bad = write_bytecode(bad);
  EXPECT_EQ(refusal(code_bad), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 2 "
                                           "(load_tensor_constant): tensor constant 3 out of range (executable has 3 "
                                           "tensor constants)",
                                           code_byte(code_bad, bad, 0, 2, 2)));
}

TEST(ConstantsBytecode, SectionRules) {
  Executable exe = make_weights_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  auto tensors = find_section(file, SectionKind::kTensorConstants);
  auto data = find_section(file, SectionKind::kConstantData);

  // A byte between two storages.
  std::vector<uint8_t> patched;
  Executable gap = make_weights_executable();
  gap.constant_storages[0].nbytes = 1100;  // storage 1 then starts at 1152: 52 bytes of padding
  gap.requirements.scopes[0].max_storage_bytes = 1100;
  patched = write_bytecode(gap);
  auto gap_data = find_section(patched, SectionKind::kConstantData);
  patched[gap_data.offset + 1120] = 0x5a;
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("bytecode: section 'constant data' at byte {}: byte 0x5a outside every "
                                          "constant storage is not zero",
                                          gap_data.offset + 1120));

  // One constant section without the other.
  patched = file;
  put_le<uint32_t>(patched, data.entry + bytecode::SectionEntryField::kKind,
                   static_cast<uint32_t>(SectionKind::kDebug));
  reseal(patched);
  EXPECT_EQ(refusal(patched), fmt::format("bytecode: section table at byte {}: section 'tensor constants' is present "
                                          "without section 'constant data'",
                                          tensors.entry));

  // A file of version 1.1 cannot have them.
  patched = file;
  put_le<uint16_t>(patched, bytecode::HeaderField::kMinor, 1);
  reseal(patched);
  EXPECT_EQ(refusal(patched), "bytecode: header at byte 10: version 1.1 files have no tensor constants; they need 1.2");

  // The data section must start at a multiple of 64.
  patched = file;
  put_le<uint64_t>(patched, data.entry + bytecode::SectionEntryField::kOffset, data.offset - 8);
  reseal(patched);
  std::string refused = refusal(patched);
  EXPECT_EQ(refused, fmt::format("bytecode: section table at byte {}: section 'constant data' at offset {} is not a "
                                 "multiple of 64",
                                 data.entry + bytecode::SectionEntryField::kOffset, data.offset - 8));
}

TEST(ConstantsBytecode, AnImageStorageOfIntegerPixelsIsRefusedInCodeToo) {
  // alloc_storage of an image scope with int32 pixels, as a hand-made file could hold.
  Executable exe = make_weights_executable();
  exe.strings = {"global.texture"};
  exe.constants.push_back(shape_constant({2, 3}));
  exe.functions[0].code.insert(exe.functions[0].code.begin(),
                               make_ins(Opcode::kAllocStorage, {1, 1, 0, static_cast<uint64_t>(DType::kInt32), 0}));
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 0 "
                                       "(alloc_storage): an image storage holds RGBA float32 or float16 pixels, "
                                       "not int32",
                                       code_byte(file, exe, 0, 0, 4)));
}

}  // namespace
}  // namespace stowage
