#include "stowage/ir/kernel_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace stowage::ir {
namespace {

KernelSourceUnit make_unit(std::string name, std::string source, SourceLoc loc = {}) {
  KernelSourceUnit unit;
  unit.name = std::move(name);
  unit.source = std::move(source);
  unit.loc = loc;
  return unit;
}

KernelParam param(std::string name, KernelParamKind kind, DType dtype = DType::kUInt8, bool is_const = false,
                  uint8_t lanes = 1) {
  KernelParam p;
  p.name = std::move(name);
  p.kind = kind;
  p.dtype = dtype;
  p.is_const = is_const;
  p.lanes = lanes;
  return p;
}

KernelParam global(std::string name, DType dtype, bool is_const = false, uint8_t lanes = 1) {
  return param(std::move(name), KernelParamKind::kGlobalBuffer, dtype, is_const, lanes);
}

KernelParam scalar(std::string name, DType dtype, uint8_t lanes = 1) {
  return param(std::move(name), KernelParamKind::kScalar, dtype, false, lanes);
}

// The signatures of a unit that must read cleanly.
std::vector<KernelSignature> read_ok(const std::string& source, uint32_t unit_index = 0) {
  Expected<std::vector<KernelSignature>> result = read_kernel_signatures(make_unit("u", source), unit_index);
  if (!result) ADD_FAILURE() << result.error().message();
  return result ? result.take() : std::vector<KernelSignature>{};
}

// The message of a unit that must fail.
std::string read_error(const KernelSourceUnit& unit) {
  Expected<std::vector<KernelSignature>> result = read_kernel_signatures(unit, 0);
  if (result) {
    ADD_FAILURE() << "unit '" << unit.name << "' read without error";
    return "";
  }
  EXPECT_EQ(result.error().kind(), ErrorKind::kInvalidInput);
  return result.error().message();
}

std::string read_error(const std::string& source) { return read_error(make_unit("u", source)); }

// The kernel source of the example: the text between its triple quotes.
std::string example_kernel_source() {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/examples/add_mul.stir");
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  size_t open = all.find("\"\"\"");
  size_t close = all.find("\"\"\"", open + 3);
  EXPECT_NE(open, std::string::npos);
  EXPECT_NE(close, std::string::npos);
  if (open == std::string::npos || close == std::string::npos) return "";
  return all.substr(open + 3, close - open - 3);
}

TEST(KernelReader, ReadsTheExampleKernels) {
  Expected<std::vector<KernelSignature>> result =
      read_kernel_signatures(make_unit("vtcm_ops", example_kernel_source()), 3);
  ASSERT_TRUE(result) << result.error().message();
  std::vector<KernelParam> params = {global("a", DType::kInt32, true), global("b", DType::kInt32, true),
                                     global("c", DType::kInt32, false)};
  std::vector<KernelSignature> expected = {{"compute_add_in_vtcm", 3, params},
                                           {"compute_mul_in_vtcm", 3, params}};
  EXPECT_EQ(*result, expected);
  EXPECT_TRUE((*result)[0].params[2].writes());
  EXPECT_FALSE((*result)[0].params[0].writes());
}

TEST(KernelReader, MapsEveryElementType) {
  std::vector<KernelSignature> sigs = read_ok(
      "__kernel void k(__global char* a, __global uchar* b, __global short* c, __global ushort* d,\n"
      "                __global int* e, __global uint* f, __global long* g, __global ulong* h,\n"
      "                __global half* i, __global float* j, __global double* l,\n"
      "                __global signed char* m, __global unsigned int* n) {}\n");
  ASSERT_EQ(sigs.size(), 1u);
  std::vector<KernelParam> expected = {
      global("a", DType::kInt8),    global("b", DType::kUInt8),   global("c", DType::kInt16),
      global("d", DType::kUInt16),  global("e", DType::kInt32),   global("f", DType::kUInt32),
      global("g", DType::kInt64),   global("h", DType::kUInt64),  global("i", DType::kFloat16),
      global("j", DType::kFloat32), global("l", DType::kFloat64), global("m", DType::kInt8),
      global("n", DType::kUInt32)};
  EXPECT_EQ(sigs[0].params, expected);
}

TEST(KernelReader, ReadsEveryParameterKind) {
  std::vector<KernelSignature> sigs = read_ok(
      "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
      "__kernel void k(__global const float* in, __global float* out, __constant int* table,\n"
      "                __local short* scratch, read_only image2d_t src, write_only image2d_t dst,\n"
      "                image2d_t plain, float alpha, uint n, half h, char c) {}\n");
  ASSERT_EQ(sigs.size(), 1u);
  std::vector<KernelParam> expected = {global("in", DType::kFloat32, true),
                                       global("out", DType::kFloat32, false),
                                       param("table", KernelParamKind::kConstantBuffer, DType::kInt32, true),
                                       param("scratch", KernelParamKind::kLocal, DType::kInt16),
                                       param("src", KernelParamKind::kImage2dRead),
                                       param("dst", KernelParamKind::kImage2dWrite),
                                       param("plain", KernelParamKind::kImage2dRead),
                                       scalar("alpha", DType::kFloat32),
                                       scalar("n", DType::kUInt32),
                                       scalar("h", DType::kFloat16),
                                       scalar("c", DType::kInt8)};
  EXPECT_EQ(sigs[0].params, expected);
  EXPECT_EQ(sigs[0].name, "k");
  EXPECT_TRUE(sigs[0].params[2].is_buffer());
  EXPECT_FALSE(sigs[0].params[2].writes());
  EXPECT_TRUE(sigs[0].params[5].writes());
}

// A stowage_image_offset directly after an image is that image's offset: an int2
// the runtime sets. Another int2, or the typedef's int2 written out, stays a scalar.
TEST(KernelReader, ReadsImageOffsetsAfterImages) {
  std::vector<KernelSignature> sigs = read_ok(
      "#include <stowage/image_offset.cl.h>\n"
      "__kernel void k(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,\n"
      "                const stowage_image_offset y_off, read_only image2d_t z, int2 v) {}\n");
  ASSERT_EQ(sigs.size(), 1u);
  std::vector<KernelParam> expected = {param("x", KernelParamKind::kImage2dRead),
                                       param("x_off", KernelParamKind::kImageOffset, DType::kInt32, false, 2),
                                       param("y", KernelParamKind::kImage2dWrite),
                                       param("y_off", KernelParamKind::kImageOffset, DType::kInt32, false, 2),
                                       param("z", KernelParamKind::kImage2dRead),
                                       scalar("v", DType::kInt32, 2)};
  EXPECT_EQ(sigs[0].params, expected);
  EXPECT_EQ(listed_param_count(sigs[0]), 4u);
  EXPECT_TRUE(has_image_offset(sigs[0], 0));
  EXPECT_TRUE(has_image_offset(sigs[0], 2));
  EXPECT_FALSE(has_image_offset(sigs[0], 4));
  EXPECT_FALSE(sigs[0].params[1].writes());
}

TEST(KernelReader, ImageOffsetOnlyDirectlyAfterAnImage) {
  EXPECT_EQ(read_error("#include <stowage/image_offset.cl.h>\n"
                       "__kernel void k(__global float* a,\n"
                       "                stowage_image_offset a_off) {}\n"),
            "kernel unit 'u' 3:38: error: kernel 'k' parameter 1 'a_off': a stowage_image_offset must directly "
            "follow the image2d_t parameter whose offset it is");
  EXPECT_EQ(read_error("#include <stowage/image_offset.cl.h>\n"
                       "__kernel void k(stowage_image_offset o, read_only image2d_t x) {}\n"),
            "kernel unit 'u' 2:38: error: kernel 'k' parameter 0 'o': a stowage_image_offset must directly follow "
            "the image2d_t parameter whose offset it is");
  EXPECT_EQ(read_error("#include <stowage/image_offset.cl.h>\n"
                       "__kernel void k(read_only image2d_t x, stowage_image_offset a, stowage_image_offset b) {}\n"),
            "kernel unit 'u' 2:85: error: kernel 'k' parameter 2 'b': a stowage_image_offset must directly follow "
            "the image2d_t parameter whose offset it is");
}

TEST(KernelReader, ImageOffsetOfAnotherTypeIsRefused) {
  EXPECT_EQ(read_error("typedef float2 stowage_image_offset;\n"
                       "__kernel void k(read_only image2d_t x, stowage_image_offset o) {}\n"),
            "kernel unit 'u' 2:61: error: kernel 'k' parameter 1 'o': type 'stowage_image_offset' is not supported "
            "(stowage_image_offset must be int2)");
}

TEST(KernelReader, ConstnessOfThePointeeOnly) {
  // A const pointer to writable data still writes; a pointer to const data does not.
  std::vector<KernelSignature> sigs = read_ok(
      "__kernel void k(__global int* const a, const __global int* b, __global const int* const c,\n"
      "                __global volatile int* d) {}\n");
  ASSERT_EQ(sigs.size(), 1u);
  std::vector<KernelParam> expected = {global("a", DType::kInt32, false), global("b", DType::kInt32, true),
                                       global("c", DType::kInt32, true), global("d", DType::kInt32, false)};
  EXPECT_EQ(sigs[0].params, expected);
}

TEST(KernelReader, VectorsRecordLanes) {
  std::vector<KernelSignature> sigs = read_ok(
      "__kernel void k(__global float4* a, __global const int2* b, __constant uchar16* c,\n"
      "                __local half8* d, float3 v, ulong2 w) {}\n");
  ASSERT_EQ(sigs.size(), 1u);
  std::vector<KernelParam> expected = {global("a", DType::kFloat32, false, 4), global("b", DType::kInt32, true, 2),
                                       param("c", KernelParamKind::kConstantBuffer, DType::kUInt8, true, 16),
                                       param("d", KernelParamKind::kLocal, DType::kFloat16, false, 8),
                                       scalar("v", DType::kFloat32, 3), scalar("w", DType::kUInt64, 2)};
  EXPECT_EQ(sigs[0].params, expected);
}

TEST(KernelReader, ResolvesTypedefs) {
  std::vector<KernelSignature> sigs = read_ok(
      "typedef float real;\n"
      "typedef float4 real4;\n"
      "typedef __global const real* input_ptr;\n"
      "typedef image2d_t picture;\n"
      "typedef uint count_t;\n"
      "__kernel void k(input_ptr a, __global real4* b, read_only picture p, count_t n) {}\n");
  ASSERT_EQ(sigs.size(), 1u);
  std::vector<KernelParam> expected = {global("a", DType::kFloat32, true), global("b", DType::kFloat32, false, 4),
                                       param("p", KernelParamKind::kImage2dRead), scalar("n", DType::kUInt32)};
  EXPECT_EQ(sigs[0].params, expected);
}

TEST(KernelReader, ListsOnlyKernelsInSourceOrder) {
  std::vector<KernelSignature> sigs = read_ok(
      "#define ENTRY __kernel\n"
      "int helper(int x) { return x + 1; }\n"
      "kernel void second(__global int* a) { a[0] = helper(a[0]); }\n"
      "static float scale(float x) { return 2.0f * x; }\n"
      "ENTRY void first(__global float* a) { a[0] = scale(a[0]); }\n"
      "void __kernel third() {}\n",
      7);
  ASSERT_EQ(sigs.size(), 3u);
  EXPECT_EQ(sigs[0].name, "second");
  EXPECT_EQ(sigs[1].name, "first");
  EXPECT_EQ(sigs[2].name, "third");
  EXPECT_TRUE(sigs[2].params.empty());
  for (const auto& sig : sigs) EXPECT_EQ(sig.unit, 7u);
}

TEST(KernelReader, PrototypeThenDefinitionCountsOnce) {
  std::vector<KernelSignature> sigs = read_ok(
      "kernel void k(__global int* a);\n"
      "kernel void k(__global int* a) { a[0] = 1; }\n");
  ASSERT_EQ(sigs.size(), 1u);
  EXPECT_EQ(sigs[0].params, std::vector<KernelParam>{global("a", DType::kInt32)});
}

TEST(KernelReader, UnitWithoutKernelsIsEmpty) {
  EXPECT_TRUE(read_ok("int helper(int x) { return x; }\n").empty());
  EXPECT_TRUE(read_ok("").empty());
}

TEST(KernelReader, WarningsAreIgnored) {
  std::vector<KernelSignature> sigs = read_ok("kernel void k(__global int* a) { int unused = 1.5; a[0] = 2; }\n");
  EXPECT_EQ(sigs.size(), 1u);
}

TEST(KernelReader, UsesTheDefaultHeaderBuiltins) {
  std::vector<KernelSignature> sigs = read_ok(
      "__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_FILTER_NEAREST;\n"
      "kernel void k(__global float4* a, read_only image2d_t img) {\n"
      "  size_t i = get_global_id(0);\n"
      "  a[i] = read_imagef(img, smp, (int2)(i, 0)) + (float4)(dot(a[i], a[i]));\n"
      "  barrier(CLK_GLOBAL_MEM_FENCE);\n"
      "}\n");
  EXPECT_EQ(sigs.size(), 1u);
}

TEST(KernelReader, SourceErrorHasTheUnitPosition) {
  EXPECT_EQ(read_error(make_unit("vtcm_ops", "kernel void k(__global int* a) {\n  a[0] = q;\n}\n")),
            "kernel unit 'vtcm_ops' 2:10: error: use of undeclared identifier 'q'");
}

TEST(KernelReader, SourceErrorHasTheTextPosition) {
  // The unit's source starts at 5:21 of the text form, right after its opening
  // quotes; its line 1 is the rest of that text line.
  EXPECT_EQ(read_error(make_unit("vtcm_ops", "\nkernel void k(__global int* a) {\n  a[0] = q;\n}\n", {5, 21})),
            "7:10: error: in kernel unit 'vtcm_ops' (3:10): use of undeclared identifier 'q'");
  EXPECT_EQ(read_error(make_unit("ops", "kernel void k() { q; }", {2, 10})),
            "2:28: error: in kernel unit 'ops' (1:19): use of undeclared identifier 'q'");
}

TEST(KernelReader, OnlyTheFirstErrorIsReported) {
  EXPECT_EQ(read_error("kernel void k() {\n  p;\n  q;\n}\n"),
            "kernel unit 'u' 2:3: error: use of undeclared identifier 'p'");
}

TEST(KernelReader, SyntaxError) {
  EXPECT_EQ(read_error("kernel void k(__global int* a) {\n  a[0] = 1\n}\n"),
            "kernel unit 'u' 2:11: error: expected ';' after expression");
}

// Only the shipped headers may be included: any other file would be read on the
// machine that runs the bytecode. The check runs before libclang reads anything.
constexpr const char* kOnlyShippedHeaders =
    "is not allowed: a kernel may include only the headers Stowage ships, each as '#include <stowage/NAME>' on a "
    "line of its own (<stowage/discontiguous.cl.h>, <stowage/dtype.cl.h>, <stowage/epilogue.cl.h>, "
    "<stowage/grid6.cl.h>, <stowage/image.cl.h>, <stowage/image_offset.cl.h>, <stowage/pooling.cl.h>, "
    "<stowage/slices.cl.h>)";

TEST(KernelReader, HostHeadersAreRefused) {
  EXPECT_EQ(read_error("#include <stdio.h>\nkernel void k() {}\n"),
            std::string("kernel unit 'u' 1:1: error: '#include' ") + kOnlyShippedHeaders);
}

TEST(KernelReader, EveryWayOfNamingAFileIsRefusedAtItsLineAndColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"kernel void k() {}\n  #  include \"/etc/passwd\"\n", "2:3: error: '#include' "},
      {"#include_next <x.h>\n", "1:1: error: '#include_next' "},
      {"\n\n%:include \"x.h\"\n", "3:1: error: '#include' "},
      {"#inc\\\nlude <stowage/discontiguous.cl.h>\n", "1:1: error: '#include' "},
      {"#include <stowage/missing.cl.h>\n", "1:1: error: '#include' "},
      {"#if __has_include(</etc/passwd>)\n#endif\n", "1:5: error: '__has_include' "},
      {"_Pragma(\"GCC dependency \\\"/etc/passwd\\\"\")\n", "1:1: error: '_Pragma' "},
  };
  for (const auto& [source, where] : cases) {
    EXPECT_EQ(read_error(source), std::string("kernel unit 'u' ") + where + kOnlyShippedHeaders) << source;
  }
}

TEST(KernelReader, TheShippedHeaderIsAllowed) {
  auto signatures = read_kernel_signatures(
      make_unit("u", "#include <stowage/discontiguous.cl.h>\n"
                     "kernel void k(STOWAGE_DISCONTIGUOUS(float, t)) { *STOWAGE_AT2(float, t, 0, 0) = 1.0f; }\n"),
      0);
  ASSERT_TRUE(signatures) << signatures.error().message();
  ASSERT_EQ(signatures->size(), 1u);
  EXPECT_EQ((*signatures)[0].params.size(), 3u);
}

TEST(KernelReader, ReadWriteImagesNeedOpenCl20) {
  std::string message = read_error("kernel void k(read_write image2d_t img) {}\n");
  EXPECT_EQ(message.rfind("kernel unit 'u' 1:", 0), 0u) << message;
  EXPECT_NE(message.find("read_write"), std::string::npos) << message;
}

TEST(KernelReader, ClangRejectsWhatOpenClForbids) {
  // bool by value, private pointers and size_t are errors in OpenCL C itself.
  EXPECT_EQ(read_error("kernel void k(bool b) {}\n"),
            "kernel unit 'u' 1:20: error: '__private bool' cannot be used as the type of a kernel parameter");
  EXPECT_EQ(read_error("kernel void k(int* p) {}\n"),
            "kernel unit 'u' 1:20: error: pointer arguments to kernel functions must reside in '__global', "
            "'__constant' or '__local' address space");
}

TEST(KernelReader, UnsupportedParameters) {
  EXPECT_EQ(read_error("kernel void k(__global int* a, int n, sampler_t p) {}\n"),
            "kernel unit 'u' 1:49: error: kernel 'k' parameter 2 'p': type 'sampler_t' is not supported");
  EXPECT_EQ(read_error("struct S { int a; };\nkernel void k(struct S s) {}\n"),
            "kernel unit 'u' 2:24: error: kernel 'k' parameter 0 's': type 'struct S' is not supported");
  EXPECT_EQ(read_error("kernel void k(read_only image3d_t v) {}\n"),
            "kernel unit 'u' 1:35: error: kernel 'k' parameter 0 'v': type '__read_only image3d_t' is not "
            "supported");
  EXPECT_EQ(read_error("kernel void k(__global bool* b) {}\n"),
            "kernel unit 'u' 1:30: error: kernel 'k' parameter 0 'b': type '__global bool *' is not supported");
  EXPECT_EQ(read_error("kernel void k(__global void* b) {}\n"),
            "kernel unit 'u' 1:30: error: kernel 'k' parameter 0 'b': type '__global void *' is not supported");
  EXPECT_EQ(read_error("struct S { int a; };\nkernel void k(__global struct S* s) {}\n"),
            "kernel unit 'u' 2:34: error: kernel 'k' parameter 0 's': type '__global struct S *' is not supported");
  EXPECT_EQ(read_error("typedef int wide __attribute__((ext_vector_type(5)));\nkernel void k(wide w) {}\n"),
            "kernel unit 'u' 2:20: error: kernel 'k' parameter 0 'w': type 'wide' is not supported");
  // Only the implicit address space word is dropped from the spelling.
  EXPECT_EQ(read_error("typedef sampler_t my__private_sampler;\nkernel void k(my__private_sampler s) {}\n"),
            "kernel unit 'u' 2:35: error: kernel 'k' parameter 0 's': type 'my__private_sampler' is not "
            "supported");
}

TEST(KernelReader, UnsupportedParameterInTextForm) {
  EXPECT_EQ(read_error(make_unit("ops", "\nkernel void k(sampler_t s) {}\n", {4, 17})),
            "5:25: error: in kernel unit 'ops' (2:25): kernel 'k' parameter 0 's': type 'sampler_t' is not "
            "supported");
}

TEST(KernelReader, DeclaredButUndefinedKernel) {
  EXPECT_EQ(read_error("kernel void k(__global int* a) {}\nkernel void missing(__global int* a);\n"),
            "kernel unit 'u' 2:13: error: kernel 'missing' is declared but not defined");
}

Module two_unit_module(const std::string& first, const std::string& second) {
  Module module;
  module.units.push_back(make_unit("first", first));
  module.units.push_back(make_unit("second", second));
  return module;
}

TEST(KernelReader, ModuleKernelsFillEveryUnit) {
  Module module = two_unit_module("kernel void a(__global int* x) {}\nkernel void b(float s) {}\n",
                                  "kernel void c(__global const half* y) {}\n");
  ASSERT_TRUE(read_module_kernels(module).is_ok());
  ASSERT_EQ(module.units[0].signatures.size(), 2u);
  ASSERT_EQ(module.units[1].signatures.size(), 1u);
  const KernelSignature* c = module.find_kernel("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->unit, 1u);
  EXPECT_EQ(c->params, std::vector<KernelParam>{global("y", DType::kFloat16, true)});
  EXPECT_EQ(module.find_kernel("b")->unit, 0u);
}

TEST(KernelReader, ModuleKernelNameInTwoUnits) {
  Module module = two_unit_module("kernel void a(__global int* x) {}\n", "kernel void a(__global int* y) {}\n");
  Status status = read_module_kernels(module);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().message(),
            "kernel unit 'second': error: kernel 'a' is already defined in kernel unit 'first'");
  EXPECT_TRUE(module.units[0].signatures.empty());

  // Units read from the text form point at where the second unit starts.
  module.units[0].loc = {1, 15};
  module.units[1].loc = {4, 16};
  status = read_module_kernels(module);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().message(),
            "4:16: error: in kernel unit 'second': kernel 'a' is already defined in kernel unit 'first'");
}

TEST(KernelReader, ModuleErrorNamesTheFailingUnit) {
  Module module = two_unit_module("kernel void a(__global int* x) {}\n", "kernel void b() { oops }\n");
  Status status = read_module_kernels(module);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().message(), "kernel unit 'second' 1:19: error: use of undeclared identifier 'oops'");
  EXPECT_TRUE(module.units[0].signatures.empty());
}

}  // namespace
}  // namespace stowage::ir
