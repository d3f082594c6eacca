// The text form of the IR (see docs/ir.md). print_module's output parses back to an
// equal module for every module that passes the verifier.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stowage/ir/ir.h"

namespace stowage::ir {

struct PrintOptions {
  // Constants of more bytes than this print `= external`: their data travels beside
  // the text (a sidecar file, or the bytecode's constant sections). Others print
  // their data: a list of numbers when small, else base64.
  uint64_t external_above_bytes = UINT64_MAX;
};

std::string print_module(const Module& module, const PrintOptions& options = {});
// `const w: Tensor[(2,), float32] = [1.0, 2.0], scope="global"`, without newline.
std::string print_constant(const ConstantTensor& constant, const PrintOptions& options = {});
std::string print_function(const Function& function);
// One line without indentation or newline, e.g. `a = alloc_tensor(s, 0, [4], int32)`;
// error messages quote bindings this way. An alloc_tensor's image offset prints as
// [y, x] when it is not [0, 0]; print_function prints it for every tensor in a
// storage the function allocates as an image ([height, width]), [0, 0] included.
std::string print_binding(const Binding& binding);
std::string print_type(const Type& type);
// What `return` names: `a`, or a tuple `(a, b)` (one field: `(a,)`); error messages
// quote returns as `return` followed by this.
std::string print_returned(const Function& function);
// The text form of a call argument: `x`, `-2`, `2.5`, `inf`, `nan`.
std::string print_arg(const Arg& arg);
// A shape as a list: `[4, 64]`.
std::string print_shape_list(const std::vector<int64_t>& shape);

// Kernel source sits between `"""` delimiters, so a source holding `"""` cannot be
// written; builders reject such sources with this test.
bool kernel_source_is_printable(std::string_view source);

}  // namespace stowage::ir
