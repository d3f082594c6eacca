// Malformed files: every one is refused with one kInvalidInput error naming what
// and where, and none crashes the reader.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bytecode_test_util.h"

namespace stowage {
namespace {

using namespace bytecode;
using testing::find_section;
using testing::get_le;
using testing::put_le;
using testing::reseal;

std::vector<uint8_t> example_file() { return write_bytecode(testing::make_add_mul_executable()); }

// The reader's message for `file`, which it must refuse as invalid input.
std::string refusal(const std::vector<uint8_t>& file) { return testing::refusal_message(file); }

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

TEST(BytecodeCorpus, EmptyFile) {
  EXPECT_EQ(refusal({}), "bytecode: header at byte 0: file is 0 bytes, shorter than the 64-byte header");
}

TEST(BytecodeCorpus, EveryPrefixIsRefused) {
  std::vector<uint8_t> file = example_file();
  for (size_t n = 0; n < file.size(); ++n) {
    std::vector<uint8_t> prefix(file.begin(), file.begin() + n);
    std::string message = refusal(prefix);
    if (n < 8) {
      EXPECT_EQ(message,
                fmt::format("bytecode: header at byte 0: file is {} bytes, shorter than the 64-byte header", n));
    } else if (n < kHeaderSize) {
      EXPECT_EQ(message,
                fmt::format("bytecode: header at byte {}: file is {} bytes, shorter than the 64-byte header", n, n));
    } else {
      EXPECT_EQ(message, fmt::format("bytecode: header at byte 16: file size field says {} bytes, the file has {}",
                                     file.size(), n));
    }
  }
}

TEST(BytecodeCorpus, EverySingleBitFlipIsRefused) {
  const std::vector<uint8_t> file = example_file();
  size_t checksum_refusals = 0;
  for (size_t byte = 0; byte < file.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> flipped = file;
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      std::string message = refusal(flipped);
      ASSERT_TRUE(starts_with(message, "bytecode: ")) << "byte " << byte << " bit " << bit << ": " << message;
      if (message.find("checksum mismatch") != std::string::npos) ++checksum_refusals;
    }
  }
  // Outside the fields checked before the checksums, the checksums catch the flip.
  EXPECT_GT(checksum_refusals, (file.size() - kHeaderSize) * 8);
}

// With the checksums recomputed, a flipped file reaches the validator: it is refused,
// or it is a valid file whose every byte is what the writer would write for it.
TEST(BytecodeCorpus, EverySingleBitFlipWithResealedChecksumsIsValidatedNotCrashed) {
  const std::vector<uint8_t> file = example_file();
  size_t refused = 0;
  size_t accepted = 0;
  for (size_t byte = 0; byte < file.size(); ++byte) {
    if (byte >= HeaderField::kHeaderCrc && byte < HeaderField::kReserved) continue;  // the checksums themselves
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> flipped = file;
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      reseal(flipped);
      Expected<Executable> result = read_bytecode(flipped);
      if (!result) {
        ++refused;
        EXPECT_EQ(result.error().kind(), ErrorKind::kInvalidInput);
        EXPECT_EQ(result.error().message().find("checksum"), std::string::npos) << result.error().message();
        continue;
      }
      ++accepted;
      EXPECT_EQ(write_bytecode(*result), flipped) << "byte " << byte << " bit " << bit;
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(accepted, 0u);  // names, sources and immediates may take any value
}

TEST(BytecodeCorpus, WrongMagic) {
  std::vector<uint8_t> file = example_file();
  file[1] = 'X';
  EXPECT_EQ(refusal(file), "bytecode: header at byte 0: bad magic: not a Stowage bytecode file");
  file = example_file();
  file[0] = 'S';  // the high-bit byte lost by a 7-bit transport
  EXPECT_EQ(refusal(file), "bytecode: header at byte 0: bad magic: not a Stowage bytecode file");
}

TEST(BytecodeCorpus, NewerMajorVersion) {
  std::vector<uint8_t> file = example_file();
  put_le<uint16_t>(file, HeaderField::kMajor, kMajorVersion + 1);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: header at byte 8: major version {} not supported (this runtime reads {})",
                        kMajorVersion + 1, kMajorVersion));
}

TEST(BytecodeCorpus, OlderMajorVersion) {
  std::vector<uint8_t> file = example_file();
  put_le<uint16_t>(file, HeaderField::kMajor, kMajorVersion - 1);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: header at byte 8: major version {} not supported (this runtime reads {})",
                        kMajorVersion - 1, kMajorVersion));
}

TEST(BytecodeCorpus, NewerMinorVersion) {
  std::vector<uint8_t> file = example_file();
  put_le<uint16_t>(file, HeaderField::kMinor, kMinorVersion + 1);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: header at byte 10: version {}.{} is newer than this runtime's {}.{}",
                                       kMajorVersion, kMinorVersion + 1, kMajorVersion, kMinorVersion));
}

TEST(BytecodeCorpus, HeaderSizeField) {
  std::vector<uint8_t> file = example_file();
  put_le<uint32_t>(file, HeaderField::kHeaderSize, 128);
  EXPECT_EQ(refusal(file), "bytecode: header at byte 12: header size 128 (version 1.0 headers are 64 bytes)");
}

TEST(BytecodeCorpus, FileSizeMismatch) {
  std::vector<uint8_t> file = example_file();
  size_t size = file.size();
  file.resize(size + 8, 0);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: header at byte 16: file size field says {} bytes, the file has {}", size, size + 8));
}

TEST(BytecodeCorpus, ChecksumMismatchNamesTheChecksum) {
  std::vector<uint8_t> file = example_file();
  file[kHeaderSize + 3] ^= 0x40;
  std::string message = refusal(file);
  EXPECT_TRUE(starts_with(message, "bytecode: header at byte 48: body checksum mismatch (stored 0x")) << message;

  file = example_file();
  file[HeaderField::kSectionCount] ^= 0x01;
  message = refusal(file);
  EXPECT_TRUE(starts_with(message, "bytecode: header at byte 44: header checksum mismatch (stored 0x")) << message;
}

TEST(BytecodeCorpus, ReservedHeaderBytes) {
  std::vector<uint8_t> file = example_file();
  file[HeaderField::kReserved + 5] = 1;
  reseal(file);
  EXPECT_EQ(refusal(file), "bytecode: header at byte 57: reserved header bytes are not zero");
}

TEST(BytecodeCorpus, UnknownFeatureBit) {
  std::vector<uint8_t> file = example_file();
  put_le<uint64_t>(file, HeaderField::kFeatures, uint64_t{1} << 40);
  reseal(file);
  EXPECT_EQ(refusal(file), "bytecode: header at byte 24: unknown feature bits 0x10000000000 (this runtime knows 0x7)");
}

TEST(BytecodeCorpus, HeaderFeaturesDifferFromRequirements) {
  std::vector<uint8_t> file = example_file();
  put_le<uint64_t>(file, HeaderField::kFeatures, kFeatureFp16);
  reseal(file);
  uint64_t at = find_section(file, SectionKind::kRequirements).offset;
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'requirements' at byte {}: features 0x0 differ from the "
                                       "header's 0x2",
                                       at));
}

TEST(BytecodeCorpus, TooManySections) {
  std::vector<uint8_t> file = example_file();
  put_le<uint32_t>(file, HeaderField::kSectionCount, 1000000);
  reseal(file);
  EXPECT_EQ(refusal(file), "bytecode: header at byte 40: 1000000 sections (a file has at most 12)");
}

TEST(BytecodeCorpus, SectionTableOutsideTheFile) {
  std::vector<uint8_t> file = example_file();
  put_le<uint64_t>(file, HeaderField::kSectionTableOffset, ~uint64_t{7});  // 8-aligned, wraps with its size
  reseal(file);
  EXPECT_TRUE(starts_with(refusal(file),
                          "bytecode: header at byte 32: section table at offset 18446744073709551608 "
                          "(7 entries) must be 8-aligned"));
}

TEST(BytecodeCorpus, SectionOffsetPastTheEnd) {
  std::vector<uint8_t> file = example_file();
  auto code = find_section(file, SectionKind::kCode);
  uint64_t past = (file.size() + 64) & ~uint64_t{7};
  put_le<uint64_t>(file, code.entry + SectionEntryField::kOffset, past);
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: section table at byte {}: entry 4: section 'code' (offset {}, size {}) "
                        "lies outside the {}-byte file",
                        code.entry + 8, past, code.size, file.size()));
}

TEST(BytecodeCorpus, SectionOffsetPlusSizeWraps) {
  std::vector<uint8_t> file = example_file();
  auto strings = find_section(file, SectionKind::kStrings);
  uint64_t size = ~uint64_t{0} - strings.offset + 9;  // offset + size == 8 (mod 2^64)
  put_le<uint64_t>(file, strings.entry + SectionEntryField::kSize, size);
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: section table at byte {}: entry 0: section 'strings' (offset {}, size {}) "
                        "lies outside the {}-byte file",
                        strings.entry + 8, strings.offset, size, file.size()));
}

TEST(BytecodeCorpus, SectionsOverlap) {
  std::vector<uint8_t> file = example_file();
  auto strings = find_section(file, SectionKind::kStrings);
  auto constants = find_section(file, SectionKind::kConstants);
  put_le<uint64_t>(file, constants.entry + SectionEntryField::kOffset, strings.offset);
  reseal(file);
  std::string message = refusal(file);
  EXPECT_TRUE(message.find("overlaps section 'strings'") != std::string::npos ||
              message.find("overlaps section 'constants'") != std::string::npos)
      << message;
  EXPECT_TRUE(starts_with(message, "bytecode: section table at byte ")) << message;
}

TEST(BytecodeCorpus, SectionOverlapsTheHeader) {
  std::vector<uint8_t> file = example_file();
  auto strings = find_section(file, SectionKind::kStrings);
  put_le<uint64_t>(file, strings.entry + SectionEntryField::kOffset, 8);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section table at byte {}: section 'strings' [8, {}) overlaps the "
                                       "header [0, 64)",
                                       strings.entry + 8, 8 + strings.size));
}

TEST(BytecodeCorpus, MisalignedSection) {
  std::vector<uint8_t> file = example_file();
  auto code = find_section(file, SectionKind::kCode);
  put_le<uint64_t>(file, code.entry + SectionEntryField::kOffset, code.offset + 4);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section table at byte {}: entry 4: section 'code' offset {} is not "
                                       "a multiple of 8",
                                       code.entry + 8, code.offset + 4));
}

TEST(BytecodeCorpus, UnknownDuplicateAndMissingSections) {
  std::vector<uint8_t> file = example_file();
  auto debug = find_section(file, SectionKind::kDebug);
  put_le<uint32_t>(file, debug.entry, 99);
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: section table at byte {}: entry 6: unknown section kind 99", debug.entry));

  put_le<uint32_t>(file, debug.entry, static_cast<uint32_t>(SectionKind::kCode));
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: section table at byte {}: entry 6: section 'code' appears twice", debug.entry));

  // Drop the last entry (debug) and make code's entry the debug one: code is missing.
  file = example_file();
  auto code = find_section(file, SectionKind::kCode);
  put_le<uint32_t>(file, code.entry, static_cast<uint32_t>(SectionKind::kDebug));
  put_le<uint32_t>(file, HeaderField::kSectionCount, 6);
  std::fill(file.begin() + debug.offset, file.end(), 0);
  reseal(file);
  EXPECT_EQ(refusal(file), "bytecode: section table at byte 64: required section 'code' is missing");
}

TEST(BytecodeCorpus, SectionFlags) {
  std::vector<uint8_t> file = example_file();
  auto kernels = find_section(file, SectionKind::kKernels);
  put_le<uint32_t>(file, kernels.entry + SectionEntryField::kFlags, 2);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section table at byte {}: entry 2: reserved flags 0x2 of section "
                                       "'kernels' are not zero",
                                       kernels.entry + 4));
}

TEST(BytecodeCorpus, NonZeroPadding) {
  std::vector<uint8_t> file = example_file();
  file.resize(file.size() + 8, 0);
  file.back() = 0xAB;
  put_le<uint64_t>(file, HeaderField::kFileSize, file.size());
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: padding at byte {}: byte 0xab outside every section is not zero", file.size() - 1));
}

TEST(BytecodeCorpus, HugeStringCountRefusedBeforeAllocation) {
  std::vector<uint8_t> file = example_file();
  auto strings = find_section(file, SectionKind::kStrings);
  put_le<uint64_t>(file, strings.offset, uint64_t{1} << 40);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'strings' at byte {}: string count 1099511627776 exceeds the "
                                       "limit {}",
                                       strings.offset, kMaxStrings));
  // Under the limit but more than the section could hold.
  put_le<uint64_t>(file, strings.offset, kMaxStrings);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'strings' at byte {}: string count {} cannot fit in the {} "
                                       "bytes left in the section",
                                       strings.offset, kMaxStrings, strings.size - 8));
}

TEST(BytecodeCorpus, HugeConstantCountRefusedBeforeAllocation) {
  std::vector<uint8_t> file = example_file();
  auto constants = find_section(file, SectionKind::kConstants);
  put_le<uint64_t>(file, constants.offset, uint64_t{1} << 40);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'constants' at byte {}: constant count 1099511627776 exceeds "
                                       "the limit {}",
                                       constants.offset, kMaxConstants));
}

TEST(BytecodeCorpus, HugeCountsOfEveryTable) {
  struct Case {
    SectionKind kind;
    uint64_t offset_in_section;
    std::string what;
  };
  std::vector<uint8_t> base = example_file();
  for (const Case& c :
       {Case{SectionKind::kKernels, 0, "kernel unit count"}, Case{SectionKind::kFunctions, 0, "function count"},
        Case{SectionKind::kRequirements, 8, "scope count"}}) {
    std::vector<uint8_t> file = base;
    uint64_t at = find_section(file, c.kind).offset + c.offset_in_section;
    put_le<uint64_t>(file, at, ~uint64_t{0});
    reseal(file);
    std::string message = refusal(file);
    EXPECT_NE(message.find(fmt::format("at byte {}: {} 18446744073709551615 exceeds the limit", at, c.what)),
              std::string::npos)
        << message;
  }
}

TEST(BytecodeCorpus, StringLengthPastTheSection) {
  std::vector<uint8_t> file = example_file();
  auto strings = find_section(file, SectionKind::kStrings);
  put_le<uint32_t>(file, strings.offset + 8, 1000);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'strings' at byte {}: string 0: truncated: string needs 1000 "
                                       "bytes, {} left in the section",
                                       strings.offset + 12, strings.size - 12));
  put_le<uint32_t>(file, strings.offset + 8, kMaxStringLength + 1);
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'strings' at byte {}: string 0: string of {} bytes exceeds "
                                       "the limit of {} bytes",
                                       strings.offset + 8, kMaxStringLength + 1, kMaxStringLength));
}

TEST(BytecodeCorpus, TrailingBytesInASection) {
  std::vector<uint8_t> file = example_file();
  auto strings = find_section(file, SectionKind::kStrings);
  // The padding after the strings section is zero: take one byte of it in.
  ASSERT_NE(strings.size % 8, 0u);
  put_le<uint64_t>(file, strings.entry + SectionEntryField::kSize, strings.size + 1);
  reseal(file);
  EXPECT_EQ(refusal(file),
            fmt::format("bytecode: section 'strings' at byte {}: 1 unread bytes at the end of the section",
                        strings.offset + strings.size));
}

TEST(BytecodeCorpus, CodeSectionSizeNotAMultipleOfFour) {
  std::vector<uint8_t> file = example_file();
  auto code = find_section(file, SectionKind::kCode);
  put_le<uint64_t>(file, code.entry + SectionEntryField::kSize, code.size - 2);
  put_le<uint16_t>(file, code.offset + code.size - 2, 0);  // the dropped bytes become padding
  reseal(file);
  EXPECT_EQ(refusal(file), fmt::format("bytecode: section 'code' at byte {}: size {} is not a multiple of 4",
                                       code.offset, code.size - 2));
}

}  // namespace
}  // namespace stowage
