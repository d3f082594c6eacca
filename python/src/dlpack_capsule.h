// DLPack capsules, the form in which __dlpack__ hands tensors between Python
// libraries: a PyCapsule named "dltensor" holding a DLManagedTensor*. Whoever
// consumes it renames it "used_dltensor" and becomes responsible for the
// deleter; a capsule never consumed calls the deleter when it is destroyed.
#pragma once

#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>

namespace stowage::python {

// Takes the tensor out of a "dltensor" capsule, marking it used. Throws
// StowageError (kInvalidInput) for anything else, e.g. a capsule already used.
DLManagedTensor* take_dltensor(pybind11::handle capsule);

// A "dltensor" capsule owning `managed` until a consumer takes it.
pybind11::capsule make_dltensor_capsule(DLManagedTensor* managed);

}  // namespace stowage::python
