// The verifier's rules on discontiguous tensors, each broken by a small program,
// with the exact message. Kernels are read by the real kernel reader.
#include <gtest/gtest.h>

#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"

namespace stowage::ir {
namespace {

// Lines 1-9 hold the kernels; `fn main` is line 10, so body line i is on line 11 + i.
constexpr const char* kKernels = R"(kernels ops """
#include <stowage/discontiguous.cl.h>
__kernel void fill(STOWAGE_DISCONTIGUOUS(int, d), int v) { *STOWAGE_AT2(int, d, get_global_id(0), 0) = v; }
__kernel void bad_tables(__global const int* t, uint root, __global int* d) {}
__kernel void bad_root(__global const uint* t, int root, __global int* d) {}
__kernel void bad_data(__global const uint* t, uint root, __global float* d) {}
__kernel void plain(__global int* d) {}
"""

)";

std::string verify_body(const std::vector<std::string>& body, const std::string& ret = "x") {
  std::string text = std::string(kKernels) + "fn main(x: Tensor[(4, 64), int32]) -> Tensor[(4, 64), int32] {\n";
  for (const auto& line : body) text += "  " + line + "\n";
  text += "  return " + ret + "\n}\n";
  Expected<Module> m = parse_module(text, "d.stir");
  if (!m) return "parse error: " + m.error().message();
  static const TargetDesc target = TargetDesc::load("opencl").value_or_throw();
  if (Status s = read_module_kernels(*m, target.table_entry_bytes); !s) return "kernel error: " + s.error().message();
  Status s = verify_module(*m, target, "d.stir");
  return s ? "ok" : s.error().message();
}

const std::string kTables = "t = alloc_storage([64], device=0, dtype=uint8, scope=\"global\")";
const std::string kData = "v = alloc_storage([4096], device=0, dtype=uint8, scope=\"global.vtcm\")";
const std::string kA = "a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304, 3072], [4, 64], int32)";

TEST(DiscontiguousVerifier, TheProposalsProgramsAreValid) {
  EXPECT_EQ(verify_body({kTables, kData, kA, "copy_tensor(x, a)",
                         "b = alloc_discontiguous_tensor(t, 16, v, [1536, 1280, 3328, 2560], [4, 64], int32)",
                         "c = alloc_discontiguous_tensor(t, 32, v, [512, 0, 2048, 3840], [4, 64], int32)",
                         "call_kernel(fill, [c, 7], grid=[4])", "kill_object(a)", "copy_tensor(c, x)"}),
            "ok");
  EXPECT_EQ(verify_body({kTables, kData,
                         "d = alloc_discontiguous_tensor(t, [0, 16, 24, 32, 40], v, [224, 0, 96, 32, 192, 64, 160, "
                         "128], [4, 2, 16], int16)"}),
            "ok");
}

TEST(DiscontiguousVerifier, DataOffsetsMustCountTheBlocks) {
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304], [4, 64], int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304], "
            "[4, 64], int32)': shape [4, 64] has 4 blocks of 256 bytes, but 3 data offsets are given");
}

TEST(DiscontiguousVerifier, TableOffsetsMustCountTheTables) {
  EXPECT_EQ(verify_body({kTables, kData, "d = alloc_discontiguous_tensor(t, [0, 16], v, [0, 32, 64, 96, 128, 160, 192, "
                                         "224], [4, 2, 16], int16)"}),
            "d.stir:13:3: error: function 'main', binding 'd = alloc_discontiguous_tensor(t, [0, 16], v, [0, 32, 64, "
            "96, 128, 160, 192, 224], [4, 2, 16], int16)': shape [4, 2, 16] needs 5 tables (2 levels of indirection, "
            "breadth-first), but 2 table offsets are given");
}

TEST(DiscontiguousVerifier, BlocksMustLieInsideTheirStorage) {
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304, 3968], [4, 64], "
                                         "int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304, "
            "3968], [4, 64], int32)': block 3 of tensor 'a' (bytes [3968, 4224)) does not fit in storage 'v' of 4096 "
            "bytes");
}

TEST(DiscontiguousVerifier, TablesMustLieInsideTheirStorage) {
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 56, v, [768, 256, 2304, 3072], [4, 64], "
                                         "int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 56, v, [768, 256, 2304, "
            "3072], [4, 64], int32)': table 0 of tensor 'a' (bytes [56, 72)) does not fit in storage 't' of 64 bytes");
}

TEST(DiscontiguousVerifier, BlocksOfOneTensorMustBeDisjoint) {
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304, 384], [4, 64], "
                                         "int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 0, v, [768, 256, 2304, "
            "384], [4, 64], int32)': block 1 (bytes [256, 512)) and block 3 (bytes [384, 640)) of tensor 'a' overlap "
            "in storage 'v'");
}

TEST(DiscontiguousVerifier, TablesAndBlocksSharingAStorageMustBeDisjoint) {
  EXPECT_EQ(verify_body({kData, "a = alloc_discontiguous_tensor(v, 0, v, [768, 256, 2304, 0], [4, 64], int32)"}),
            "d.stir:12:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(v, 0, v, [768, 256, 2304, "
            "0], [4, 64], int32)': table 0 (bytes [0, 16)) and block 3 (bytes [0, 256)) of tensor 'a' overlap in "
            "storage 'v'");
}

TEST(DiscontiguousVerifier, NoBlockMayOverlapALiveTensor) {
  EXPECT_EQ(verify_body({kTables, kData, "c = alloc_tensor(v, 2048, [4, 64], int32)", kA}),
            "d.stir:14:3: error: function 'main', binding '" + kA +
                "': block 2 of tensor 'a' (bytes [2304, 2560)) overlaps live tensor 'c' (bytes [2048, 3072)) in "
                "storage 'v'");
  EXPECT_EQ(verify_body({kTables, kData, kA, "b = alloc_discontiguous_tensor(t, 16, v, [0, 3072, 512, 1024], [4, 64], "
                                             "int32)"}),
            "d.stir:14:3: error: function 'main', binding 'b = alloc_discontiguous_tensor(t, 16, v, [0, 3072, 512, "
            "1024], [4, 64], int32)': block 1 of tensor 'b' (bytes [3072, 3328)) overlaps live tensor 'a' (bytes "
            "[3072, 3328)) in storage 'v'");
  // Once 'a' is killed its blocks and its table are free again.
  EXPECT_EQ(verify_body({kTables, kData, kA, "kill_object(a)",
                         "b = alloc_discontiguous_tensor(t, 0, v, [0, 3072, 512, 1024], [4, 64], int32)"}),
            "ok");
}

TEST(DiscontiguousVerifier, NoTableMayOverlapALiveTensor) {
  EXPECT_EQ(verify_body({kTables, kData, kA, "b = alloc_discontiguous_tensor(t, 8, v, [0, 512, 1024, 1280], [4, 64], "
                                             "int32)"}),
            "d.stir:14:3: error: function 'main', binding 'b = alloc_discontiguous_tensor(t, 8, v, [0, 512, 1024, "
            "1280], [4, 64], int32)': table 0 of tensor 'b' (bytes [8, 24)) overlaps live tensor 'a' (bytes [0, 16)) "
            "in storage 't'");
}

TEST(DiscontiguousVerifier, OffsetsAreAlignedAndFitATableEntry) {
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 2, v, [768, 256, 2304, 3072], [4, 64], "
                                         "int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 2, v, [768, 256, 2304, "
            "3072], [4, 64], int32)': table 0 of tensor 'a' is at offset 2, not a multiple of 4 (the target's table "
            "entry size)");
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 0, v, [768, 258, 2304, 3072], [4, 64], "
                                         "int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 0, v, [768, 258, 2304, "
            "3072], [4, 64], int32)': block 1 of tensor 'a' is at offset 258, not a multiple of 4 (the size of its "
            "elements)");
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, 0, v, [768, 4294967296, 2304, 3072], [4, "
                                         "64], int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 0, v, [768, 4294967296, "
            "2304, 3072], [4, 64], int32)': block 1 of tensor 'a' is at offset 4294967296, which does not fit a "
            "4-byte table entry");
}

TEST(DiscontiguousVerifier, StoragesAreBuffers) {
  EXPECT_EQ(verify_body({kTables, "img = alloc_storage([64, 64], device=0, dtype=float32, scope=\"global.texture\")",
                         "a = alloc_discontiguous_tensor(t, 0, img, [0, 256, 512, 768], [4, 64], int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, 0, img, [0, 256, 512, "
            "768], [4, 64], int32)': data storage 'img' is in image scope 'global.texture'; discontiguous tensors "
            "need buffer scopes");
}

TEST(DiscontiguousVerifier, RankIsAtLeastTwo) {
  EXPECT_EQ(verify_body({kTables, kData, "a = alloc_discontiguous_tensor(t, [], v, [0], [64], int32)"}),
            "d.stir:13:3: error: function 'main', binding 'a = alloc_discontiguous_tensor(t, [], v, [0], [64], "
            "int32)': a discontiguous tensor has rank 2 or more (its last extent is the block), got shape [64]");
}

TEST(DiscontiguousVerifier, StaysInsideItsFunction) {
  EXPECT_EQ(verify_body({kTables, kData, kA}, "a"),
            "d.stir:14:3: error: function 'main', 'return a': 'a' is a discontiguous tensor, which cannot be "
            "returned; copy_tensor it into a contiguous tensor first");
  std::string text = std::string(kKernels) +
                     "fn id(y: Tensor[(4, 64), int32]) -> Tensor[(4, 64), int32] {\n  return y\n}\n"
                     "fn main(x: Tensor[(4, 64), int32]) -> Tensor[(4, 64), int32] {\n  " +
                     kTables + "\n  " + kData + "\n  " + kA + "\n  r = call(id, [a])\n  return x\n}\n";
  Module m = parse_module(text, "d.stir").value_or_throw();
  ASSERT_TRUE(read_module_kernels(m));
  Status s = verify_module(m, TargetDesc::load("opencl").value_or_throw(), "d.stir");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(),
            "d.stir:17:3: error: function 'main', binding 'r = call(id, [a])': argument 1 ('a') is a discontiguous "
            "tensor, which cannot be passed to a function; copy_tensor it into a contiguous tensor first");
}

TEST(DiscontiguousVerifier, KernelsReceiveTablesRootAndData) {
  std::string prefix = "d.stir:14:3: error: function 'main', binding ";
  EXPECT_EQ(verify_body({kTables, kData, kA, "call_kernel(bad_tables, [a], grid=[4])"}),
            prefix + "'call_kernel(bad_tables, [a], grid=[4])': parameter 't' of kernel 'bad_tables' receives the "
                     "tables of discontiguous tensor 'a', so it must be __global const uint*");
  EXPECT_EQ(verify_body({kTables, kData, kA, "call_kernel(bad_root, [a], grid=[4])"}),
            prefix + "'call_kernel(bad_root, [a], grid=[4])': parameter 'root' of kernel 'bad_root' receives the root "
                     "table offset of discontiguous tensor 'a', so it must be a scalar uint");
  EXPECT_EQ(verify_body({kTables, kData, kA, "call_kernel(bad_data, [a], grid=[4])"}),
            prefix + "'call_kernel(bad_data, [a], grid=[4])': parameter 'd' of kernel 'bad_data' receives the data of "
                     "discontiguous tensor 'a', so it must be a __global int* (or const)");
  EXPECT_EQ(verify_body({kTables, kData, kA, "call_kernel(plain, [a], grid=[4])"}),
            prefix + "'call_kernel(plain, [a], grid=[4])': kernel 'plain' takes 1 parameter, but the arguments fill 3 "
                     "(a discontiguous tensor fills 3: tables, root offset, data)");
}

}  // namespace
}  // namespace stowage::ir

namespace stowage::ir {
namespace {

TEST(DiscontiguousText, PrintsAndParsesBackBothForms) {
  std::string text = std::string(kKernels) +
                     "fn main(x: Tensor[(4, 64), int32]) -> Tensor[(4, 64), int32] {\n  " + kTables + "\n  " + kData +
                     "\n  " + kA +
                     "\n  d = alloc_discontiguous_tensor(t, [16, 32, 40, 48, 56], v, [0, 32, 64, 96, 128, 160, 192, "
                     "224], [4, 2, 16], int16)\n  e = empty_discontiguous([8, 16], float32, scope=\"global.vtcm\", "
                     "table_scope=\"global\")\n  return x\n}\n";
  Module m = parse_module(text, "d.stir").value_or_throw();
  const auto& b = m.functions[0].bindings;
  EXPECT_EQ(b[2].table_offsets, (std::vector<int64_t>{0}));
  EXPECT_EQ(b[3].data_offsets.size(), 8u);
  EXPECT_EQ(b[4].table_scope, "global");
  std::string printed = print_module(m);
  EXPECT_NE(printed.find(kA), std::string::npos) << printed;
  EXPECT_EQ(parse_module(printed, "printed.stir").value_or_throw(), m);
}

}  // namespace
}  // namespace stowage::ir
