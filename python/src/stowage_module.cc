// The extension module stowage._stowage. The public API is the Python package
// around it (python/stowage); names here are its building blocks.
#include "bindings.h"

PYBIND11_MODULE(_stowage, m) {
  m.doc() = "Stowage C++ core: IR builder, text form, compiler, bytecode files, VM";
  stowage::python::bind_errors(m);
  stowage::python::bind_ir(m);
  stowage::python::bind_executable(m);
  stowage::python::bind_vm(m);
}
