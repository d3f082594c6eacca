// C++ errors as Python exceptions: StowageError (and Expected/Status errors) become
// the stowage.errors class of their ErrorKind, carrying the C++ message unchanged.
#pragma once

#include "stowage/support/error.h"

namespace stowage::python {

// The value, or the error thrown as StowageError (which the translator turns
// into a Python exception).
template <typename T>
T unwrap(Expected<T> expected) {
  if (!expected) throw StowageError(expected.error());
  return expected.take();
}

inline void check(const Status& status) { status.throw_if_error(); }

// The stowage.errors class name for a kind, e.g. "VerifyError".
const char* error_class_name(ErrorKind kind);

}  // namespace stowage::python
