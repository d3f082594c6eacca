// Where every tensor of a storage-level function lives over time: the picture
// behind Executable.memory_report and plot_memory, read from the IR as compiled.
//
// Time is the binding index. A tensor occupies bytes [offset, offset + nbytes) of
// its storage from its alloc_tensor until its kill_object, or until the return
// when it is never killed. A texture storage counts its pixels' bytes
// (height x width x 4 x dtype size) and its tensors start at offset 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::python {

struct TensorPlacement {
  std::string name;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t start = 0;  // the alloc_tensor's binding index
  uint64_t end = 0;    // the kill_object's binding index, or the binding count
};

struct StoragePlacement {
  std::string name;
  uint64_t nbytes = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  std::vector<TensorPlacement> tensors;
};

struct ScopeLayout {
  std::string scope;  // as the IR names it
  std::vector<StoragePlacement> storages;
  uint64_t storage_bytes = 0;    // sum of the storages' sizes
  uint64_t tensor_bytes = 0;     // sum of the tensors' sizes: every tensor its own storage
  uint64_t peak_live_bytes = 0;  // most tensor bytes alive at one moment
};

struct FunctionLayout {
  std::string function;
  uint64_t steps = 0;               // binding count: times run over [0, steps]
  std::vector<ScopeLayout> scopes;  // in order of first use
};

// Fails (kInvalidInput) on a size that overflows 64 bits or on a tensor whose
// storage is not an alloc_storage of the function; tensor-level `empty`
// bindings have no place yet and are left out.
// A discontiguous tensor's tables and blocks are pieces of their own, named
// 'T table K' and 'T block K'; its tables take `table_entry_bytes` per entry.
Expected<FunctionLayout> memory_layout(const ir::Function& function, uint32_t table_entry_bytes = 4);

}  // namespace stowage::python
