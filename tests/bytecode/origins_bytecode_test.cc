// The origins section (version 1.5): the model nodes behind instructions, the
// round trip, the lookup the VM's profile uses, and one malformed file per rule.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace testing;
using bytecode::SectionKind;

Executable make_traced_executable() {
  Executable exe = make_add_mul_executable();
  const uint32_t last = static_cast<uint32_t>(exe.functions[0].code.size() - 1);
  exe.origins = {FunctionOrigins{"main", {SiteOrigin{1, {{"Add", "add_0"}}},
                                          SiteOrigin{last - 1, {{"Mul", "mul_1"}, {"Relu", ""}}}}}};
  exe.minor_version = 5;
  return exe;
}

// Offsets inside the section: u32 count, str "main" (4 + 4), u32 sites, then the
// first site: u32 pc at 16, u32 node count at 20, str "Add" (4 + 3), str "add_0"
// (4 + 5); the second site's pc at 40.
constexpr uint64_t kFunction = 4, kFirstPc = 16, kFirstNodes = 20, kSecondPc = 40;

std::string refusal(const std::vector<uint8_t>& file) {
  auto exe = read_bytecode(file);
  if (exe) return "accepted";
  EXPECT_EQ(exe.error().kind(), ErrorKind::kInvalidInput);
  return exe.error().message();
}

TEST(OriginsBytecode, RoundTripsAndAreFoundByInstruction) {
  const Executable exe = make_traced_executable();
  std::vector<uint8_t> file = write_bytecode(exe);
  EXPECT_EQ(get_le<uint16_t>(file, bytecode::HeaderField::kMinor), 5);
  auto back = read_bytecode(file);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, exe);
  EXPECT_EQ(write_bytecode(*back), file);
  ASSERT_NE(back->origin_of(0, 1), nullptr);
  EXPECT_EQ(*back->origin_of(0, 1), (std::vector<NodeOrigin>{{"Add", "add_0"}}));
  EXPECT_EQ(back->origin_of(0, 0), nullptr);
  EXPECT_EQ(back->origin_of(7, 1), nullptr);  // no such function
}

TEST(OriginsBytecode, Rules) {
  const uint64_t at = find_section(write_bytecode(make_traced_executable()), SectionKind::kOrigins).offset;
  const std::string where = "bytecode: section 'origins' at byte";
  Executable bad = make_traced_executable();
  bad.origins[0].function = "nope";
  EXPECT_EQ(refusal(write_bytecode(bad)),
            fmt::format("{} {}: origins 0: 'nope' is not a function of the file", where, at + kFunction));
  bad = make_traced_executable();
  bad.origins[0].sites[0].pc = 99;
  const size_t code = bad.functions[0].code.size();
  EXPECT_EQ(refusal(write_bytecode(bad)),
            fmt::format("{} {}: origins of 'main': instruction index 99 is not below {} and above the previous "
                        "site's", where, at + kFirstPc, code));
  bad = make_traced_executable();
  bad.origins[0].sites[1].pc = 1;  // not increasing
  EXPECT_NE(refusal(write_bytecode(bad)).find(fmt::format("at byte {}: origins of 'main': instruction index 1 is "
                                                          "not below", at + kSecondPc)),
            std::string::npos);
  bad = make_traced_executable();
  bad.origins[0].sites[0].nodes.clear();
  EXPECT_NE(refusal(write_bytecode(bad)).find("instruction 1 has no node"), std::string::npos);
  bad = make_traced_executable();
  bad.origins[0].sites[0].nodes[0].op = "";
  EXPECT_NE(refusal(write_bytecode(bad)).find("op name"), std::string::npos);
  bad = make_traced_executable();
  bad.origins.push_back(bad.origins[0]);
  EXPECT_EQ(refusal(write_bytecode(bad)), fmt::format("{} {}: function count 2 exceeds the limit 1", where, at));
}

TEST(OriginsBytecode, CountsAndVersionAreCheckedBeforeUse) {
  const std::vector<uint8_t> file = write_bytecode(make_traced_executable());
  const uint64_t at = find_section(file, SectionKind::kOrigins).offset;
  std::vector<uint8_t> patched = file;
  put_le<uint32_t>(patched, at + kFirstNodes, 0xFFFFFFFFu);
  reseal(patched);
  EXPECT_NE(refusal(patched).find(fmt::format("at byte {}: origins of 'main': node count 4294967295 exceeds the "
                                              "limit", at + kFirstNodes)),
            std::string::npos);
  patched = file;
  put_le<uint16_t>(patched, bytecode::HeaderField::kMinor, 4);
  reseal(patched);
  EXPECT_EQ(refusal(patched), "bytecode: header at byte 10: version 1.4 files have no origins; they need 1.5");
}

}  // namespace
}  // namespace stowage
