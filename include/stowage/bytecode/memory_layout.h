// Where every tensor of a function lives over time, as the compiler placed it:
// the picture behind the Python package's Executable.memory_layout, memory_report
// and plot_memory. The compiler records it (src/ir/passes/memory_layout.cc) and
// keeps it in the optional `memory layout` section; the VM never reads it.
//
// Time is the binding index of the compiled (storage-level) function. A tensor
// occupies bytes [offset, offset + nbytes) of its storage over [start, end):
// from its alloc_tensor to its kill_object, or to `steps` when never killed. A
// texture storage counts its pixels' bytes (height x width x 4 x pixel size);
// its tensors lie at offset 0. A discontiguous tensor's tables and blocks are
// tensors of their own, named "T table K" and "T block K".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stowage {

struct LayoutTensor {
  std::string name;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  friend bool operator==(const LayoutTensor&, const LayoutTensor&) = default;
};

struct LayoutStorage {
  std::string name;
  uint64_t nbytes = 0;
  uint64_t start = 0;  // its alloc_storage
  uint64_t end = 0;    // its kill_object, or `steps`
  std::vector<LayoutTensor> tensors;
  friend bool operator==(const LayoutStorage&, const LayoutStorage&) = default;
};

struct LayoutScope {
  std::string scope;  // as the IR names it
  std::vector<LayoutStorage> storages;
  // The most bytes of its tensors alive at one moment: no placement of them
  // needs less (peak_live_bytes of stowage/ir/lifetimes.h).
  uint64_t lower_bound = 0;
  friend bool operator==(const LayoutScope&, const LayoutScope&) = default;

  // Sums that a valid layout keeps within 64 bits (the reader checks it).
  uint64_t storage_bytes() const;  // of its storages: what the program allocates here
  uint64_t tensor_bytes() const;   // of its tensors: what every tensor in its own storage would take
};

// The planner's figures for one memory scope of one function it planned, carried in
// the file so that a loaded executable reports what the compiled one did. Buffer
// scopes count bytes; image scopes count their pixels' bytes (height x width x 4 x
// pixel size) throughout.
struct ScopePlan {
  std::string function;
  std::string scope;             // as the program requested it (aliases kept)
  uint64_t tensors = 0;          // tensors planned here
  uint64_t planned_bytes = 0;    // the storages allocated for them
  uint64_t lower_bound = 0;      // the most bytes alive at one moment
  uint64_t naive_bytes = 0;      // every tensor its own storage
  uint64_t reuse_only_bytes = 0; // whole-storage reuse without offsets
  uint64_t spilled = 0;          // tensors moved here from a full on-chip scope
  uint64_t spilled_bytes = 0;
  uint64_t discontiguous = 0;    // discontiguous tensors with blocks here
  uint64_t blocks = 0;
  double seconds = 0;            // planning time
  friend bool operator==(const ScopePlan&, const ScopePlan&) = default;
};

struct FunctionLayout {
  std::string function;
  uint64_t steps = 0;               // binding count: time runs over [0, steps]
  std::vector<LayoutScope> scopes;  // in order of first alloc_storage
  friend bool operator==(const FunctionLayout&, const FunctionLayout&) = default;
};

}  // namespace stowage
