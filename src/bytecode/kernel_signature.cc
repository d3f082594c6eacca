#include "stowage/bytecode/kernel_signature.h"

namespace stowage {

const char* kernel_param_kind_name(KernelParamKind kind) {
  switch (kind) {
    case KernelParamKind::kGlobalBuffer: return "global buffer";
    case KernelParamKind::kConstantBuffer: return "constant buffer";
    case KernelParamKind::kImage2dRead: return "read_only image2d_t";
    case KernelParamKind::kImage2dWrite: return "write_only image2d_t";
    case KernelParamKind::kLocal: return "local buffer";
    case KernelParamKind::kScalar: return "scalar";
    case KernelParamKind::kImageOffset: return "image offset";
  }
  return "unknown";
}

bool has_image_offset(const KernelSignature& kernel, size_t index) {
  return index + 1 < kernel.params.size() && kernel.params[index].is_image() &&
         kernel.params[index + 1].is_image_offset();
}

size_t listed_param_count(const KernelSignature& kernel) {
  size_t count = 0;
  for (const KernelParam& p : kernel.params) count += p.is_image_offset() ? 0 : 1;
  return count;
}

}  // namespace stowage
