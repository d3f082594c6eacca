// Reads the IR text form (docs/ir.md). Syntax only: the verifier checks meaning.
#pragma once

#include <string_view>

#include "stowage/ir/ir.h"
#include "stowage/support/error.h"

namespace stowage::ir {

// Parses a module, filling source locations. On bad input returns one error
// (kind kInvalidInput): `FILE:LINE:COL: error: MESSAGE`, FILE being `file_name`.
// Kernel units come back without signatures: the kernel reader fills them.
Expected<Module> parse_module(std::string_view text, std::string_view file_name = "<input>");

}  // namespace stowage::ir
