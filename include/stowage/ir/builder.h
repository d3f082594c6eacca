// Builds IR modules from C++ (and, through the bindings, from Python), one op at
// a time, refusing misuse at once: every method checks its operands before it
// records anything and throws StowageError (kind kVerify, or kInvalidInput for
// kernel source errors) whose message names the op and the argument, e.g.
//   alloc_tensor: argument 'storage': 'x' is a Tensor, not a Storage
//   copy_tensor: argument 'src': 'a' was killed by kill_object
// A failed call leaves the builder as it was.
//
// What is checked here: names (valid, not reserved, not defined twice), that
// operands are defined and not killed, the operand types each op takes, shapes
// and dtypes of copies, known kernels and functions, call arity and argument
// types. What is left to the verifier: offsets, sizes against storages, overlap,
// alignment, scopes against a target, and call_kernel against kernel signatures.
//
//   ModuleBuilder mb;
//   mb.add_kernels("ops", source);                    // reads the kernels at once
//   FunctionBuilder fb = mb.function("main");
//   std::string x = fb.param("x", Type::tensor({4, 64}, DType::kInt32));
//   std::string vtcm = fb.alloc_storage({4096}, 0, DType::kUInt8, "global.vtcm");
//   ...
//   mb.add_function(fb.ret(e));
//   Module m = mb.module();
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/ir/ir.h"

namespace stowage::ir {

class FunctionBuilder {
 public:
  // A builder that knows no module: `call` finds no function, and kernel names
  // are only checked to be C identifiers. ModuleBuilder::function gives one
  // that sees its module. Throws when `name` is not a valid name.
  explicit FunctionBuilder(std::string name);

  // Each method below returns the name of the variable it defines. An empty
  // `name` asks for a fresh one (t0, t1, ... skipping names in use).

  // Parameters come before the first binding.
  std::string param(std::string name, Type type);
  // `size` is [nbytes] for 1D scopes or [height, width] for texture scopes.
  std::string alloc_storage(std::vector<int64_t> size, int64_t device, DType dtype, std::string scope,
                            std::string name = "");
  std::string alloc_tensor(const std::string& storage, int64_t offset, std::vector<int64_t> shape, DType dtype,
                           std::string name = "");
  // A tensor in an image storage with its top-left pixel at `offset` (column x, row y).
  std::string alloc_tensor(const std::string& storage, ImageOffset offset, std::vector<int64_t> shape, DType dtype,
                           std::string name = "");
  // A tensor of blocks anywhere in `data_storage`, found through tables in
  // `table_storage` (docs/discontiguous.md): one table offset for rank 2, one per
  // table breadth-first for rank N; one data offset per block.
  std::string alloc_discontiguous_tensor(const std::string& table_storage, std::vector<int64_t> table_offsets,
                                         const std::string& data_storage, std::vector<int64_t> data_offsets,
                                         std::vector<int64_t> shape, DType dtype, std::string name = "");
  // A tensor sharing bytes [offset, offset + nbytes(shape, dtype)) of `tensor` (no
  // copy): a reshape, or a slice that a producer writes straight into.
  std::string view(const std::string& tensor, int64_t offset, std::vector<int64_t> shape, DType dtype,
                   std::string name = "");
  void kill_object(const std::string& var);
  void copy_tensor(const std::string& src, const std::string& dst);
  // `args` are tensors or int/float/bool variables, or literals; `grid` has 1 to
  // 3 positive extents; `local` is empty (the driver chooses) or like `grid`.
  void call_kernel(const std::string& kernel, std::vector<Arg> args, std::vector<int64_t> grid,
                   std::vector<int64_t> local = {});
  std::string empty(std::vector<int64_t> shape, DType dtype, std::string scope = "global", std::string name = "");
  // A discontiguous tensor the planner places block by block (the last extent is the block).
  std::string empty_discontiguous(std::vector<int64_t> shape, DType dtype, std::string scope = "global",
                                  std::string table_scope = "global", std::string name = "");
  // Calls a function already added to the module; the result has its return type.
  std::string call(const std::string& function, std::vector<Arg> args, std::string name = "");
  // Finishes the function, returning `var`; its type is the return type. The
  // builder takes no further ops.
  Function ret(const std::string& var);
  // Finishes the function, returning the tuple of `vars` (`return (a, b)`): each a
  // tensor, defined, not killed, not a constant, none named twice; the return type
  // is Tuple[their types]. One name gives a tuple of one (`return (a,)`); note that
  // `ret({a})` picks the single form above.
  Function ret(const std::vector<std::string>& vars);

  // The model nodes the bindings recorded from now on compute (a front end sets
  // them per node or fused group); empty for none.
  void set_origins(std::vector<NodeOrigin> origins) { origins_ = std::move(origins); }

  // The type of a defined variable (killed or not); throws for an unknown name.
  const Type& type_of(const std::string& var) const;
  const std::string& name() const { return function_.name; }

 private:
  friend class ModuleBuilder;
  FunctionBuilder(std::string name, std::shared_ptr<const Module> module);

  struct Var {
    Type type;
    bool killed = false;
    bool constant = false;  // a module constant: read-only, never killed
  };

  [[noreturn]] void fail(std::string_view op, std::string_view message) const;
  void check_open(std::string_view op) const;
  const Var& use(std::string_view op, std::string_view arg, const std::string& var) const;
  // A variable of the function or a constant of the module; null when neither.
  const Var* find(const std::string& var) const;
  // Fails when `var` names a constant: `what` says what cannot be done to it.
  void refuse_constant(std::string_view op, std::string_view arg, const std::string& var, std::string_view what) const;
  const Type& use_of_kind(std::string_view op, std::string_view arg, const std::string& var, Type::Kind kind) const;
  void check_extents(std::string_view op, std::string_view arg, const std::vector<int64_t>& extents) const;
  std::string add_alloc_tensor(const std::string& storage, int64_t offset, ImageOffset image_offset,
                               std::vector<int64_t> shape, DType dtype, std::string name);
  void check_scope(std::string_view op, const std::string& scope) const;
  void check_kernel_arg(size_t index, const Arg& arg) const;
  void check_call_arg(const Function& callee, size_t index, const Arg& arg) const;
  void check_grid(const std::vector<int64_t>& grid, const std::vector<int64_t>& local) const;
  // Checks or invents the result's name; call before defining.
  std::string result_name(std::string_view op, std::string name);
  std::string define(std::string name, Type type);
  void add(Binding binding);

  Function function_;
  std::map<std::string, Var, std::less<>> vars_;
  mutable std::map<std::string, Var, std::less<>> constants_;  // the module's, as this function meets them
  std::shared_ptr<const Module> module_;  // null when the builder knows no module
  uint64_t next_fresh_ = 0;
  std::vector<NodeOrigin> origins_;
  bool finished_ = false;
};

// A module under construction. Function builders made by `function` see the
// module's kernels and functions as they are when each op is added.
class ModuleBuilder {
 public:
  ModuleBuilder();
  // Copies are independent modules.
  ModuleBuilder(const ModuleBuilder& other);
  ModuleBuilder& operator=(const ModuleBuilder& other);

  // Adds a unit of OpenCL C source and reads its kernels' signatures at once:
  // a source error, a kernel already defined in another unit, a unit name in
  // use, or a source containing """ (which the text form could not hold) throws.
  void add_kernels(std::string unit_name, std::string source);
  FunctionBuilder function(std::string name) const;
  // Adds a finished function; its name must not be in use.
  void add_function(Function function);
  // Adds a constant tensor of `type` holding `data` (row-major, little-endian, as
  // many bytes as the type has) in `scope`, and returns its name (`name`, or a fresh
  // one: c0, c1, ...). Functions read it by name.
  std::string add_constant(std::string name, Type type, std::shared_ptr<const std::vector<std::byte>> data,
                           std::string scope = "global");
  // The module; throws if a function calls a kernel that no unit defines.
  Module module() const;

 private:
  std::shared_ptr<Module> module_;
};

}  // namespace stowage::ir
