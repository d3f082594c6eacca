// The Stowage bytecode file (.stw), described in one place. docs/bytecode.md is the
// prose form of this header; the writer and the validating reader use only the
// names below, so the layout cannot drift between them.
//
// All integers are little-endian; no field is read in place, so none needs natural
// alignment. Sections start on 8-byte boundaries; constant data on 64-byte ones,
// so a mapped file's weights can be used in place.
//
// File := Header | SectionTable | sections (each at an 8-aligned offset, any order);
// every byte outside the header, the table and the sections is zero padding.
//
// Encodings used by the sections:
//   str        := u32 length, `length` bytes (no terminator, no padding)
//   shape      := u32 rank (<= kMaxShapeRank), rank x i64 extents
//   count      := u64 number of entries of a table (capped by a kMax* below)
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "stowage/bytecode/isa.h"

namespace stowage::bytecode {

// ---------------------------------------------------------------------------
// Header: exactly kHeaderSize bytes at offset 0.
// ---------------------------------------------------------------------------

// A high-bit byte (catches 7-bit transports), the ASCII tag, then CR LF (catches
// line-ending conversion), ^Z (stops DOS `type`) and LF.
inline constexpr std::array<uint8_t, 8> kMagic = {0x89, 'S', 'T', 'W', '\r', '\n', 0x1A, '\n'};

// A reader accepts a file whose major equals its own and whose minor is <= its own.
// A minor bump may only add things an older reader of the same major never sees in
// files it accepts (new opcodes, section kinds, flag bits, feature bits); anything
// that changes the meaning of existing bytes bumps the major.
inline constexpr uint16_t kMajorVersion = 1;
// 1: alloc_discontiguous_tensor. 2: tensor constants (sections kTensorConstants and
// kConstantData, opcode load_tensor_constant). 3: section kMemoryLayout. 4: tuple
// results (ValueKind kTuple in a function's result, opcode ret_tuple). 5: section
// kMemoryPlan. 6: tensors at 2D offsets in image storages (image offset kernel
// parameters, alloc_tensor's image offset y << 32 | x). 7: null buffer arguments
// (kNullRegister in call_kernel's list).
inline constexpr uint16_t kMinorVersion = 7;

inline constexpr uint32_t kHeaderSize = 64;

// Byte offsets of the header fields.
struct HeaderField {
  enum : uint32_t {
    kMagic = 0,                // u8[8]  kMagic
    kMajor = 8,                // u16    kMajorVersion
    kMinor = 10,               // u16    <= kMinorVersion
    kHeaderSize = 12,          // u32    == kHeaderSize
    kFileSize = 16,            // u64    total bytes of the file, header included
    kFeatures = 24,            // u64    FeatureBits (executable.h) a device must have
    kSectionTableOffset = 32,  // u64    byte offset of the section table
    kSectionCount = 40,        // u32    entries in the section table
    kHeaderCrc = 44,           // u32    CRC-32 of the kHeaderSize header bytes, this field as 0
    kBodyCrc = 48,             // u32    CRC-32 of bytes [kHeaderSize, file size)
    kReserved = 52,            // u8[12] zero
  };
};
inline constexpr uint32_t kHeaderReservedBytes = kHeaderSize - HeaderField::kReserved;

// ---------------------------------------------------------------------------
// Section table: section count entries of kSectionEntrySize bytes, at an 8-aligned
// offset >= kHeaderSize. Each kind appears at most once; every kind but kDebug is
// required. Sections and the table lie inside the file and do not overlap.
// ---------------------------------------------------------------------------

inline constexpr uint32_t kSectionEntrySize = 24;
struct SectionEntryField {
  enum : uint32_t {
    kKind = 0,    // u32 SectionKind
    kFlags = 4,   // u32 reserved, zero
    kOffset = 8,  // u64 byte offset in the file, a multiple of kSectionAlignment
    kSize = 16,   // u64 bytes of content (padding to the next section not counted)
  };
};
inline constexpr uint64_t kSectionAlignment = 8;
inline constexpr uint64_t kConstantDataAlignment = 64;

// The numeric values are part of the format: never renumber.
enum class SectionKind : uint32_t {
  // count, then count x str. Referenced by kString operands.
  kStrings = 1,
  // count, then count x Constant:
  //   u8 ConstantKind, u8 DType, u16 reserved (0), then by kind:
  //   kShape: shape (dtype must be int64)   kInt: i64 (dtype bool or integer)
  //   kFloat: f64 bit pattern (dtype float16/32/64)
  kConstants = 2,
  // count, then count x KernelUnit: str name, str source;
  // count, then count x KernelSignature: str name, u32 unit index, u32 param count,
  //   then per param: str name, u8 KernelParamKind, u8 DType, u8 lanes
  //   (1, 2, 3, 4, 8 or 16), u8 flags (bit 0: is_const; other bits 0).
  kKernels = 3,
  // count, then count x Function: str name, u32 param count, params x ValueDesc,
  //   ValueDesc result, u32 register count, u32 first code word, u32 code words.
  //   ValueDesc := str name, u8 ValueKind, u8 DType, u16 reserved (0), shape
  //   (rank 0 unless the kind is kTensor; tensor extents >= 0); a kTuple value
  //   (a result only; version 1.4) is followed by u32 n (1 <= n <= kMaxTupleFields)
  //   and n tensor ValueDescs, its fields.
  kFunctions = 4,
  // The u32 instruction words of every function (isa.h encoding); functions name
  // their word ranges. Size is a multiple of 4.
  kCode = 5,
  // u64 FeatureBits (equal to the header's), count, then count x ScopeRequirement:
  //   str scope, u8 ScopeKind, u8 flags (bit 0: onchip; other bits 0), u8 ImageLayout
  //   (non-zero exactly for image2d scopes), u8 reserved (0), u64 capacity,
  //   u64 max_storage_bytes, u64 offset_alignment (a power of two),
  //   u64 max_image_width, u64 max_image_height (image2d: largest storage extent).
  kRequirements = 6,
  // The IR text the file was compiled from, as raw bytes (optional).
  kDebug = 7,
  // Tensor constants (optional; with kConstantData, both or neither; version 1.2):
  //   count, then count x ConstantStorage:
  //     str scope, u8 ScopeKind, u8 pixel DType (image2d: float32/float16; buffer:
  //     uint8), u16 reserved (0), u64 nbytes, u64 height, u64 width (image2d; else 0),
  //     u64 data offset (into kConstantData, a multiple of kConstantDataAlignment);
  //     the storage's initial contents are data[offset, offset + nbytes).
  //   count, then count x TensorConstant:
  //     str name, u8 DType, u8 reserved (0), u16 reserved (0), shape, u32 storage
  //     index, u64 byte offset in the storage (0 in an image storage).
  kTensorConstants = 8,
  // The constant storages' bytes, back to back in storage order, each at a multiple
  // of kConstantDataAlignment from the section's start, which is itself at a file
  // offset that is a multiple of kConstantDataAlignment: a mapped file can be used
  // in place. Bytes between storages are zero.
  kConstantData = 9,
  // Where each function's tensors live over time (memory_layout.h), for tools
  // (optional; version 1.3): u32 count, then count x FunctionLayout:
  //   str function (a function of the file, each at most once), u64 steps,
  //   u32 scope count, then per scope: str scope, u64 lower_bound (at most the sum
  //   of its tensors' nbytes), u32 storage count, then per storage: str name,
  //   u64 nbytes, u64 start, u64 end, u32 tensor count, then per tensor: str name,
  //   u64 offset, u64 nbytes, u64 start, u64 end. Names are not empty;
  //   start <= end <= steps; offset + nbytes <= the storage's nbytes; the sums of
  //   a scope's storage bytes and tensor bytes fit in 64 bits.
  kMemoryLayout = 10,
  // The planner's figures per function and scope (memory_layout.h ScopePlan), for
  // tools (optional; version 1.5): u32 count, then count x ScopePlan: str function
  // (a function of the file), str scope (not empty; each (function, scope) once),
  // u64 tensors, planned_bytes, lower_bound, naive_bytes, reuse_only_bytes, spilled,
  // spilled_bytes, discontiguous, blocks, f64 seconds (finite, >= 0). lower_bound
  // <= naive_bytes; spilled <= tensors; spilled_bytes <= naive_bytes.
  kMemoryPlan = 11,
  // The model nodes behind instructions (origins.h), for profiles (optional; version
  // 1.5): u32 count, then count x FunctionOrigins: str function (a function of the
  // file, each at most once), u32 site count, then per site: u32 pc (below the
  // function's instruction count, increasing), u32 node count (at least 1), then
  // per node: str op (not empty), str node. Sites and nodes together at most
  // kMaxOriginEntries.
  kOrigins = 12,
};
inline constexpr uint32_t kFirstSectionKind = 1;
inline constexpr uint32_t kLastSectionKind = 12;
inline constexpr uint32_t kMaxSections = kLastSectionKind - kFirstSectionKind + 1;

std::string_view section_name(SectionKind kind);

// Flag bits of the byte-wide flag fields.
inline constexpr uint8_t kParamFlagConst = 1u << 0;
inline constexpr uint8_t kScopeFlagOnchip = 1u << 0;

// ---------------------------------------------------------------------------
// Limits. Every count read from a file is checked against these (and against the
// bytes left in its section) before it sizes an allocation.
// ---------------------------------------------------------------------------
inline constexpr uint64_t kMaxStrings = 1u << 20;
inline constexpr uint32_t kMaxStringLength = 1u << 20;         // names and string-table entries
inline constexpr uint32_t kMaxKernelSourceLength = 64u << 20;  // one kernel unit's source
inline constexpr uint64_t kMaxDebugTextLength = 256u << 20;
inline constexpr uint64_t kMaxConstants = 1u << 20;
inline constexpr uint32_t kMaxShapeRank = 16;               // a tensor's shape
inline constexpr uint32_t kMaxShapeConstantExtents = 1u << 24;  // a shape constant used as a list of offsets
inline constexpr uint64_t kMaxKernelUnits = 4096;
inline constexpr uint64_t kMaxKernels = 1u << 16;
inline constexpr uint32_t kMaxKernelParams = 256;
inline constexpr uint64_t kMaxFunctions = 1u << 16;
inline constexpr uint32_t kMaxFunctionParams = 4096;
inline constexpr uint32_t kMaxTupleFields = 4096;  // fields of a tuple result, each a ret_tuple register
inline constexpr uint32_t kMaxRegisters = 65536;
inline constexpr uint32_t kMaxInstructionsPerFunction = 1u << 20;
inline constexpr uint64_t kMaxScopes = 256;
inline constexpr uint32_t kMaxGridRank = 3;
inline constexpr uint64_t kMaxConstantStorages = 1u << 16;
inline constexpr uint64_t kMaxTensorConstants = 1u << 20;
// Storages and tensors of the memory layout section, all functions together.
inline constexpr uint64_t kMaxLayoutEntries = uint64_t{1} << 22;
// Sites and nodes of the origins section together.
inline constexpr uint64_t kMaxOriginEntries = uint64_t{1} << 22;
// Work items of one launch (the product of the grid's extents): far more than any
// device finishes in reasonable time, and small enough that no driver's arithmetic
// on it (work items times a local size, byte offsets of 8-byte elements) can wrap
// 64 bits. The device's own limits are checked when the kernel is launched.
inline constexpr uint64_t kMaxLaunchWorkItems = uint64_t{1} << 40;
// kMaxListLength (isa.h) bounds every list operand.
static_assert(kMaxListLength <= kMaxRegisters);
static_assert(kMaxTupleFields <= kMaxListLength);

}  // namespace stowage::bytecode
