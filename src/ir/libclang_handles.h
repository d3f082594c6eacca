// Owning wrappers for the libclang C API's handles, so every path out of the
// kernel reader releases what libclang allocated.
#pragma once

#include "libclang_api.h"

#include <memory>
#include <string>
#include <type_traits>

namespace stowage::ir::clang_c {

struct IndexDeleter {
  void operator()(void* index) const { clang_disposeIndex(index); }
};
using IndexHandle = std::unique_ptr<void, IndexDeleter>;

struct TranslationUnitDeleter {
  void operator()(CXTranslationUnit unit) const { clang_disposeTranslationUnit(unit); }
};
using TranslationUnitHandle =
    std::unique_ptr<std::remove_pointer_t<CXTranslationUnit>, TranslationUnitDeleter>;

struct DiagnosticDeleter {
  void operator()(void* diagnostic) const { clang_disposeDiagnostic(diagnostic); }
};
using DiagnosticHandle = std::unique_ptr<void, DiagnosticDeleter>;

// Copies a CXString into a std::string and disposes of it.
inline std::string take_string(CXString text) {
  const char* chars = clang_getCString(text);
  std::string result = chars ? chars : "";
  clang_disposeString(text);
  return result;
}

}  // namespace stowage::ir::clang_c
