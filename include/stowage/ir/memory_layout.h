// The memory layout of compiled functions (stowage/bytecode/memory_layout.h says
// what it holds): read from the storage-level IR as the planner and the code
// generator leave it, so hand-placed and planned programs are described alike.
#pragma once

#include <cstdint>

#include "stowage/bytecode/memory_layout.h"
#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::ir {

// The layout of a storage-level function; tensor-level `empty` bindings have no
// place yet and are left out. A discontiguous tensor's tables take
// `table_entry_bytes` per entry. Fails (kInvalidInput) on a size that overflows
// 64 bits or on a tensor whose storage is not an alloc_storage of the function.
Expected<FunctionLayout> memory_layout(const Function& function, uint32_t table_entry_bytes);

}  // namespace stowage::ir
