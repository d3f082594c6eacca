// What a kernel's parameters are, learned from its OpenCL C source by the compiler
// (libclang) and carried in the bytecode, so the runtime can check every launch
// without the compiler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/support/dtype.h"

namespace stowage {

// The numeric values are part of the bytecode format: never renumber.
enum class KernelParamKind : uint8_t {
  kGlobalBuffer = 0,    // __global T* (const or not); element type in `dtype`
  kConstantBuffer = 1,  // __constant T*: read only
  kImage2dRead = 2,     // read_only image2d_t
  kImage2dWrite = 3,    // write_only image2d_t
  kLocal = 4,           // __local T*: sized at launch, no tensor bound
  kScalar = 5,          // a by-value scalar of type `dtype`
  // A stowage_image_offset (int2: int32 x 2 lanes) directly after an image
  // parameter: the (x, y) pixel of that image where the bound tensor starts. The
  // runtime sets it; call_kernel lists no argument for it. Version 1.6.
  kImageOffset = 6,
};
inline constexpr uint8_t kKernelParamKindCount = 7;

struct KernelParam {
  std::string name;
  KernelParamKind kind = KernelParamKind::kGlobalBuffer;
  // Element type for buffers and scalars. Vector element types (float4) are
  // recorded as their scalar type with `lanes` > 1.
  DType dtype = DType::kUInt8;
  uint8_t lanes = 1;
  // For buffers: the pointee is const-qualified, so the kernel only reads it.
  bool is_const = false;

  bool is_buffer() const {
    return kind == KernelParamKind::kGlobalBuffer || kind == KernelParamKind::kConstantBuffer;
  }
  bool is_image() const {
    return kind == KernelParamKind::kImage2dRead || kind == KernelParamKind::kImage2dWrite;
  }
  bool is_image_offset() const { return kind == KernelParamKind::kImageOffset; }
  // The kernel may write what is bound here.
  bool writes() const {
    return (kind == KernelParamKind::kGlobalBuffer && !is_const) ||
           kind == KernelParamKind::kImage2dWrite;
  }
  friend bool operator==(const KernelParam&, const KernelParam&) = default;
};

struct KernelSignature {
  std::string name;   // the __kernel function's name
  uint32_t unit = 0;  // index of the source unit that defines it
  std::vector<KernelParam> params;
  friend bool operator==(const KernelSignature&, const KernelSignature&) = default;
};

const char* kernel_param_kind_name(KernelParamKind kind);

// Whether image parameter `index` is followed by its image offset parameter.
bool has_image_offset(const KernelSignature& kernel, size_t index);
// Parameters a call lists arguments for: all but the image offsets.
size_t listed_param_count(const KernelSignature& kernel);

}  // namespace stowage
