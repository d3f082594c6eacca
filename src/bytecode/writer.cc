#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "byte_io.h"
#include "stowage/support/file.h"
#include "stowage/bytecode/file.h"
#include "stowage/bytecode/format.h"
#include "stowage/bytecode/instruction_codec.h"

namespace stowage {
namespace bytecode {
namespace {

void write_shape(ByteWriter& w, const std::vector<int64_t>& shape) {
  w.u32(static_cast<uint32_t>(shape.size()));
  for (int64_t extent : shape) w.i64(extent);
}

void write_strings(ByteWriter& w, const Executable& exe) {
  w.u64(exe.strings.size());
  for (const std::string& s : exe.strings) w.str(s);
}

void write_constants(ByteWriter& w, const Executable& exe) {
  w.u64(exe.constants.size());
  for (const Constant& c : exe.constants) {
    w.u8(static_cast<uint8_t>(c.kind));
    w.u8(static_cast<uint8_t>(c.dtype));
    w.u16(0);
    switch (c.kind) {
      case ConstantKind::kShape: write_shape(w, c.shape); break;
      case ConstantKind::kInt: w.i64(c.int_value); break;
      case ConstantKind::kFloat: w.f64(c.float_value); break;
    }
  }
}

void write_kernels(ByteWriter& w, const Executable& exe) {
  w.u64(exe.units.size());
  for (const KernelUnit& unit : exe.units) {
    w.str(unit.name);
    w.str(unit.source);
  }
  w.u64(exe.kernels.size());
  for (const KernelSignature& kernel : exe.kernels) {
    w.str(kernel.name);
    w.u32(kernel.unit);
    w.u32(static_cast<uint32_t>(kernel.params.size()));
    for (const KernelParam& param : kernel.params) {
      w.str(param.name);
      w.u8(static_cast<uint8_t>(param.kind));
      w.u8(static_cast<uint8_t>(param.dtype));
      w.u8(param.lanes);
      w.u8(param.is_const ? kParamFlagConst : 0);
    }
  }
}

void write_value_desc(ByteWriter& w, const ValueDesc& value) {
  w.str(value.name);
  w.u8(static_cast<uint8_t>(value.kind));
  w.u8(static_cast<uint8_t>(value.dtype));
  w.u16(0);
  write_shape(w, value.shape);
  if (value.kind != ValueKind::kTuple) return;
  w.u32(static_cast<uint32_t>(value.fields.size()));
  for (const ValueDesc& field : value.fields) write_value_desc(w, field);
}

// Encodes every function's code into one word stream; returns each function's
// [first word, word count).
std::vector<std::pair<uint32_t, uint32_t>> encode_code(const Executable& exe, std::vector<uint32_t>& words) {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (const Function& fn : exe.functions) {
    size_t begin = words.size();
    for (const Instruction& ins : fn.code) encode_instruction(ins, words);
    ranges.emplace_back(static_cast<uint32_t>(begin), static_cast<uint32_t>(words.size() - begin));
  }
  return ranges;
}

void write_functions(ByteWriter& w, const Executable& exe, const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  w.u64(exe.functions.size());
  for (size_t i = 0; i < exe.functions.size(); ++i) {
    const Function& fn = exe.functions[i];
    w.str(fn.name);
    w.u32(static_cast<uint32_t>(fn.params.size()));
    for (const ValueDesc& param : fn.params) write_value_desc(w, param);
    write_value_desc(w, fn.result);
    w.u32(fn.num_registers);
    w.u32(ranges[i].first);
    w.u32(ranges[i].second);
  }
}

void write_code(ByteWriter& w, const std::vector<uint32_t>& words) {
  for (uint32_t word : words) w.u32(word);
}

void write_requirements(ByteWriter& w, const Executable& exe) {
  w.u64(exe.requirements.features);
  w.u64(exe.requirements.scopes.size());
  for (const ScopeRequirement& scope : exe.requirements.scopes) {
    w.str(scope.scope);
    w.u8(static_cast<uint8_t>(scope.kind));
    w.u8(scope.onchip ? kScopeFlagOnchip : 0);
    w.u8(static_cast<uint8_t>(scope.layout));
    w.u8(0);
    w.u64(scope.capacity);
    w.u64(scope.max_storage_bytes);
    w.u64(scope.offset_alignment);
    w.u64(scope.max_image_width);
    w.u64(scope.max_image_height);
  }
}

// Where each constant storage's bytes start in the constant data section.
std::vector<uint64_t> constant_data_offsets(const Executable& exe) {
  std::vector<uint64_t> offsets;
  uint64_t at = 0;
  for (const ConstantStorage& storage : exe.constant_storages) {
    at = (at + kConstantDataAlignment - 1) / kConstantDataAlignment * kConstantDataAlignment;
    offsets.push_back(at);
    at += storage.nbytes;
  }
  return offsets;
}

void write_tensor_constants(ByteWriter& w, const Executable& exe) {
  std::vector<uint64_t> data_offsets = constant_data_offsets(exe);
  w.u64(exe.constant_storages.size());
  for (size_t i = 0; i < exe.constant_storages.size(); ++i) {
    const ConstantStorage& storage = exe.constant_storages[i];
    w.str(storage.scope);
    w.u8(static_cast<uint8_t>(storage.kind));
    w.u8(static_cast<uint8_t>(storage.pixel_dtype));
    w.u16(0);
    w.u64(storage.nbytes);
    w.u64(storage.image.height);
    w.u64(storage.image.width);
    w.u64(data_offsets[i]);
  }
  w.u64(exe.tensor_constants.size());
  for (const TensorConstant& c : exe.tensor_constants) {
    w.str(c.name);
    w.u8(static_cast<uint8_t>(c.dtype));
    w.u8(0);
    w.u16(0);
    write_shape(w, c.shape);
    w.u32(c.storage);
    w.u64(c.offset);
  }
}

// Each storage's contents at its offset: its segments, zeros between them. (Not
// validated: segments out of order or past the storage make a file the reader refuses.)
void write_constant_data(ByteWriter& w, const Executable& exe) {
  const size_t section_start = w.position();
  std::vector<uint64_t> data_offsets = constant_data_offsets(exe);
  for (size_t i = 0; i < exe.constant_storages.size(); ++i) {
    const ConstantStorage& storage = exe.constant_storages[i];
    const size_t start = section_start + data_offsets[i];
    w.zeros_to(start);
    for (const DataSegment& segment : storage.segments) {
      w.zeros_to(start + segment.offset);
      w.bytes(segment.bytes.bytes());
    }
    w.zeros_to(start + storage.nbytes);
  }
}

// Counts are u32 in this section: kMaxLayoutEntries and the other limits keep them small.
void write_memory_layout(ByteWriter& w, const Executable& exe) {
  w.u32(static_cast<uint32_t>(exe.memory_layouts.size()));
  for (const FunctionLayout& f : exe.memory_layouts) {
    w.str(f.function);
    w.u64(f.steps);
    w.u32(static_cast<uint32_t>(f.scopes.size()));
    for (const LayoutScope& scope : f.scopes) {
      w.str(scope.scope);
      w.u64(scope.lower_bound);
      w.u32(static_cast<uint32_t>(scope.storages.size()));
      for (const LayoutStorage& storage : scope.storages) {
        w.str(storage.name);
        w.u64(storage.nbytes);
        w.u64(storage.start);
        w.u64(storage.end);
        w.u32(static_cast<uint32_t>(storage.tensors.size()));
        for (const LayoutTensor& t : storage.tensors) {
          w.str(t.name);
          w.u64(t.offset);
          w.u64(t.nbytes);
          w.u64(t.start);
          w.u64(t.end);
        }
      }
    }
  }
}

void write_origins(ByteWriter& w, const Executable& exe) {
  w.u32(static_cast<uint32_t>(exe.origins.size()));
  for (const FunctionOrigins& f : exe.origins) {
    w.str(f.function);
    w.u32(static_cast<uint32_t>(f.sites.size()));
    for (const SiteOrigin& site : f.sites) {
      w.u32(site.pc);
      w.u32(static_cast<uint32_t>(site.nodes.size()));
      for (const NodeOrigin& n : site.nodes) {
        w.str(n.op);
        w.str(n.node);
      }
    }
  }
}

void write_memory_plan(ByteWriter& w, const Executable& exe) {
  w.u32(static_cast<uint32_t>(exe.memory_plans.size()));
  for (const ScopePlan& p : exe.memory_plans) {
    w.str(p.function);
    w.str(p.scope);
    for (uint64_t v : {p.tensors, p.planned_bytes, p.lower_bound, p.naive_bytes, p.reuse_only_bytes, p.spilled,
                       p.spilled_bytes, p.discontiguous, p.blocks}) {
      w.u64(v);
    }
    w.f64(p.seconds);
  }
}

struct PlacedSection {
  SectionKind kind;
  uint64_t offset;
  uint64_t size;
};

}  // namespace
}  // namespace bytecode

std::vector<uint8_t> write_bytecode(const Executable& exe) {
  using namespace bytecode;
  std::vector<uint32_t> code_words;
  auto ranges = encode_code(exe, code_words);

  std::vector<SectionKind> kinds = {SectionKind::kStrings,   SectionKind::kConstants, SectionKind::kKernels,
                                    SectionKind::kFunctions, SectionKind::kCode,      SectionKind::kRequirements};
  if (!exe.debug_text.empty()) kinds.push_back(SectionKind::kDebug);
  if (!exe.constant_storages.empty() || !exe.tensor_constants.empty()) {
    kinds.push_back(SectionKind::kTensorConstants);
    kinds.push_back(SectionKind::kConstantData);
  }
  if (!exe.memory_layouts.empty()) kinds.push_back(SectionKind::kMemoryLayout);
  if (!exe.memory_plans.empty()) kinds.push_back(SectionKind::kMemoryPlan);
  if (!exe.origins.empty()) kinds.push_back(SectionKind::kOrigins);

  std::vector<uint8_t> file(kHeaderSize + kinds.size() * kSectionEntrySize, 0);
  ByteWriter w(file);
  std::vector<PlacedSection> placed;
  for (SectionKind kind : kinds) {
    w.pad_to(kind == SectionKind::kConstantData ? kConstantDataAlignment : kSectionAlignment);
    uint64_t begin = w.position();
    switch (kind) {
      case SectionKind::kStrings: write_strings(w, exe); break;
      case SectionKind::kConstants: write_constants(w, exe); break;
      case SectionKind::kKernels: write_kernels(w, exe); break;
      case SectionKind::kFunctions: write_functions(w, exe, ranges); break;
      case SectionKind::kCode: write_code(w, code_words); break;
      case SectionKind::kRequirements: write_requirements(w, exe); break;
      case SectionKind::kDebug: w.bytes(exe.debug_text); break;
      case SectionKind::kTensorConstants: write_tensor_constants(w, exe); break;
      case SectionKind::kConstantData: write_constant_data(w, exe); break;
      case SectionKind::kMemoryLayout: write_memory_layout(w, exe); break;
      case SectionKind::kMemoryPlan: write_memory_plan(w, exe); break;
      case SectionKind::kOrigins: write_origins(w, exe); break;
    }
    placed.push_back({kind, begin, w.position() - begin});
  }

  for (size_t i = 0; i < placed.size(); ++i) {
    uint8_t* entry = file.data() + kHeaderSize + i * kSectionEntrySize;
    store_le<uint32_t>(entry + SectionEntryField::kKind, static_cast<uint32_t>(placed[i].kind));
    store_le<uint64_t>(entry + SectionEntryField::kOffset, placed[i].offset);
    store_le<uint64_t>(entry + SectionEntryField::kSize, placed[i].size);
  }

  uint8_t* header = file.data();
  std::copy(kMagic.begin(), kMagic.end(), header + HeaderField::kMagic);
  store_le<uint16_t>(header + HeaderField::kMajor, kMajorVersion);
  store_le<uint16_t>(header + HeaderField::kMinor, std::max(exe.minor_version, exe.required_minor_version()));
  store_le<uint32_t>(header + HeaderField::kHeaderSize, kHeaderSize);
  store_le<uint64_t>(header + HeaderField::kFileSize, file.size());
  store_le<uint64_t>(header + HeaderField::kFeatures, exe.requirements.features);
  store_le<uint64_t>(header + HeaderField::kSectionTableOffset, kHeaderSize);
  store_le<uint32_t>(header + HeaderField::kSectionCount, static_cast<uint32_t>(placed.size()));
  store_le<uint32_t>(header + HeaderField::kBodyCrc, crc32_of(std::span<const uint8_t>(file).subspan(kHeaderSize)));
  store_le<uint32_t>(header + HeaderField::kHeaderCrc, crc32_of(std::span<const uint8_t>(file).first(kHeaderSize)));
  return file;
}

Status write_bytecode_file(const Executable& exe, const std::string& path) {
  std::vector<uint8_t> bytes = write_bytecode(exe);
  STOWAGE_TRY(validate_bytecode(bytes));
  // Through a temporary file renamed over `path`: a write that fails part-way (disk
  // full, a file-size limit) leaves the file that was there whole, and a VM that
  // mapped that file keeps reading the old bytes (docs/security.md).
  return write_file_atomically(
      path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "bytecode file", WrittenFile::kOutput);
}

}  // namespace stowage
