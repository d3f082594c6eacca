// The scan for preprocessor forms that read files: every spelling Clang accepts
// (checked with `clang -x cl -E` when these cases were written) is found, at the
// right byte; ordinary kernels, comments and strings are left alone.
#include "stowage/bytecode/kernel_source.h"

#include <gtest/gtest.h>

namespace stowage {
namespace {

struct Case {
  std::string source;
  uint64_t offset;
  std::string form;
};

std::string describe(const std::vector<FileAccess>& found) {
  std::string out;
  for (const FileAccess& f : found) out += "[" + std::to_string(f.offset) + " " + f.form + "]";
  return out;
}

TEST(KernelSource, FindsEveryIncludeSpelling) {
  const Case cases[] = {
      {"#include \"/etc/passwd\"\n", 0, "#include"},
      {"kernel void k() {}\n#include </etc/passwd>\n", 19, "#include"},
      {"  #   include \"x.h\"\n", 2, "#include"},
      {"\t#\tinclude_next <x.h>\n", 1, "#include_next"},
      {"#import \"x.h\"\n", 0, "#import"},
      {"#embed \"x.bin\"\n", 0, "#embed"},
      {"%:include \"x.h\"\n", 0, "#include"},
      {"?\?=include \"x.h\"\n", 0, "#include"},
      {"#/* a comment */include \"x.h\"\n", 0, "#include"},
      {"#/* a\ncomment */include \"x.h\"\n", 0, "#include"},
      {"#inc\\\nlude \"x.h\"\n", 0, "#include"},
      {"#inc\\  \r\nlude \"x.h\"\n", 0, "#include"},
      {"#inc?\?/\nlude \"x.h\"\n", 0, "#include"},
      {"\\\n#include \"x.h\"\n", 2, "#include"},
      {"int a; /* a comment\n that ends */ #include \"x.h\"\n", 34, "#include"},
      {"#if __has_include(</etc/passwd>)\n#endif\n", 4, "__has_include"},
      {"#if __has_include_next(<x>)\n#endif\n", 4, "__has_include_next"},
      {"#if __has_embed(\"x\")\n#endif\n", 4, "__has_embed"},
      {"int x = __has_incl\\\nude;\n", 8, "__has_include"},
      {"_Pragma(\"GCC dependency \\\"/etc/passwd\\\"\")\n", 0, "_Pragma"},
      {"#pragma GCC dependency \"/etc/passwd\"\n", 12, "#pragma dependency"},
      {"#define P(a, b) a##b\n#define Q(a, b) P(a, b)\n#if Q(__has_in, clude)(</etc/passwd>)\n#endif\n", 49,
       "## in #if"},
      {"#define P(a, b) a %:%: b\n#elif P(x, y)\n", 31, "## in #if"},
      {"#define P(a, b) a /*\n*/ ## b\n#if P(x, y)\n#endif\n", 33, "## in #if"},
  };
  for (const Case& c : cases) {
    std::vector<FileAccess> found = find_file_accesses(c.source);
    ASSERT_FALSE(found.empty()) << c.source;
    EXPECT_EQ(found[0].offset, c.offset) << c.source << " found " << describe(found);
    EXPECT_EQ(found[0].form, c.form) << c.source << " found " << describe(found);
  }
}

TEST(KernelSource, LeavesOrdinaryKernelsAlone) {
  const std::string sources[] = {
      "kernel void add(global const int* a, global int* b) { b[get_global_id(0)] = a[get_global_id(0)] + 1; }\n",
      "// #include \"x.h\" in a comment\nkernel void k() {}\n",
      "/* #include \"x.h\"\n#include \"y.h\" */\nkernel void k() {}\n",
      "constant char s[] = \"#include <x.h> __has_include _Pragma\";\nconstant char c = '#';\n",
      "#define CAT(a, b) a##b\nkernel void CAT(my, kernel)() {}\n",
      "#if defined(FOO) && BAR > 2\n#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n#endif\n",
      "#define include 1\nint x = include;\n",
      "#pragma unroll\nint dependency = 0;\n",
  };
  for (const std::string& source : sources) {
    EXPECT_EQ(describe(find_file_accesses(source)), "") << source;
  }
}

TEST(KernelSource, ReportsEveryPlaceInOrder) {
  std::string source = "#include \"a\"\nint x;\n#if __has_include(<b>)\n#endif\n_Pragma(\"c\")\n";
  EXPECT_EQ(describe(find_file_accesses(source)), "[0 #include][24 __has_include][50 _Pragma]");
}

TEST(KernelSource, SurvivesUnterminatedForms) {
  for (std::string source : {"/* never closed", "\"never closed", "#", "#define", "#define P(a) a##", "??", "\\",
                             "%:", "#if", "#pragma"}) {
    EXPECT_EQ(describe(find_file_accesses(source)), "") << source;
  }
}

}  // namespace
}  // namespace stowage
