// The per-function part of the verifier, split by topic over function_verifier.cc
// (names, definitions, kills, types), verify_memory.cc (storages, tensor placement)
// and verify_call_kernel.cc (kernel signatures). Internal to src/ir.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stowage/bytecode/target.h"
#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::ir::verify {

// A broken rule, described without its context (the function and binding), which
// verify_function puts in front of the message.
template <typename... Args>
Error broken_rule(fmt::format_string<Args...> format, Args&&... args) {
  return Error(ErrorKind::kVerify, fmt::format(format, std::forward<Args>(args)...));
}

// " at 9:3", or nothing for a node built in code.
std::string at_loc(SourceLoc loc);

// No extent of `shape` is negative and a tensor of it and `dtype` has fewer than 2^64 bytes.
Status check_tensor_shape(const std::vector<int64_t>& shape, DType dtype);

// A storage made by alloc_storage in this function: its size is known.
struct StorageInfo {
  const ScopeDesc* scope = nullptr;
  uint64_t bytes = 0;   // buffer scopes: the size
  uint64_t height = 0;  // image scopes: the extent in pixels
  uint64_t width = 0;
  DType dtype = DType::kUInt8;
  std::vector<std::string> live_tensors;  // allocated in it and not yet killed
};

// A byte range a tensor occupies in a known storage: the whole tensor, or one table
// or block of a discontiguous tensor.
struct Placement {
  std::string storage;
  uint64_t begin = 0;  // byte range in buffer storages
  uint64_t end = 0;
  bool empty = true;  // no elements: overlaps nothing
};

// What kernels need to know of a discontiguous tensor.
struct DiscontiguousInfo {
  uint32_t entry_bytes = 4;
  uint64_t block_elements = 0;
};

struct VarInfo {
  Type type;
  SourceLoc def_loc;
  bool is_param = false;
  bool is_constant = false;  // a module constant: read-only, never killed
  std::string view_of;       // a view: the tensor whose bytes it shares (never itself a view)
  bool killed = false;
  SourceLoc kill_loc;
  const ScopeDesc* scope = nullptr;     // where the value lives, when known
  std::optional<StorageInfo> storage;   // alloc_storage results
  std::vector<Placement> placements;    // tensors allocated in known storages
  // Tensors in image storages: the storage variable (the tensor itself for an
  // unplanned `empty`, whose image the planner makes) and the top-left pixel.
  std::string image_storage;
  ImageOffset image_offset;
  ImageExtent image_extent;  // the pixels it covers (known for tensors of known storages)
  std::optional<DiscontiguousInfo> discontiguous;
};

class FunctionVerifier {
 public:
  FunctionVerifier(const Module& module, const Function& function, const TargetDesc& target)
      : module_(module), function_(function), target_(target) {}

  // The first broken rule, and the part of the function it is about.
  struct Failure {
    enum class Where { kSignature, kParam, kBinding, kReturn };
    Where where = Where::kSignature;
    std::string message;
    SourceLoc loc;
    size_t binding = 0;  // kBinding: its index
    std::string param;   // kParam: its name
  };
  std::optional<Failure> run();

 private:
  // function_verifier.cc
  std::optional<Failure> check_params();
  Status check_binding(const Binding& b);
  Status check_op(const Binding& b);  // the rules of b's op
  Status check_form(const Binding& b);
  Status check_uses(const Binding& b);
  Status check_use(const std::string& name, bool is_kill);
  Status check_result_is_new(const Binding& b);
  Status check_kill(const Binding& b);
  Status check_copy(const Binding& b);
  Status check_call(const Binding& b);
  Status check_return();
  Status check_returned_var(const std::string& name) const;
  Status check_returned_tuple() const;
  Type result_type(const Binding& b) const;
  Type arg_type(const Arg& arg) const;
  void define_result(const Binding& b);

  // verify_memory.cc
  Status check_alloc_storage(const Binding& b);
  Status check_capacity(const Binding& b, const ScopeDesc& scope, uint64_t bytes);
  Status check_alloc_tensor(const Binding& b);
  Status check_buffer_tensor(const Binding& b, const std::string& storage_name, StorageInfo& storage,
                             uint64_t nbytes, Placement& placement);
  Status check_image_tensor(const Binding& b, const std::string& storage_name, StorageInfo& storage,
                            Placement& placement);
  Status check_empty(const Binding& b);
  Status check_view(const Binding& b);
  Status check_image_view(const Binding& b, const VarInfo& base);
  // A range of `subject` (e.g. "block 2 of tensor 'a'") against the tensors live in `storage`.
  Status check_live_overlap(const std::string& subject, const std::string& storage_name, const StorageInfo& storage,
                            uint64_t begin, uint64_t end) const;

  // verify_discontiguous.cc
  Status check_alloc_discontiguous(const Binding& b);
  Status check_discontiguous_counts(const Binding& b);
  Status check_discontiguous_ranges(const Binding& b, bool tables);
  Status check_empty_discontiguous(const Binding& b);
  Status check_discontiguous_arg(const KernelSignature& kernel, size_t param, const std::string& name);
  Expected<const ScopeDesc*> find_scope(const std::string& name) const;

  // verify_call_kernel.cc
  Status check_call_kernel(const Binding& b);
  Status check_kernel_arg(const KernelSignature& kernel, const KernelParam& param, const Arg& arg, size_t index);
  Status check_tensor_arg(const KernelSignature& kernel, const KernelParam& param, const std::string& name);
  Status check_scalar_arg(const KernelSignature& kernel, const KernelParam& param, const Arg& arg, size_t index);
  Status check_image_offset_arg(const KernelSignature& kernel, size_t param, const std::string& name);
  Status check_image_aliasing(const KernelSignature& kernel, const Binding& b, const std::vector<size_t>& param_of);
  Status check_launch_size(const Binding& b);

  const VarInfo* lookup(const std::string& name) const;
  std::string describe_arg(const Arg& arg, size_t index) const;

  const Module& module_;
  const Function& function_;
  const TargetDesc& target_;
  std::unordered_map<std::string, VarInfo> vars_;
  // Per capacity-limited scope, its storages alive now.
  std::unordered_map<const ScopeDesc*, std::vector<std::string>> live_storages_;
  // What the op's checks learned about the current binding's result (its scope,
  // storage size, placement); define_result completes and records it.
  VarInfo result_info_;
};

}  // namespace stowage::ir::verify
