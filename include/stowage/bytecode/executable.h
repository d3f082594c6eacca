// The in-memory form of a compiled program: what the code generator produces, what
// the bytecode writer serialises and what the validating reader rebuilds. Every
// index inside it has been checked by the reader before the VM sees it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stowage/support/dtype.h"
#include "stowage/bytecode/isa.h"
#include "stowage/bytecode/kernel_signature.h"
#include "stowage/bytecode/memory_layout.h"
#include "stowage/bytecode/origins.h"

namespace stowage {

// The numeric values are part of the bytecode format: never renumber.
enum class ConstantKind : uint8_t {
  kShape = 0,  // a list of int64 extents (sizes, shapes, grids)
  kInt = 1,    // an integer scalar of `dtype`
  kFloat = 2,  // a floating-point scalar of `dtype`
};

struct Constant {
  ConstantKind kind = ConstantKind::kShape;
  DType dtype = DType::kInt64;  // scalars: the scalar's type
  std::vector<int64_t> shape;   // kShape
  int64_t int_value = 0;        // kInt
  double float_value = 0.0;     // kFloat
  friend bool operator==(const Constant&, const Constant&) = default;
};

// OpenCL C source of one kernel unit, as the module carried it.
struct KernelUnit {
  std::string name;
  std::string source;
  friend bool operator==(const KernelUnit&, const KernelUnit&) = default;
};

// The numeric values are part of the bytecode format: never renumber.
// kTuple (version 1.4) describes only a function's result: a tuple of tensors.
enum class ValueKind : uint8_t { kTensor = 0, kInt = 1, kFloat = 2, kBool = 3, kOther = 4, kTuple = 5 };

// A function parameter or result as the caller must supply or will receive it.
struct ValueDesc {
  std::string name;
  ValueKind kind = ValueKind::kTensor;
  DType dtype = DType::kFloat32;  // tensors
  std::vector<int64_t> shape;     // tensors
  std::vector<ValueDesc> fields;  // kTuple: one tensor per field, named as the IR returned them
  friend bool operator==(const ValueDesc&, const ValueDesc&) = default;
};

struct Function {
  std::string name;
  std::vector<ValueDesc> params;  // parameters occupy registers 0 .. params.size()-1
  ValueDesc result;
  uint32_t num_registers = 0;
  std::vector<Instruction> code;
  friend bool operator==(const Function&, const Function&) = default;
};

// Memory kind of a scope; the numeric values are part of the bytecode format.
enum class ScopeKind : uint8_t { kBuffer = 0, kImage2d = 1 };

// How an image scope maps a tensor [A, B, C, D, 4] (missing leading extents count
// as 1) to an image of RGBA pixels. The numeric values are part of the format.
enum class ImageLayout : uint8_t {
  kNone = 0,        // buffer scopes
  kActivation = 1,  // height A*B*C, width D
  kWeight = 2,      // height A, width B*C*D
  kNhwc = 3,        // height A*B, width C*D
};

struct ImageExtent {
  uint64_t height = 0;
  uint64_t width = 0;
  friend bool operator==(const ImageExtent&, const ImageExtent&) = default;
};

// Where a tensor's rectangle starts inside its image storage, in pixels: column
// x, row y. Written [y, x] in the text form, like sizes [height, width].
struct ImageOffset {
  uint64_t x = 0;
  uint64_t y = 0;
  friend bool operator==(const ImageOffset&, const ImageOffset&) = default;
};

// The image extent of a tensor of `shape` in `layout`; nullopt when the last
// extent is not 4, the rank exceeds 5, or the extent overflows.
std::optional<ImageExtent> image_extent(std::span<const int64_t> shape, ImageLayout layout);

// Bytes owned elsewhere: a compiled module's constant, or a range of a
// memory-mapped bytecode file. `owner` keeps them alive; equality compares bytes.
class ByteView {
 public:
  ByteView() = default;
  ByteView(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes)
      : owner_(std::move(owner)), bytes_(bytes) {}
  // A view owning a copy of `bytes`.
  static ByteView copy_of(std::span<const uint8_t> bytes);

  std::span<const uint8_t> bytes() const { return bytes_; }
  const uint8_t* data() const { return bytes_.data(); }
  uint64_t size() const { return bytes_.size(); }
  friend bool operator==(const ByteView& a, const ByteView& b);

 private:
  std::shared_ptr<const void> owner_;
  std::span<const uint8_t> bytes_;
};

// Initial contents of part of a constant storage: `bytes` from byte `offset`.
struct DataSegment {
  uint64_t offset = 0;
  ByteView bytes;
  friend bool operator==(const DataSegment&, const DataSegment&) = default;
};

// A storage holding constants (weights), made and filled once per VM: a buffer of
// `nbytes`, or an RGBA image of `image` pixels of `pixel_dtype` whose `nbytes` are
// height x width x 4 x the pixel's size. Bytes no segment covers are zero in the
// file and undefined on the device (no constant lies there).
struct ConstantStorage {
  std::string scope;
  ScopeKind kind = ScopeKind::kBuffer;
  DType pixel_dtype = DType::kUInt8;  // image2d: float32 or float16
  uint64_t nbytes = 0;
  ImageExtent image;                  // image2d
  std::vector<DataSegment> segments;  // sorted by offset, disjoint, inside nbytes
  // Equal when they describe the same storage with the same bytes, however the
  // bytes are cut into segments.
  friend bool operator==(const ConstantStorage& a, const ConstantStorage& b);
};

// A named constant tensor: its bytes lie in constant storage `storage` from byte
// `offset` (0 in an image, whose pixels it covers from the origin).
struct TensorConstant {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint32_t storage = 0;
  uint64_t offset = 0;
  friend bool operator==(const TensorConstant&, const TensorConstant&) = default;
};

// What the executable needs of one memory scope on the device.
struct ScopeRequirement {
  std::string scope;             // e.g. "global", "global.vtcm"
  ScopeKind kind = ScopeKind::kBuffer;
  bool onchip = false;           // capacity-limited on-chip memory
  uint64_t capacity = 0;         // onchip: the capacity the program was planned for
  uint64_t max_storage_bytes = 0;// largest single storage the program allocates here
  // Every tensor offset in this scope is a multiple of this (a power of two): the
  // device's sub-buffer alignment must divide it.
  uint64_t offset_alignment = 0;
  // Image scopes: the layout and the largest storage extent, in pixels.
  ImageLayout layout = ImageLayout::kNone;
  uint64_t max_image_width = 0;
  uint64_t max_image_height = 0;
  friend bool operator==(const ScopeRequirement&, const ScopeRequirement&) = default;
};

// Feature bits of the header: what a device must support to run the file.
enum FeatureBits : uint64_t {
  kFeatureImages = 1u << 0,   // uses image2d storage or image kernel arguments
  kFeatureFp16 = 1u << 1,     // uses float16 in kernels (cl_khr_fp16)
  kFeatureFp64 = 1u << 2,     // uses float64 in kernels (cl_khr_fp64)
  kKnownFeatures = kFeatureImages | kFeatureFp16 | kFeatureFp64,
};

struct Requirements {
  uint64_t features = 0;
  std::vector<ScopeRequirement> scopes;
  friend bool operator==(const Requirements&, const Requirements&) = default;
};

struct Executable {
  std::vector<std::string> strings;         // referenced by kString operands
  std::vector<Constant> constants;          // referenced by kConst operands
  std::vector<KernelUnit> units;            // kernel sources
  std::vector<KernelSignature> kernels;     // referenced by kKernel operands
  std::vector<Function> functions;          // referenced by kFunc operands
  std::vector<ConstantStorage> constant_storages;
  std::vector<TensorConstant> tensor_constants;  // referenced by kTensorConst operands
  Requirements requirements;
  std::string debug_text;                   // optional: the IR text it was compiled from
  std::vector<FunctionLayout> memory_layouts;  // optional: where its tensors live, for tools
  std::vector<ScopePlan> memory_plans;         // optional: the planner's figures, for tools
  std::vector<FunctionOrigins> origins;        // optional: the model nodes behind instructions
  // The nodes behind instruction `pc` of function `function`; null when none are known.
  const std::vector<NodeOrigin>* origin_of(uint32_t function, uint32_t pc) const;
  // The format's minor version the file declares: at least what its code needs
  // (required_minor_version), so a file re-written keeps its header.
  uint16_t minor_version = 0;
  friend bool operator==(const Executable&, const Executable&) = default;

  // The lowest minor version whose readers know every opcode and section the
  // executable uses.
  uint16_t required_minor_version() const;
  // Index of the function named `name`, or -1.
  int64_t find_function(std::string_view name) const;
};

}  // namespace stowage
