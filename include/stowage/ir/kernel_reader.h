// Learns the signatures of the __kernel functions in a module's OpenCL C source
// units by parsing them with Clang (libclang), in OpenCL C 1.2 mode with the
// default OpenCL header, so source errors surface at compile time with their
// line:col, before any device is touched.
//
// Error messages (kind kInvalidInput), one per failing unit:
//   a Clang error in a unit built in C++ (unit.loc.line == 0):
//     kernel unit 'ops' 3:14: error: use of undeclared identifier 'q'
//   the same unit read from the text form, its source starting at unit.loc:
//     7:14: error: in kernel unit 'ops' (3:14): use of undeclared identifier 'q'
//   (the text position comes first so a tool can prefix the file name);
//   a parameter Stowage cannot bind, at the parameter's position, e.g.
//     kernel unit 'ops' 2:40: error: kernel 'k' parameter 2 'p': type 'sampler_t' is not supported
//   Parameters are numbered from 0, as the arguments of call_kernel are.
// `unit.loc` is taken as the position of the first character of `unit.source`.
// Only the first Clang error is reported; warnings are ignored.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "stowage/ir/ir.h"
#include "stowage/support/error.h"
#include "stowage/bytecode/kernel_signature.h"

namespace stowage::ir {

// The kernels defined in `unit`, in source order, each tagged with `unit_index`.
// Functions without the __kernel qualifier are not listed; a kernel that is
// declared but never defined in the unit is an error.
// A unit may `#include <stowage/NAME>` for the headers Stowage ships
// (include/stowage/opencl/; discontiguous.cl.h read with STOWAGE_TABLE_ENTRY_BYTES =
// `table_entry_bytes`), and nothing else: any other
// way of naming a file (stowage/bytecode/kernel_source.h) is refused at its
// line:col before libclang reads anything.
Expected<std::vector<KernelSignature>> read_kernel_signatures(const KernelSourceUnit& unit, uint32_t unit_index,
                                                              uint32_t table_entry_bytes = 4);

// Fills `signatures` of every unit of `module`. A kernel name defined in two
// units is an error; on error the module's signatures are left unchanged. Errors
// at a line:col of the text form start with `file_name`: when it is given.
Status read_module_kernels(Module& module, uint32_t table_entry_bytes = 4, std::string_view file_name = {});

}  // namespace stowage::ir
