#include "dlpack_capsule.h"

#include <fmt/format.h>

#include "stowage/support/error.h"

namespace py = pybind11;

namespace stowage::python {
namespace {

constexpr const char* kFreshName = "dltensor";
constexpr const char* kUsedName = "used_dltensor";

void delete_unconsumed(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedName)) return;  // the consumer owns the tensor now
  // A destructor may run while an exception is being raised: keep it intact.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kFreshName));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

}  // namespace

DLManagedTensor* take_dltensor(py::handle capsule) {
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    throw StowageError(ErrorKind::kInvalidInput, "__dlpack__ did not return a PyCapsule");
  }
  if (PyCapsule_IsValid(capsule.ptr(), kUsedName)) {
    throw StowageError(ErrorKind::kInvalidInput, "the DLPack capsule was already consumed");
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kFreshName)) {
    const char* name = PyCapsule_GetName(capsule.ptr());
    PyErr_Clear();
    throw StowageError(ErrorKind::kInvalidInput,
                       fmt::format("the DLPack capsule is named '{}', not 'dltensor'", name ? name : ""));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kFreshName));
  if (managed == nullptr || PyCapsule_SetName(capsule.ptr(), kUsedName) != 0) throw py::error_already_set();
  return managed;
}

py::capsule make_dltensor_capsule(DLManagedTensor* managed) {
  PyObject* capsule = PyCapsule_New(managed, kFreshName, &delete_unconsumed);
  if (capsule == nullptr) {
    if (managed->deleter != nullptr) managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace stowage::python
