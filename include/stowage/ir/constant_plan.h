// Where a module's constants (weights) live: per memory scope one storage that the
// VM makes and fills once, the buffer scopes' constants back to back in it at
// aligned offsets (all live for the VM's whole life, so their total is the lower
// bound and packing is exact), and in an image scope one image per constant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/bytecode/executable.h"
#include "stowage/bytecode/target.h"
#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::ir {

// Offsets of constants in a buffer storage are multiples of the scope's alignment
// and of this, so that each also lies 64-byte aligned in a bytecode file.
inline constexpr uint64_t kConstantAlignment = 64;

struct ConstantStoragePlan {
  std::string scope;  // as the constants name it
  ScopeKind kind = ScopeKind::kBuffer;
  DType pixel_dtype = DType::kUInt8;  // image2d
  uint64_t nbytes = 0;
  ImageExtent image;                  // image2d
};

struct ConstantSlot {
  size_t constant = 0;  // index into Module::constants
  uint32_t storage = 0;
  uint64_t offset = 0;
};

struct ConstantPlan {
  std::vector<ConstantStoragePlan> storages;
  std::vector<ConstantSlot> slots;  // the constants some function reads, in module order
};

// The module must have passed the verifier. Constants no function reads get no slot.
Expected<ConstantPlan> plan_constants(const Module& module, const TargetDesc& target);

}  // namespace stowage::ir
