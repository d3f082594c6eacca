// Checks that a module obeys the rules of the IR (docs/ir.md, "Verifier rules"):
// names, definitions and kills, types per op, storage bounds, alignment, on-chip
// capacity, overlap of live tensors, image layouts and kernel signatures.
#pragma once

#include "stowage/ir/names.h"

#include <string_view>

#include "stowage/bytecode/target.h"
#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::ir {

// Expects each kernel unit's `signatures` to be filled already. Returns the first
// broken rule (kind kVerify) as
//   [FILE:][LINE:COL: ]error: function 'F', binding 'B': MESSAGE
// where FILE is `file_name` when given and LINE:COL is left out for nodes built in code.
Status verify_module(const Module& module, const TargetDesc& target, std::string_view file_name = {});

// The function-level rules for one function of `module` (callees and kernels are
// looked up in `module`).
Status verify_function(const Module& module, const Function& function, const TargetDesc& target,
                       std::string_view file_name = {});

// True for names the text form can write as variables: identifiers that are not
// reserved words (names.h).
bool is_valid_variable_name(std::string_view name);
// alloc_storage, alloc_tensor, empty and call bind a result; the other ops do not.
bool op_produces_value(Op op);

}  // namespace stowage::ir
