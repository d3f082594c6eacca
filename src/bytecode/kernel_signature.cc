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
  }
  return "unknown";
}

}  // namespace stowage
