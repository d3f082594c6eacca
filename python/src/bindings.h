// The pieces of the stowage._stowage extension, each binding one area.
#pragma once

#include <pybind11/pybind11.h>

namespace stowage::python {

void bind_errors(pybind11::module_& m);
void bind_ir(pybind11::module_& m);
void bind_executable(pybind11::module_& m);
void bind_vm(pybind11::module_& m);

}  // namespace stowage::python
