// The validating reader: the file layout, then each section in dependency order,
// then the code. Nothing is returned until the whole file has been checked.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "byte_io.h"
#include "code_validator.h"
#include "file_layout.h"
#include "mapped_file.h"
#include "section_cursor.h"
#include "stowage/bytecode/file.h"
#include "stowage/bytecode/format.h"
#include "stowage/bytecode/kernel_source.h"
#include "stowage/bytecode/storage_rules.h"

namespace stowage {
namespace bytecode {

namespace {

// What becomes of the constant data a valid file holds.
enum class ConstantBytes {
  kCopy,    // copied into memory the executable owns
  kMapped,  // views of the file, which `owner` keeps alive (a mapped file)
  kBorrow,  // views of the file, valid while it is: for validation only
};

class Reader {
 public:
  Reader(std::span<const uint8_t> file, ConstantBytes mode, std::shared_ptr<const void> owner = nullptr)
      : file_(file), mode_(mode), owner_(std::move(owner)) {}
  Expected<Executable> read();

 private:
  Status read_layout();
  Status read_strings();
  Status read_constants();
  Status read_kernels();
  Status read_requirements();
  Status read_tensor_constants();
  Status read_constant_storage(SectionCursor& in, ConstantStorage& out, uint64_t& data_offset);
  Status read_tensor_constant(SectionCursor& in, TensorConstant& out);
  Status check_constant_placements(SectionCursor& in, const std::vector<uint64_t>& offsets) const;
  Status check_constant_data_padding(const std::vector<uint64_t>& data_offsets) const;
  Status read_functions();
  Status read_function_frame(SectionCursor& in, Function& fn);
  Status read_code_range(SectionCursor& in, CodeRange& range);
  Status check_code_ranges_disjoint(const std::vector<uint64_t>& offsets) const;
  Status read_code_words();
  Status validate_code();
  Status read_debug();
  Status read_memory_layout();
  Status read_memory_plan();
  Status read_origins();
  Status read_function_layout(SectionCursor& in, FunctionLayout& out, uint64_t& entries);
  Status read_layout_storage(SectionCursor& in, uint64_t steps, LayoutStorage& out, uint64_t& entries);
  Status read_span(SectionCursor& in, uint64_t steps, uint64_t& start, uint64_t& end);

  SectionCursor cursor(SectionKind kind) const;
  Status read_name(SectionCursor& in, std::string& out, std::string_view what, bool allow_empty);
  Status read_dtype(SectionCursor& in, DType& out);
  Status read_reserved16(SectionCursor& in);
  Status read_shape(SectionCursor& in, std::vector<int64_t>& out, bool non_negative, uint32_t max_rank);
  // Where a value appears: only a result may be a tuple, and a tuple's fields are tensors.
  enum class ValueRole { kParam, kResult, kField };
  Status read_value_desc(SectionCursor& in, ValueDesc& out, ValueRole role);
  Status read_tuple_fields(SectionCursor& in, ValueDesc& out);
  Status read_kernel_param(SectionCursor& in, KernelParam& out);
  Status check_image_offset_param(SectionCursor& in, uint64_t at, const KernelSignature& kernel, uint32_t p);
  Status check_self_contained(SectionCursor& in, std::string_view source, uint64_t source_at);
  Status read_scope(SectionCursor& in, ScopeRequirement& out);
  Status check_image_feature();

  std::span<const uint8_t> file_;
  ConstantBytes mode_;
  std::shared_ptr<const void> owner_;
  FileLayout layout_;
  std::vector<uint32_t> code_words_;
  std::vector<CodeRange> code_ranges_;
  Executable exe_;
};

Status Reader::read_layout() {
  Expected<FileLayout> layout = read_file_layout(file_);
  if (!layout) return layout.error();
  layout_ = *layout;
  exe_.minor_version = layout_.minor;
  return Status::ok();
}

SectionCursor Reader::cursor(SectionKind kind) const {
  const Section& s = *layout_.section(kind);
  return SectionCursor(fmt::format("section '{}'", section_name(kind)), file_.subspan(s.offset, s.size), s.offset);
}

// ---------------------------------------------------------------------------
// Shared field readers
// ---------------------------------------------------------------------------

Status Reader::read_name(SectionCursor& in, std::string& out, std::string_view what, bool allow_empty) {
  uint64_t at = in.offset();
  STOWAGE_TRY(in.read_str(out, kMaxStringLength, what));
  if (!allow_empty && out.empty()) return in.error_at(at, fmt::format("{} is empty", what));
  if (out.find('\0') != std::string::npos) return in.error_at(at, fmt::format("{} contains a NUL byte", what));
  return Status::ok();
}

Status Reader::read_dtype(SectionCursor& in, DType& out) {
  uint64_t at = in.offset();
  uint8_t code = 0;
  STOWAGE_TRY(in.read(code, "dtype"));
  std::optional<DType> dtype = dtype_from_code(code);
  if (!dtype) return in.error_at(at, fmt::format("invalid dtype code {}", code));
  out = *dtype;
  return Status::ok();
}

Status Reader::read_reserved16(SectionCursor& in) {
  uint64_t at = in.offset();
  uint16_t reserved = 0;
  STOWAGE_TRY(in.read(reserved, "reserved field"));
  if (reserved != 0) return in.error_at(at, fmt::format("reserved field is 0x{:x}, not zero", reserved));
  return Status::ok();
}

Status Reader::read_shape(SectionCursor& in, std::vector<int64_t>& out, bool non_negative, uint32_t max_rank) {
  uint64_t at = in.offset();
  uint32_t rank = 0;
  STOWAGE_TRY(in.read(rank, "shape rank"));
  if (rank > max_rank) return in.error_at(at, fmt::format("shape rank {} exceeds the limit {}", rank, max_rank));
  STOWAGE_TRY(in.check_count(at, rank, max_rank, 8, "shape rank"));
  out.resize(rank);
  for (uint32_t d = 0; d < rank; ++d) {
    uint64_t extent_at = in.offset();
    STOWAGE_TRY(in.read_i64(out[d], "shape extent"));
    if (non_negative && out[d] < 0) {
      return in.error_at(extent_at, fmt::format("negative extent {} in dimension {}", out[d], d));
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------

Status Reader::read_strings() {
  SectionCursor in = cursor(SectionKind::kStrings);
  uint64_t count = 0;
  STOWAGE_TRY(in.read_count(count, kMaxStrings, 4, "string count"));
  exe_.strings.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context(fmt::format("string {}", i));
    STOWAGE_TRY(in.read_str(exe_.strings[i], kMaxStringLength, "string"));
  }
  in.set_context("");
  return in.expect_end();
}

Status Reader::read_constants() {
  SectionCursor in = cursor(SectionKind::kConstants);
  uint64_t count = 0;
  STOWAGE_TRY(in.read_count(count, kMaxConstants, 8, "constant count"));
  exe_.constants.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context(fmt::format("constant {}", i));
    Constant& c = exe_.constants[i];
    uint64_t at = in.offset();
    uint8_t kind = 0;
    STOWAGE_TRY(in.read(kind, "constant kind"));
    if (kind > static_cast<uint8_t>(ConstantKind::kFloat)) {
      return in.error_at(at, fmt::format("unknown constant kind {}", kind));
    }
    c.kind = static_cast<ConstantKind>(kind);
    uint64_t dtype_at = in.offset();
    STOWAGE_TRY(read_dtype(in, c.dtype));
    STOWAGE_TRY(read_reserved16(in));
    switch (c.kind) {
      case ConstantKind::kShape:
        if (c.dtype != DType::kInt64) return in.error_at(dtype_at, "a shape constant's dtype must be int64");
        // A shape constant is also a list of offsets (a discontiguous tensor's
        // blocks); where it is a tensor's shape the validator bounds its rank.
        STOWAGE_TRY(read_shape(in, c.shape, /*non_negative=*/false, kMaxShapeConstantExtents));
        break;
      case ConstantKind::kInt:
        if (dtype_is_float(c.dtype)) {
          return in.error_at(dtype_at, fmt::format("an int constant cannot have dtype {}", dtype_name(c.dtype)));
        }
        STOWAGE_TRY(in.read_i64(c.int_value, "int value"));
        break;
      case ConstantKind::kFloat:
        if (!dtype_is_float(c.dtype)) {
          return in.error_at(dtype_at, fmt::format("a float constant cannot have dtype {}", dtype_name(c.dtype)));
        }
        STOWAGE_TRY(in.read_f64(c.float_value, "float value"));
        break;
    }
  }
  in.set_context("");
  return in.expect_end();
}

Status Reader::read_kernel_param(SectionCursor& in, KernelParam& out) {
  STOWAGE_TRY(read_name(in, out.name, "parameter name", /*allow_empty=*/true));
  uint64_t at = in.offset();
  uint8_t kind = 0;
  STOWAGE_TRY(in.read(kind, "parameter kind"));
  if (kind >= kKernelParamKindCount) return in.error_at(at, fmt::format("unknown parameter kind {}", kind));
  out.kind = static_cast<KernelParamKind>(kind);
  STOWAGE_TRY(read_dtype(in, out.dtype));
  at = in.offset();
  STOWAGE_TRY(in.read(out.lanes, "lanes"));
  constexpr std::array<uint8_t, 6> kLanes = {1, 2, 3, 4, 8, 16};
  if (std::find(kLanes.begin(), kLanes.end(), out.lanes) == kLanes.end()) {
    return in.error_at(at, fmt::format("{} lanes (must be 1, 2, 3, 4, 8 or 16)", out.lanes));
  }
  at = in.offset();
  uint8_t flags = 0;
  STOWAGE_TRY(in.read(flags, "parameter flags"));
  if ((flags & ~kParamFlagConst) != 0) {
    return in.error_at(at, fmt::format("reserved parameter flag bits 0x{:x} are set", flags & ~kParamFlagConst));
  }
  out.is_const = (flags & kParamFlagConst) != 0;
  return Status::ok();
}

// An image offset parameter (version 1.6) is an int2 right after the image it belongs to.
Status Reader::check_image_offset_param(SectionCursor& in, uint64_t at, const KernelSignature& kernel, uint32_t p) {
  const KernelParam& param = kernel.params[p];
  if (exe_.minor_version < 6) {
    return in.error_at(at, fmt::format("an image offset parameter needs version 1.6; the file declares 1.{}",
                                       exe_.minor_version));
  }
  if (p == 0 || !kernel.params[p - 1].is_image()) {
    return in.error_at(at, "an image offset parameter must directly follow an image parameter");
  }
  if (param.dtype != DType::kInt32 || param.lanes != 2 || param.is_const) {
    return in.error_at(at, fmt::format("an image offset parameter is an int2 (int32, 2 lanes, no flags), not {} x{}{}",
                                       dtype_name(param.dtype), param.lanes, param.is_const ? " const" : ""));
  }
  return Status::ok();
}

// A unit may not make the device compiler read a file of the machine it runs on
// (kernel_source.h lists the forms); the compiler inlines the headers it ships.
Status Reader::check_self_contained(SectionCursor& in, std::string_view source, uint64_t source_at) {
  std::vector<FileAccess> accesses = find_file_accesses(source);
  if (accesses.empty()) return Status::ok();
  const FileAccess& first = accesses.front();
  return in.error_at(source_at + first.offset,
                     fmt::format("'{}' at byte {} of the source could read a file of the machine it runs on; units "
                                 "must be self-contained",
                                 first.form, first.offset));
}

Status Reader::read_kernels() {
  SectionCursor in = cursor(SectionKind::kKernels);
  uint64_t units = 0;
  STOWAGE_TRY(in.read_count(units, kMaxKernelUnits, 8, "kernel unit count"));
  exe_.units.resize(units);
  for (uint64_t i = 0; i < units; ++i) {
    in.set_context(fmt::format("kernel unit {}", i));
    STOWAGE_TRY(read_name(in, exe_.units[i].name, "unit name", /*allow_empty=*/true));
    in.set_context(fmt::format("kernel unit {} '{}'", i, exe_.units[i].name));
    uint64_t source_at = in.offset() + 4;  // past the length
    STOWAGE_TRY(in.read_str(exe_.units[i].source, kMaxKernelSourceLength, "unit source"));
    STOWAGE_TRY(check_self_contained(in, exe_.units[i].source, source_at));
  }
  in.set_context("");
  uint64_t kernels = 0;
  STOWAGE_TRY(in.read_count(kernels, kMaxKernels, 12, "kernel count"));
  exe_.kernels.resize(kernels);
  for (uint64_t i = 0; i < kernels; ++i) {
    KernelSignature& k = exe_.kernels[i];
    in.set_context(fmt::format("kernel {}", i));
    STOWAGE_TRY(read_name(in, k.name, "kernel name", /*allow_empty=*/false));
    in.set_context(fmt::format("kernel {} '{}'", i, k.name));
    uint64_t at = in.offset();
    STOWAGE_TRY(in.read(k.unit, "unit index"));
    if (k.unit >= exe_.units.size()) {
      return in.error_at(
          at, fmt::format("unit {} out of range (executable has {} kernel units)", k.unit, exe_.units.size()));
    }
    at = in.offset();
    uint32_t params = 0;
    STOWAGE_TRY(in.read(params, "parameter count"));
    STOWAGE_TRY(in.check_count(at, params, kMaxKernelParams, 8, "parameter count"));
    k.params.resize(params);
    for (uint32_t p = 0; p < params; ++p) {
      in.set_context(fmt::format("kernel {} '{}' parameter {}", i, k.name, p));
      at = in.offset();
      STOWAGE_TRY(read_kernel_param(in, k.params[p]));
      if (k.params[p].is_image_offset()) STOWAGE_TRY(check_image_offset_param(in, at, k, p));
    }
  }
  in.set_context("");
  return in.expect_end();
}

Status Reader::read_scope(SectionCursor& in, ScopeRequirement& out) {
  STOWAGE_TRY(read_name(in, out.scope, "scope name", /*allow_empty=*/false));
  uint64_t at = in.offset();
  uint8_t kind = 0;
  STOWAGE_TRY(in.read(kind, "scope kind"));
  if (kind > static_cast<uint8_t>(ScopeKind::kImage2d))
    return in.error_at(at, fmt::format("unknown scope kind {}", kind));
  out.kind = static_cast<ScopeKind>(kind);
  at = in.offset();
  uint8_t flags = 0;
  STOWAGE_TRY(in.read(flags, "scope flags"));
  if ((flags & ~kScopeFlagOnchip) != 0) {
    return in.error_at(at, fmt::format("reserved scope flag bits 0x{:x} are set", flags & ~kScopeFlagOnchip));
  }
  out.onchip = (flags & kScopeFlagOnchip) != 0;
  at = in.offset();
  uint8_t layout = 0;
  STOWAGE_TRY(in.read(layout, "image layout"));
  if (layout > static_cast<uint8_t>(ImageLayout::kNhwc)) return in.error_at(at, fmt::format("unknown image layout {}", layout));
  out.layout = static_cast<ImageLayout>(layout);
  if ((out.kind == ScopeKind::kImage2d) != (out.layout != ImageLayout::kNone)) {
    return in.error_at(at, out.kind == ScopeKind::kImage2d ? "an image2d scope needs an image layout"
                                                           : "a buffer scope has no image layout");
  }
  at = in.offset();
  uint8_t reserved = 0;
  STOWAGE_TRY(in.read(reserved, "reserved byte"));
  if (reserved != 0) return in.error_at(at, fmt::format("reserved byte is 0x{:x}, must be 0", reserved));
  STOWAGE_TRY(in.read(out.capacity, "capacity"));
  at = in.offset();
  STOWAGE_TRY(in.read(out.max_storage_bytes, "max_storage_bytes"));
  if (out.onchip && out.max_storage_bytes > out.capacity) {
    return in.error_at(
        at, fmt::format("max_storage_bytes {} exceeds the on-chip capacity {}", out.max_storage_bytes, out.capacity));
  }
  at = in.offset();
  STOWAGE_TRY(in.read(out.offset_alignment, "offset_alignment"));
  if (!std::has_single_bit(out.offset_alignment)) {
    return in.error_at(at, fmt::format("offset_alignment {} is not a power of two", out.offset_alignment));
  }
  STOWAGE_TRY(in.read(out.max_image_width, "max_image_width"));
  STOWAGE_TRY(in.read(out.max_image_height, "max_image_height"));
  return Status::ok();
}

Status Reader::read_requirements() {
  SectionCursor in = cursor(SectionKind::kRequirements);
  Requirements& req = exe_.requirements;
  uint64_t at = in.offset();
  STOWAGE_TRY(in.read(req.features, "features"));
  if (req.features != layout_.features) {
    return in.error_at(at,
                       fmt::format("features 0x{:x} differ from the header's 0x{:x}", req.features, layout_.features));
  }
  uint64_t count = 0;
  STOWAGE_TRY(in.read_count(count, kMaxScopes, 32, "scope count"));
  req.scopes.resize(count);
  std::set<std::string_view> seen;
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context(fmt::format("scope {}", i));
    uint64_t scope_at = in.offset();
    STOWAGE_TRY(read_scope(in, req.scopes[i]));
    if (!seen.insert(req.scopes[i].scope).second) {
      return in.error_at(scope_at, fmt::format("scope '{}' is listed twice", req.scopes[i].scope));
    }
  }
  in.set_context("");
  STOWAGE_TRY(in.expect_end());
  return check_image_feature();
}

// A file that uses images must say so, or the device check at load could pass a
// device that has none.
Status Reader::check_image_feature() {
  if (exe_.requirements.features & kFeatureImages) return Status::ok();
  auto at = layout_.section(SectionKind::kRequirements)->offset;
  for (const ScopeRequirement& scope : exe_.requirements.scopes) {
    if (scope.kind == ScopeKind::kImage2d) {
      return file_error("section 'requirements'", at,
                        fmt::format("scope '{}' is image2d but the images feature bit is not set", scope.scope));
    }
  }
  for (const KernelSignature& kernel : exe_.kernels) {
    for (const KernelParam& param : kernel.params) {
      if (param.is_image()) {
        return file_error("section 'requirements'", at,
                          fmt::format("kernel '{}' takes an image but the images feature bit is not set", kernel.name));
      }
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Tensor constants
// ---------------------------------------------------------------------------

const ScopeRequirement* find_requirement(const Executable& exe, std::string_view scope) {
  for (const ScopeRequirement& r : exe.requirements.scopes) {
    if (r.scope == scope) return &r;
  }
  return nullptr;
}

Status Reader::read_constant_storage(SectionCursor& in, ConstantStorage& out, uint64_t& data_offset) {
  uint64_t at = in.offset();
  STOWAGE_TRY(read_name(in, out.scope, "scope name", /*allow_empty=*/false));
  const ScopeRequirement* scope = find_requirement(exe_, out.scope);
  if (scope == nullptr) return in.error_at(at, fmt::format("scope '{}' is not listed in the requirements", out.scope));
  at = in.offset();
  uint8_t kind = 0;
  STOWAGE_TRY(in.read(kind, "storage kind"));
  if (kind > static_cast<uint8_t>(ScopeKind::kImage2d)) return in.error_at(at, fmt::format("unknown storage kind {}", kind));
  out.kind = static_cast<ScopeKind>(kind);
  if (out.kind != scope->kind) {
    return in.error_at(at, fmt::format("a {} storage in scope '{}', which holds {}s",
                                       out.kind == ScopeKind::kBuffer ? "buffer" : "image2d", out.scope,
                                       scope->kind == ScopeKind::kBuffer ? "buffer" : "image2d"));
  }
  at = in.offset();
  STOWAGE_TRY(read_dtype(in, out.pixel_dtype));
  const bool image = out.kind == ScopeKind::kImage2d;
  if (Status s = image ? is_image_pixel_type(out.pixel_dtype) : Status::ok(); !s) {
    return in.error_at(at, s.error().message());
  }
  if (!image && out.pixel_dtype != DType::kUInt8) {
    return in.error_at(at, fmt::format("a buffer storage's pixel dtype must be uint8, not {}",
                                       dtype_name(out.pixel_dtype)));
  }
  STOWAGE_TRY(read_reserved16(in));
  at = in.offset();
  STOWAGE_TRY(in.read(out.nbytes, "nbytes"));
  uint64_t extent_at = in.offset();
  STOWAGE_TRY(in.read(out.image.height, "height"));
  STOWAGE_TRY(in.read(out.image.width, "width"));
  if (image) {
    std::optional<uint64_t> pixels = checked_mul(out.image.height, out.image.width);
    std::optional<uint64_t> bytes = pixels ? checked_mul(*pixels, 4 * dtype_bytes(out.pixel_dtype)) : std::nullopt;
    if (out.image.height == 0 || out.image.width == 0 || out.image.height > scope->max_image_height ||
        out.image.width > scope->max_image_width) {
      return in.error_at(extent_at, fmt::format("image of {}x{} pixels is empty or exceeds the {}x{} of scope '{}'",
                                                out.image.height, out.image.width, scope->max_image_height,
                                                scope->max_image_width, scope->scope));
    }
    if (!bytes || *bytes != out.nbytes) {
      return in.error_at(at, fmt::format("an image of {}x{} {} pixels holds {} bytes, not {}", out.image.height,
                                         out.image.width, dtype_name(out.pixel_dtype),
                                         bytes ? fmt::to_string(*bytes) : std::string("more than 2^64"), out.nbytes));
    }
  } else if (out.image.height != 0 || out.image.width != 0) {
    return in.error_at(extent_at, "a buffer storage has no image extent (height and width must be 0)");
  }
  if (scope->onchip && out.nbytes > scope->capacity) {
    return in.error_at(at, fmt::format("{} bytes exceed the capacity {} of on-chip scope '{}'", out.nbytes,
                                       scope->capacity, scope->scope));
  }
  at = in.offset();
  STOWAGE_TRY(in.read(data_offset, "data offset"));
  const Section& data = *layout_.section(SectionKind::kConstantData);
  if (data_offset % kConstantDataAlignment != 0) {
    return in.error_at(at, fmt::format("data offset {} is not a multiple of {}", data_offset, kConstantDataAlignment));
  }
  if (!(out.nbytes <= data.size && data_offset <= data.size - out.nbytes)) {
    return in.error_at(at, fmt::format("data [{}, +{}) lies outside the {}-byte section 'constant data'", data_offset,
                                       out.nbytes, data.size));
  }
  std::span<const uint8_t> bytes = file_.subspan(data.offset + data_offset, out.nbytes);
  if (out.nbytes != 0) {
    ByteView view = mode_ == ConstantBytes::kCopy ? ByteView::copy_of(bytes) : ByteView(owner_, bytes);
    out.segments.push_back(DataSegment{0, std::move(view)});
  }
  return Status::ok();
}

Status Reader::read_tensor_constant(SectionCursor& in, TensorConstant& out) {
  STOWAGE_TRY(read_name(in, out.name, "constant name", /*allow_empty=*/false));
  uint64_t dtype_at = in.offset();
  STOWAGE_TRY(read_dtype(in, out.dtype));
  uint64_t at = in.offset();
  uint8_t reserved = 0;
  STOWAGE_TRY(in.read(reserved, "reserved byte"));
  if (reserved != 0) return in.error_at(at, fmt::format("reserved byte is 0x{:x}, must be 0", reserved));
  STOWAGE_TRY(read_reserved16(in));
  uint64_t shape_at = in.offset();
  STOWAGE_TRY(read_shape(in, out.shape, /*non_negative=*/true, kMaxShapeRank));
  std::optional<uint64_t> nbytes = checked_nbytes(out.shape, out.dtype);
  if (!nbytes) return in.error_at(shape_at, "the constant's size overflows 64 bits");
  at = in.offset();
  STOWAGE_TRY(in.read(out.storage, "storage index"));
  if (out.storage >= exe_.constant_storages.size()) {
    return in.error_at(at, fmt::format("storage {} out of range (executable has {} constant storages)", out.storage,
                                       exe_.constant_storages.size()));
  }
  const ConstantStorage& storage = exe_.constant_storages[out.storage];
  const ScopeRequirement& scope = *find_requirement(exe_, storage.scope);
  uint64_t offset_at = in.offset();
  STOWAGE_TRY(in.read(out.offset, "offset"));
  if (storage.kind == ScopeKind::kImage2d) {
    if (out.offset != 0) return in.error_at(offset_at, fmt::format("offset {} in an image storage must be 0", out.offset));
    if (out.dtype != storage.pixel_dtype) {
      return in.error_at(dtype_at, fmt::format("a {} constant in an image of {} pixels", dtype_name(out.dtype),
                                               dtype_name(storage.pixel_dtype)));
    }
    auto extent = image_extent(out.shape, scope.layout);
    if (!extent) {
      return in.error_at(shape_at, fmt::format("shape of rank {} is not an image shape (last extent 4, rank at most 5, "
                                               "extent within 64 bits)",
                                               out.shape.size()));
    }
    if (Status s = tensor_fits_image(*extent, storage.image); !s) {
      return in.error_at(shape_at, fmt::format("constant in scope '{}' {}", scope.scope, s.error().message()));
    }
    return Status::ok();
  }
  if (Status s = tensor_fits_buffer(*nbytes, out.offset, storage.nbytes); !s) {
    return in.error_at(offset_at, fmt::format("constant storage {}: {}", out.storage, s.error().message()));
  }
  if (Status s = offset_is_aligned(out.offset, scope.offset_alignment, scope.scope); !s) {
    return in.error_at(offset_at, s.error().message());
  }
  return Status::ok();
}

// No two constants of one buffer storage share a byte. `offsets[i]` is where
// constant i was declared, for errors.
Status Reader::check_constant_placements(SectionCursor& in, const std::vector<uint64_t>& offsets) const {
  struct Placed {
    uint32_t storage;
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed;
  for (size_t i = 0; i < exe_.tensor_constants.size(); ++i) {
    const TensorConstant& c = exe_.tensor_constants[i];
    uint64_t nbytes = *checked_nbytes(c.shape, c.dtype);  // checked when read
    if (nbytes == 0) continue;
    placed.push_back({c.storage, c.offset, c.offset + nbytes, i});
  }
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.storage != b.storage ? a.storage < b.storage : a.begin < b.begin;
  });
  for (size_t k = 1; k < placed.size(); ++k) {
    const Placed& prev = placed[k - 1];
    const Placed& next = placed[k];
    if (next.storage == prev.storage && next.begin < prev.end) {
      const bool image = exe_.constant_storages[next.storage].kind == ScopeKind::kImage2d;
      return in.error_at(offsets[next.index],
                         fmt::format("constant '{}' overlaps constant '{}' in {} storage {}",
                                     exe_.tensor_constants[next.index].name, exe_.tensor_constants[prev.index].name,
                                     image ? "image" : "constant", next.storage));
    }
  }
  return Status::ok();
}

// Storages lie in order and apart; every byte of the data section outside them is zero.
Status Reader::check_constant_data_padding(const std::vector<uint64_t>& data_offsets) const {
  const Section& data = *layout_.section(SectionKind::kConstantData);
  uint64_t covered = 0;
  for (size_t i = 0; i <= data_offsets.size(); ++i) {
    uint64_t begin = i < data_offsets.size() ? data_offsets[i] : data.size;
    for (uint64_t at = covered; at < begin; ++at) {
      if (file_[data.offset + at] != 0) {
        return file_error("section 'constant data'", data.offset + at,
                          fmt::format("byte 0x{:02x} outside every constant storage is not zero",
                                      file_[data.offset + at]));
      }
    }
    if (i < data_offsets.size()) covered = data_offsets[i] + exe_.constant_storages[i].nbytes;
  }
  return Status::ok();
}

Status Reader::read_tensor_constants() {
  if (!layout_.section(SectionKind::kTensorConstants)) return Status::ok();
  SectionCursor in = cursor(SectionKind::kTensorConstants);
  uint64_t count = 0;
  STOWAGE_TRY(in.read_count(count, kMaxConstantStorages, 40, "constant storage count"));
  exe_.constant_storages.resize(count);
  std::vector<uint64_t> data_offsets(count);
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context(fmt::format("constant storage {}", i));
    uint64_t at = in.offset();
    STOWAGE_TRY(read_constant_storage(in, exe_.constant_storages[i], data_offsets[i]));
    if (i > 0 && data_offsets[i] < data_offsets[i - 1] + exe_.constant_storages[i - 1].nbytes) {
      return in.error_at(at, fmt::format("its data at {} overlaps or precedes constant storage {}'s, which ends at {}",
                                         data_offsets[i], i - 1,
                                         data_offsets[i - 1] + exe_.constant_storages[i - 1].nbytes));
    }
  }
  in.set_context("");
  STOWAGE_TRY(in.read_count(count, kMaxTensorConstants, 24, "tensor constant count"));
  exe_.tensor_constants.resize(count);
  std::vector<uint64_t> declared(count);
  std::set<std::string_view> names;
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context(fmt::format("tensor constant {}", i));
    declared[i] = in.offset();
    STOWAGE_TRY(read_tensor_constant(in, exe_.tensor_constants[i]));
    if (!names.insert(exe_.tensor_constants[i].name).second) {
      return in.error_at(declared[i], fmt::format("name '{}' is used twice", exe_.tensor_constants[i].name));
    }
  }
  in.set_context("");
  STOWAGE_TRY(check_constant_placements(in, declared));
  STOWAGE_TRY(in.expect_end());
  return check_constant_data_padding(data_offsets);
}

Status Reader::read_value_desc(SectionCursor& in, ValueDesc& out, ValueRole role) {
  STOWAGE_TRY(read_name(in, out.name, "value name", /*allow_empty=*/true));
  uint64_t at = in.offset();
  uint8_t kind = 0;
  STOWAGE_TRY(in.read(kind, "value kind"));
  if (kind > static_cast<uint8_t>(ValueKind::kTuple))
    return in.error_at(at, fmt::format("unknown value kind {}", kind));
  out.kind = static_cast<ValueKind>(kind);
  if (out.kind == ValueKind::kTuple) {
    if (role != ValueRole::kResult) {
      return in.error_at(at, role == ValueRole::kParam ? "a parameter cannot be a tuple; only a result can"
                                                       : "a tuple field cannot be a tuple; a tuple holds tensors");
    }
    if (exe_.minor_version < 4) {
      return in.error_at(at, fmt::format("a tuple result needs version 1.4; the file declares 1.{}",
                                         exe_.minor_version));
    }
  }
  if (role == ValueRole::kField && out.kind != ValueKind::kTensor) {
    return in.error_at(at, fmt::format("a tuple field of kind {} is not a tensor; a tuple holds tensors", kind));
  }
  STOWAGE_TRY(read_dtype(in, out.dtype));
  STOWAGE_TRY(read_reserved16(in));
  at = in.offset();
  STOWAGE_TRY(read_shape(in, out.shape, /*non_negative=*/true, kMaxShapeRank));
  if (out.kind != ValueKind::kTensor && !out.shape.empty()) {
    return in.error_at(at, fmt::format("a non-tensor value has a shape of rank {}", out.shape.size()));
  }
  if (out.kind == ValueKind::kTuple) return read_tuple_fields(in, out);
  return Status::ok();
}

// u32 n, then n tensor values; ret_tuple returns one register per field.
Status Reader::read_tuple_fields(SectionCursor& in, ValueDesc& out) {
  uint64_t at = in.offset();
  uint32_t count = 0;
  STOWAGE_TRY(in.read(count, "tuple field count"));
  if (count == 0) return in.error_at(at, "a tuple result has no fields");
  STOWAGE_TRY(in.check_count(at, count, kMaxTupleFields, 12, "tuple field count"));
  out.fields.resize(count);
  for (ValueDesc& field : out.fields) STOWAGE_TRY(read_value_desc(in, field, ValueRole::kField));
  return Status::ok();
}

Status Reader::read_functions() {
  SectionCursor in = cursor(SectionKind::kFunctions);
  uint64_t count = 0;
  STOWAGE_TRY(in.read_count(count, kMaxFunctions, 32, "function count"));
  exe_.functions.resize(count);
  code_ranges_.resize(count);
  std::vector<uint64_t> range_offsets(count);
  std::set<std::string_view> names;
  for (uint64_t i = 0; i < count; ++i) {
    Function& fn = exe_.functions[i];
    in.set_context(fmt::format("function {}", i));
    uint64_t at = in.offset();
    STOWAGE_TRY(read_name(in, fn.name, "function name", /*allow_empty=*/false));
    if (!names.insert(fn.name).second) return in.error_at(at, fmt::format("function name '{}' is used twice", fn.name));
    in.set_context(fmt::format("function {} '{}'", i, fn.name));
    STOWAGE_TRY(read_function_frame(in, fn));
    range_offsets[i] = in.offset();
    STOWAGE_TRY(read_code_range(in, code_ranges_[i]));
  }
  in.set_context("");
  STOWAGE_TRY(in.expect_end());
  return check_code_ranges_disjoint(range_offsets);
}

// Parameters, result and register count.
Status Reader::read_function_frame(SectionCursor& in, Function& fn) {
  uint64_t at = in.offset();
  uint32_t params = 0;
  STOWAGE_TRY(in.read(params, "parameter count"));
  STOWAGE_TRY(in.check_count(at, params, kMaxFunctionParams, 12, "parameter count"));
  fn.params.resize(params);
  for (ValueDesc& param : fn.params) STOWAGE_TRY(read_value_desc(in, param, ValueRole::kParam));
  STOWAGE_TRY(read_value_desc(in, fn.result, ValueRole::kResult));
  at = in.offset();
  STOWAGE_TRY(in.read(fn.num_registers, "register count"));
  if (fn.num_registers > kMaxRegisters) {
    return in.error_at(at, fmt::format("{} registers exceed the limit {}", fn.num_registers, kMaxRegisters));
  }
  if (fn.num_registers < params) {
    return in.error_at(at, fmt::format("{} registers cannot hold its {} parameters", fn.num_registers, params));
  }
  return Status::ok();
}

Status Reader::read_code_range(SectionCursor& in, CodeRange& range) {
  const uint64_t code_words = code_words_.size();
  uint64_t at = in.offset();
  STOWAGE_TRY(in.read(range.first_word, "first code word"));
  STOWAGE_TRY(in.read(range.num_words, "code word count"));
  if (range.num_words == 0) return in.error_at(at, "the function has no code");
  if (!(range.num_words <= code_words && range.first_word <= code_words - range.num_words)) {
    return in.error_at(at, fmt::format("code words [{}, +{}) lie outside the code section ({} words)", range.first_word,
                                       range.num_words, code_words));
  }
  return Status::ok();
}

// `offsets[i]` is where function i's range was declared, for errors.
Status Reader::check_code_ranges_disjoint(const std::vector<uint64_t>& offsets) const {
  std::vector<size_t> order(code_ranges_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return code_ranges_[a].first_word < code_ranges_[b].first_word; });
  for (size_t i = 1; i < order.size(); ++i) {
    const CodeRange& prev = code_ranges_[order[i - 1]];
    const CodeRange& next = code_ranges_[order[i]];
    if (next.first_word < uint64_t{prev.first_word} + prev.num_words) {
      return file_error("section 'functions'", offsets[order[i]],
                        fmt::format("code words [{}, +{}) overlap another function's [{}, +{})", next.first_word,
                                    next.num_words, prev.first_word, prev.num_words));
    }
  }
  return Status::ok();
}

Status Reader::read_code_words() {
  const Section& s = *layout_.section(SectionKind::kCode);
  if (s.size % 4 != 0) {
    return file_error("section 'code'", s.offset, fmt::format("size {} is not a multiple of 4", s.size));
  }
  code_words_.resize(s.size / 4);  // bounded by the file's size
  for (size_t i = 0; i < code_words_.size(); ++i) {
    code_words_[i] = load_le<uint32_t>(file_.data() + s.offset + 4 * i);
  }
  return Status::ok();
}

Status Reader::validate_code() {
  const Section& s = *layout_.section(SectionKind::kCode);
  return decode_and_validate_code(exe_, CodeSection{code_words_, s.offset}, code_ranges_);
}

Status Reader::read_debug() {
  const std::optional<Section>& s = layout_.section(SectionKind::kDebug);
  if (!s) return Status::ok();
  if (s->size > kMaxDebugTextLength) {
    return file_error("section 'debug'", s->offset,
                      fmt::format("{} bytes exceed the limit {}", s->size, kMaxDebugTextLength));
  }
  auto bytes = file_.subspan(s->offset, s->size);
  exe_.debug_text.assign(bytes.begin(), bytes.end());
  return Status::ok();
}

// start <= end <= steps.
Status Reader::read_span(SectionCursor& in, uint64_t steps, uint64_t& start, uint64_t& end) {
  uint64_t at = in.offset();
  STOWAGE_TRY(in.read(start, "start"));
  STOWAGE_TRY(in.read(end, "end"));
  if (!(start <= end && end <= steps)) {
    return in.error_at(at, fmt::format("lifetime [{}, {}) is not within the function's {} steps", start, end, steps));
  }
  return Status::ok();
}

Status Reader::read_layout_storage(SectionCursor& in, uint64_t steps, LayoutStorage& out, uint64_t& entries) {
  STOWAGE_TRY(read_name(in, out.name, "storage name", /*allow_empty=*/false));
  STOWAGE_TRY(in.read(out.nbytes, "storage size"));
  STOWAGE_TRY(read_span(in, steps, out.start, out.end));
  uint64_t at = in.offset();
  uint32_t count = 0;
  STOWAGE_TRY(in.read(count, "tensor count"));
  STOWAGE_TRY(in.check_count(at, count, kMaxLayoutEntries - entries, 36, "tensor count"));
  entries += count;
  out.tensors.resize(count);
  for (LayoutTensor& t : out.tensors) {
    STOWAGE_TRY(read_name(in, t.name, "tensor name", /*allow_empty=*/false));
    at = in.offset();
    STOWAGE_TRY(in.read(t.offset, "tensor offset"));
    STOWAGE_TRY(in.read(t.nbytes, "tensor size"));
    if (!(t.nbytes <= out.nbytes && t.offset <= out.nbytes - t.nbytes)) {
      return in.error_at(at, fmt::format("tensor '{}': {} bytes at offset {} do not fit storage '{}' of {} bytes",
                                         t.name, t.nbytes, t.offset, out.name, out.nbytes));
    }
    STOWAGE_TRY(read_span(in, steps, t.start, t.end));
  }
  return Status::ok();
}

Status Reader::read_function_layout(SectionCursor& in, FunctionLayout& out, uint64_t& entries) {
  uint64_t at = in.offset();
  STOWAGE_TRY(read_name(in, out.function, "function name", /*allow_empty=*/false));
  if (exe_.find_function(out.function) < 0) {
    return in.error_at(at, fmt::format("'{}' is not a function of the file", out.function));
  }
  in.set_context(fmt::format("layout of '{}'", out.function));
  STOWAGE_TRY(in.read(out.steps, "step count"));
  at = in.offset();
  uint32_t scopes = 0;
  STOWAGE_TRY(in.read(scopes, "scope count"));
  STOWAGE_TRY(in.check_count(at, scopes, kMaxScopes, 16, "scope count"));
  out.scopes.resize(scopes);
  for (LayoutScope& scope : out.scopes) {
    STOWAGE_TRY(read_name(in, scope.scope, "scope name", /*allow_empty=*/false));
    const uint64_t bound_at = in.offset();
    STOWAGE_TRY(in.read(scope.lower_bound, "lower bound"));
    at = in.offset();
    uint32_t storages = 0;
    STOWAGE_TRY(in.read(storages, "storage count"));
    STOWAGE_TRY(in.check_count(at, storages, kMaxLayoutEntries - entries, 32, "storage count"));
    entries += storages;
    scope.storages.resize(storages);
    std::optional<uint64_t> storage_bytes = 0, tensor_bytes = 0;
    for (LayoutStorage& storage : scope.storages) {
      at = in.offset();
      STOWAGE_TRY(read_layout_storage(in, out.steps, storage, entries));
      storage_bytes = storage_bytes ? checked_add(*storage_bytes, storage.nbytes) : std::nullopt;
      for (const LayoutTensor& t : storage.tensors) {
        tensor_bytes = tensor_bytes ? checked_add(*tensor_bytes, t.nbytes) : std::nullopt;
      }
      if (!storage_bytes || !tensor_bytes) {
        return in.error_at(at, fmt::format("scope '{}': its storages' or tensors' bytes overflow 64 bits", scope.scope));
      }
    }
    if (scope.lower_bound > *tensor_bytes) {
      return in.error_at(bound_at, fmt::format("scope '{}': lower bound {} exceeds its {} tensor bytes", scope.scope,
                                               scope.lower_bound, *tensor_bytes));
    }
  }
  return Status::ok();
}

Status Reader::read_memory_layout() {
  if (!layout_.section(SectionKind::kMemoryLayout)) return Status::ok();
  SectionCursor in = cursor(SectionKind::kMemoryLayout);
  uint64_t at = in.offset();
  uint32_t count = 0;
  STOWAGE_TRY(in.read(count, "function count"));
  STOWAGE_TRY(in.check_count(at, count, exe_.functions.size(), 16, "function count"));
  exe_.memory_layouts.resize(count);
  std::set<std::string_view> seen;
  uint64_t entries = 0;  // storages and tensors so far
  for (uint32_t i = 0; i < count; ++i) {
    in.set_context(fmt::format("layout {}", i));
    at = in.offset();
    STOWAGE_TRY(read_function_layout(in, exe_.memory_layouts[i], entries));
    if (!seen.insert(exe_.memory_layouts[i].function).second) {
      in.set_context("");
      return in.error_at(at, fmt::format("function '{}' has two layouts", exe_.memory_layouts[i].function));
    }
  }
  in.set_context("");
  return in.expect_end();
}

Status Reader::read_origins() {
  if (!layout_.section(SectionKind::kOrigins)) return Status::ok();
  SectionCursor in = cursor(SectionKind::kOrigins);
  uint64_t at = in.offset();
  uint32_t count = 0;
  STOWAGE_TRY(in.read(count, "function count"));
  STOWAGE_TRY(in.check_count(at, count, exe_.functions.size(), 8, "function count"));
  exe_.origins.resize(count);
  std::set<std::string_view> seen;
  uint64_t entries = 0;
  for (uint32_t i = 0; i < count; ++i) {
    FunctionOrigins& f = exe_.origins[i];
    in.set_context(fmt::format("origins {}", i));
    at = in.offset();
    STOWAGE_TRY(read_name(in, f.function, "function name", /*allow_empty=*/false));
    const int64_t index = exe_.find_function(f.function);
    if (index < 0) return in.error_at(at, fmt::format("'{}' is not a function of the file", f.function));
    if (!seen.insert(f.function).second) return in.error_at(at, fmt::format("function '{}' has two", f.function));
    in.set_context(fmt::format("origins of '{}'", f.function));
    const uint64_t code_size = exe_.functions[static_cast<size_t>(index)].code.size();
    at = in.offset();
    uint32_t sites = 0;
    STOWAGE_TRY(in.read(sites, "site count"));
    STOWAGE_TRY(in.check_count(at, sites, std::min<uint64_t>(code_size, kMaxOriginEntries - entries), 8, "site count"));
    entries += sites;
    f.sites.resize(sites);
    for (uint32_t s = 0; s < sites; ++s) {
      SiteOrigin& site = f.sites[s];
      at = in.offset();
      STOWAGE_TRY(in.read(site.pc, "instruction index"));
      if (site.pc >= code_size || (s > 0 && site.pc <= f.sites[s - 1].pc)) {
        return in.error_at(at, fmt::format("instruction index {} is not below {} and above the previous site's",
                                           site.pc, code_size));
      }
      at = in.offset();
      uint32_t nodes = 0;
      STOWAGE_TRY(in.read(nodes, "node count"));
      if (nodes == 0) return in.error_at(at, fmt::format("instruction {} has no node", site.pc));
      STOWAGE_TRY(in.check_count(at, nodes, kMaxOriginEntries - entries, 8, "node count"));
      entries += nodes;
      site.nodes.resize(nodes);
      for (NodeOrigin& n : site.nodes) {
        STOWAGE_TRY(read_name(in, n.op, "op name", /*allow_empty=*/false));
        STOWAGE_TRY(read_name(in, n.node, "node name", /*allow_empty=*/true));
      }
    }
  }
  in.set_context("");
  return in.expect_end();
}

Status Reader::read_memory_plan() {
  if (!layout_.section(SectionKind::kMemoryPlan)) return Status::ok();
  SectionCursor in = cursor(SectionKind::kMemoryPlan);
  uint64_t at = in.offset();
  uint32_t count = 0;
  STOWAGE_TRY(in.read(count, "plan count"));
  STOWAGE_TRY(in.check_count(at, count, exe_.functions.size() * kMaxScopes, 90, "plan count"));
  exe_.memory_plans.resize(count);
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (uint32_t i = 0; i < count; ++i) {
    ScopePlan& p = exe_.memory_plans[i];
    in.set_context(fmt::format("plan {}", i));
    at = in.offset();
    STOWAGE_TRY(read_name(in, p.function, "function name", /*allow_empty=*/false));
    if (exe_.find_function(p.function) < 0) {
      return in.error_at(at, fmt::format("'{}' is not a function of the file", p.function));
    }
    STOWAGE_TRY(read_name(in, p.scope, "scope name", /*allow_empty=*/false));
    if (!seen.insert({p.function, p.scope}).second) {
      return in.error_at(at, fmt::format("function '{}' has two plans for scope '{}'", p.function, p.scope));
    }
    in.set_context(fmt::format("plan of '{}', scope '{}'", p.function, p.scope));
    const uint64_t figures_at = in.offset();
    for (auto [field, what] : {std::pair{&p.tensors, "tensor count"}, {&p.planned_bytes, "planned bytes"},
                               {&p.lower_bound, "lower bound"}, {&p.naive_bytes, "naive bytes"},
                               {&p.reuse_only_bytes, "reuse-only bytes"}, {&p.spilled, "spilled count"},
                               {&p.spilled_bytes, "spilled bytes"}, {&p.discontiguous, "discontiguous count"},
                               {&p.blocks, "block count"}}) {
      STOWAGE_TRY(in.read(*field, what));
    }
    const uint64_t seconds_at = in.offset();
    uint64_t bits = 0;
    STOWAGE_TRY(in.read(bits, "seconds"));
    p.seconds = std::bit_cast<double>(bits);
    if (!std::isfinite(p.seconds) || p.seconds < 0) {
      return in.error_at(seconds_at, fmt::format("planning time {} is not a finite number of seconds", p.seconds));
    }
    if (p.lower_bound > p.naive_bytes || p.spilled > p.tensors || p.spilled_bytes > p.naive_bytes) {
      return in.error_at(figures_at, fmt::format("lower bound {}, spilled {} of {} tensors and spilled bytes {} do not "
                                                 "fit its {} naive bytes",
                                                 p.lower_bound, p.spilled, p.tensors, p.spilled_bytes, p.naive_bytes));
    }
  }
  in.set_context("");
  return in.expect_end();
}

Expected<Executable> Reader::read() {
  for (Status (Reader::*step)() : {&Reader::read_layout, &Reader::read_strings, &Reader::read_constants,
                                   &Reader::read_kernels, &Reader::read_requirements, &Reader::read_tensor_constants,
                                   &Reader::read_code_words,
                                   &Reader::read_functions, &Reader::validate_code, &Reader::read_debug,
                                   &Reader::read_memory_layout, &Reader::read_memory_plan,
                                   &Reader::read_origins}) {
    if (Status s = (this->*step)(); !s) return s.error();
  }
  return std::move(exe_);
}

}  // namespace
}  // namespace bytecode

Expected<Executable> read_bytecode(std::span<const uint8_t> bytes) {
  return bytecode::Reader(bytes, bytecode::ConstantBytes::kCopy).read();
}

Status validate_bytecode(std::span<const uint8_t> bytes) {
  auto exe = bytecode::Reader(bytes, bytecode::ConstantBytes::kBorrow).read();
  if (!exe) return exe.error();
  return Status::ok();
}

Expected<Executable> read_bytecode_file(const std::string& path) {
  auto file = bytecode::MappedFile::open(path);
  if (!file) return file.error();
  std::span<const uint8_t> bytes = (*file)->bytes();
  // The constants stay where they lie in the mapping, which they keep alive.
  return bytecode::Reader(bytes, bytecode::ConstantBytes::kMapped, *file).read();
}

}  // namespace stowage
