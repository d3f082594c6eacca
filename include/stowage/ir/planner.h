// Static memory planning: tensor-level `empty` / `empty_discontiguous` bindings
// become storage-level `alloc_storage` / `alloc_tensor(offset)` /
// `alloc_discontiguous_tensor` / `kill_object` (src/ir/passes/plan_memory.cc says
// what the pass guarantees and how).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/bytecode/target.h"
#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::ir {

enum class PlanStrategy {
  kPacked,  // one storage per scope, tensors at packed offsets (the default)
  kNaive,   // every tensor its own storage: the reference the packed plan is checked against
};

struct PlanOptions {
  PlanStrategy strategy = PlanStrategy::kPacked;
  // The time the pass may take, all functions together. When it runs out, each
  // scope keeps the best packing found so far; placing blocks past it is an error.
  double time_limit_seconds = 10;
  // A discontiguous tensor's blocks go one by one into free space (the
  // default). false: back to back as one item, as if the tensor were an
  // `empty` of the same bytes; the baseline that shows what splitting gains.
  bool split_discontiguous = true;
};

// What planning did in one memory scope of one function.
struct ScopeReport {
  std::string function;
  std::string scope;           // as requested (aliases kept)
  uint64_t tensors = 0;        // tensors planned here
  uint64_t planned_bytes = 0;  // the storage allocated for them
  uint64_t lower_bound = 0;    // the largest total of bytes live at one moment
  uint64_t naive_bytes = 0;    // every tensor its own storage
  uint64_t reuse_only_bytes = 0;  // whole-storage reuse without offsets (TVM Relax's model)
  uint64_t spilled = 0;        // tensors moved here from a full on-chip scope
  uint64_t spilled_bytes = 0;  // their bytes (for a discontiguous tensor, the part moved)
  // Discontiguous tensors with blocks here, and those blocks. Their tables
  // count as tensors of the tables' scope.
  uint64_t discontiguous = 0;
  uint64_t blocks = 0;
  bool proven_optimal = false;
  double seconds = 0;
  // Texture scopes: images allocated, pixels they hold, pixels if every tensor
  // had its own image.
  uint64_t images = 0;
  uint64_t planned_pixels = 0;
  uint64_t naive_pixels = 0;
};

// The constants (weights) of one memory scope: made once per VM, apart from the
// activations the scopes above report.
struct ConstantReport {
  std::string scope;
  uint64_t tensors = 0;
  uint64_t bytes = 0;          // their own bytes
  uint64_t storage_bytes = 0;  // the storages holding them (alignment padding included)
};

struct MemoryReport {
  std::vector<ScopeReport> scopes;
  std::vector<ConstantReport> constants;
};

// Plans every function that has `empty` bindings, in place. The module must have
// passed the verifier; the result passes it too.
Expected<MemoryReport> plan_memory(Module& module, const TargetDesc& target, const PlanOptions& options = {});

bool has_tensor_level_bindings(const Module& module);

// A table, one row per scope.
std::string format_memory_report(const MemoryReport& report);
// The same as JSON: {"scopes": [{"function": ..., "scope": ..., ...}, ...]}.
std::string memory_report_json(const MemoryReport& report);

}  // namespace stowage::ir
