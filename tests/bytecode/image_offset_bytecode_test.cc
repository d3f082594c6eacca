// Tensors at 2D offsets in image storages (version 1.6): image offset kernel
// parameters, which call_kernel lists no register for, and alloc_tensor's image
// offset. The round trip, and one malformed file per rule with its message.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bytecode_test_util.h"
#include "stowage/bytecode/storage_rules.h"

namespace stowage {
namespace {

using namespace testing;
using bytecode::HeaderField;

std::string refusal(const std::vector<uint8_t>& file) { return testing::refusal_message(file); }
std::string refusal(const Executable& exe) { return refusal(write_bytecode(exe)); }
bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

KernelParam image_param(std::string name, KernelParamKind kind) {
  KernelParam p;
  p.name = std::move(name);
  p.kind = kind;
  return p;
}

KernelParam offset_param(std::string name) {
  KernelParam p;
  p.name = std::move(name);
  p.kind = KernelParamKind::kImageOffset;
  p.dtype = DType::kInt32;
  p.lanes = 2;
  return p;
}

// add_mul whose first kernel reads two images with offsets and writes a third
// without one: its call sites still list three registers.
Executable make_offset_executable() {
  Executable exe = make_add_mul_executable();
  exe.requirements.features = kFeatureImages;
  exe.kernels[0].params = {image_param("a", KernelParamKind::kImage2dRead), offset_param("a_off"),
                           image_param("b", KernelParamKind::kImage2dRead), offset_param("b_off"),
                           image_param("c", KernelParamKind::kImage2dWrite)};
  exe.minor_version = 6;  // as read back
  return exe;
}

TEST(ImageOffsetBytecode, OffsetParametersRoundTripAtVersion16) {
  const Executable exe = make_offset_executable();
  EXPECT_EQ(exe.required_minor_version(), 6);
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, HeaderField::kMinor), 6);
  Expected<Executable> back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(listed_param_count(back->kernels[0]), 3u);
  EXPECT_TRUE(has_image_offset(back->kernels[0], 0));
  EXPECT_FALSE(has_image_offset(back->kernels[0], 4));
}

TEST(ImageOffsetBytecode, OffsetParametersNeedVersion16) {
  std::vector<uint8_t> file = write_bytecode(make_offset_executable());
  put_le<uint16_t>(file, HeaderField::kMinor, 5);
  reseal(file);
  std::string message = refusal(file);
  EXPECT_TRUE(contains(message, "kernel 0 'compute_add_in_vtcm' parameter 1: an image offset parameter needs "
                                "version 1.6; the file declares 1.5"))
      << message;
}

TEST(ImageOffsetBytecode, AnOffsetParameterFollowsAnImage) {
  Executable exe = make_offset_executable();
  std::swap(exe.kernels[0].params[0], exe.kernels[0].params[1]);
  std::string message = refusal(exe);
  EXPECT_TRUE(contains(message, "kernel 0 'compute_add_in_vtcm' parameter 0: an image offset parameter must directly "
                                "follow an image parameter"))
      << message;
  exe = make_offset_executable();
  exe.kernels[0].params[2] = offset_param("again");
  message = refusal(exe);
  EXPECT_TRUE(contains(message, "parameter 2: an image offset parameter must directly follow an image parameter"))
      << message;
}

TEST(ImageOffsetBytecode, AnOffsetParameterIsAnInt2) {
  Executable exe = make_offset_executable();
  exe.kernels[0].params[3].dtype = DType::kFloat32;
  std::string message = refusal(exe);
  EXPECT_TRUE(contains(message, "parameter 3: an image offset parameter is an int2 (int32, 2 lanes, no flags), not "
                                "float32 x2"))
      << message;
  exe = make_offset_executable();
  exe.kernels[0].params[1].lanes = 4;
  message = refusal(exe);
  EXPECT_TRUE(contains(message, "parameter 1: an image offset parameter is an int2 (int32, 2 lanes, no flags), not "
                                "int32 x4"))
      << message;
}

// The list names the images only: a register for an offset parameter is one too many.
TEST(ImageOffsetBytecode, CallKernelListsNoRegisterForOffsets) {
  namespace reg = add_mul_reg;
  Executable exe = make_offset_executable();
  exe.functions[0].code[6].list = {reg::kA, reg::kA, reg::kB, reg::kB, reg::kC};
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 6 "
                                       "(call_kernel): 5 arguments passed, kernel 'compute_add_in_vtcm' takes 3 "
                                       "(image offsets aside)",
                                       code_byte(file, exe, 0, 6, 4)));
}

// add_mul's main with an image storage of 64 x 8 pixels (instruction 13) and a tensor
// of 32 x 4 pixels in it (instruction 14) at `packed`.
Executable make_image_tensor_executable(uint64_t packed) {
  Executable exe = make_add_mul_executable();
  ScopeRequirement texture;
  texture.scope = "global.texture";
  texture.kind = ScopeKind::kImage2d;
  texture.offset_alignment = 1;
  texture.layout = ImageLayout::kActivation;
  texture.max_image_width = 16384;
  texture.max_image_height = 16384;
  exe.requirements.scopes.push_back(texture);
  exe.requirements.features = kFeatureImages;
  exe.strings.push_back("global.texture");
  const uint32_t size = static_cast<uint32_t>(exe.constants.size());
  exe.constants.push_back(shape_constant({64, 8}));
  const uint32_t shape = static_cast<uint32_t>(exe.constants.size());
  exe.constants.push_back(shape_constant({32, 4, 4}));
  Function& fn = exe.functions[0];
  const uint32_t image = fn.num_registers++;
  const uint32_t tensor = fn.num_registers++;
  const uint64_t f32 = static_cast<uint64_t>(DType::kFloat32);
  fn.code.insert(fn.code.end() - 1, {make_ins(Opcode::kAllocStorage, {image, size, 0, f32, 1}),
                                     make_ins(Opcode::kAllocTensor, {tensor, image, packed, shape, f32})});
  exe.minor_version = exe.required_minor_version();
  return exe;
}

// The message for main's instruction `index` at its word `word`.
std::string code_message(const Executable& exe, size_t index, size_t word, std::string_view rest) {
  std::vector<uint8_t> file = write_bytecode(exe);
  return fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction {} ({}): {}",
                     code_byte(file, exe, 0, index, word), index, opcode_info(exe.functions[0].code[index].op).name,
                     rest);
}

TEST(ImageOffsetBytecode, ImageTensorOffsetsPackRowAndColumn) {
  EXPECT_EQ(pack_image_offset(ImageOffset{4, 32}), (uint64_t{32} << 32) | 4);
  EXPECT_EQ(unpack_image_offset((uint64_t{32} << 32) | 4), (ImageOffset{4, 32}));
  const Executable exe = make_image_tensor_executable(pack_image_offset(ImageOffset{4, 32}));
  EXPECT_EQ(exe.minor_version, 6);
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, HeaderField::kMinor), 6);
  Expected<Executable> back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  // At the origin the file needs no newer version than before.
  EXPECT_EQ(make_image_tensor_executable(0).minor_version, 0);
}

TEST(ImageOffsetBytecode, ImageTensorLiesInsideItsStorage) {
  // 32 rows from row 33 pass the storage's 64.
  Executable exe = make_image_tensor_executable(pack_image_offset(ImageOffset{0, 33}));
  EXPECT_EQ(refusal(exe), code_message(exe, 14, 3, "tensor in scope 'global.texture' needs an image of height 32 and "
                                                   "width 4 at [33, 0], but the storage is [64, 8] (instruction 13)"));
  exe = make_image_tensor_executable(pack_image_offset(ImageOffset{5, 0}));
  EXPECT_EQ(refusal(exe), code_message(exe, 14, 3, "tensor in scope 'global.texture' needs an image of height 32 and "
                                                   "width 4 at [0, 5], but the storage is [64, 8] (instruction 13)"));
}

TEST(ImageOffsetBytecode, ImageOffsetHalvesAreBelowTwoToThe31) {
  const uint64_t packed = uint64_t{1} << 31;  // x = 2^31
  Executable exe = make_image_tensor_executable(packed);
  EXPECT_EQ(refusal(exe),
            code_message(exe, 14, 3, fmt::format("tensor in scope 'global.texture': image offset [0, 2147483648] is out "
                                                 "of range: row and column must be below 2^31 (offset {} packs y << 32 "
                                                 "| x)",
                                                 packed)));
}

TEST(ImageOffsetBytecode, ImageTensorOffsetsNeedVersion16) {
  Executable exe = make_image_tensor_executable(pack_image_offset(ImageOffset{4, 0}));
  std::vector<uint8_t> file = write_bytecode(exe);
  put_le<uint16_t>(file, HeaderField::kMinor, 5);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: function 'main' instruction 14 "
                                       "(alloc_tensor): offset 4 in image2d storage of scope 'global.texture': an "
                                       "image offset needs version 1.6; the file declares 1.5",
                                       code_byte(file, exe, 0, 14, 3)));
}

}  // namespace
}  // namespace stowage
