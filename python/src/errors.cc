#include "errors.h"

#include <Python.h>

#include "bindings.h"

namespace py = pybind11;

namespace stowage::python {

const char* error_class_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
      return "InvalidInputError";
    case ErrorKind::kVerify:
      return "VerifyError";
    case ErrorKind::kUnsupported:
      return "UnsupportedError";
    case ErrorKind::kRuntime:
      return "ExecutionError";
    case ErrorKind::kIo:
      return "FileError";
  }
  return "StowageError";
}

namespace {

// Sets the Python error for `error`. The classes live in stowage.errors so
// that Python code can raise and subclass them like any other exception.
void set_python_error(const StowageError& error) {
  PyObject* module = PyImport_ImportModule("stowage.errors");
  PyObject* cls = module ? PyObject_GetAttrString(module, error_class_name(error.kind())) : nullptr;
  Py_XDECREF(module);
  if (cls == nullptr) {
    // stowage.errors could not be imported: the message still reaches the user.
    PyErr_Clear();
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return;
  }
  // Messages may hold a path's bytes that are not UTF-8: they come back as the
  // surrogate escapes Python itself uses for such names.
  const std::string& text = error.error().message();
  PyObject* message = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape");
  if (message == nullptr) {
    PyErr_Clear();
    PyErr_SetString(cls, "(a message that could not be decoded)");
  } else {
    PyErr_SetObject(cls, message);
    Py_DECREF(message);
  }
  Py_DECREF(cls);
}

}  // namespace

void bind_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StowageError& error) {
      set_python_error(error);
    }
  });
  m.def(
      "error_class_names",
      [] {
        py::dict names;
        for (ErrorKind kind : {ErrorKind::kInvalidInput, ErrorKind::kVerify, ErrorKind::kUnsupported,
                               ErrorKind::kRuntime, ErrorKind::kIo}) {
          names[py::int_(static_cast<int>(kind))] = error_class_name(kind);
        }
        return names;
      },
      "The stowage.errors class raised for each C++ ErrorKind (by its number).");
}

}  // namespace stowage::python
