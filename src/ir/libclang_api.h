// libclang, loaded at run time with dlopen(RTLD_LOCAL) instead of linked.
//
// Why: an OpenCL driver may carry its own LLVM (PoCL does). When the compiler and
// the runtime share a process (tests, Python), a libclang linked at build time puts
// its LLVM's symbols in the global scope, and the driver's compiler then binds to
// them instead of its own version and crashes. Loading libclang locally keeps the
// two LLVMs apart. It also turns a missing libclang into an error value.
//
// Each clang_* name used by the compiler is redirected to the loaded function.
#pragma once

#include <clang-c/Index.h>

#include <string>

#include "stowage/support/error.h"

#define STOWAGE_LIBCLANG_FUNCTIONS(X)                                                                     \
  X(clang_createIndex) X(clang_disposeIndex) X(clang_parseTranslationUnit2)                             \
  X(clang_disposeTranslationUnit) X(clang_getNumDiagnostics) X(clang_getDiagnostic)                     \
  X(clang_disposeDiagnostic) X(clang_getDiagnosticSeverity) X(clang_getDiagnosticSpelling)              \
  X(clang_getDiagnosticLocation) X(clang_getExpansionLocation) X(clang_Location_isFromMainFile)          \
  X(clang_getTranslationUnitCursor) X(clang_visitChildren) X(clang_getCursorKind)                       \
  X(clang_getCursorLocation) X(clang_getCursorSpelling) X(clang_getCursorType)                          \
  X(clang_isCursorDefinition) X(clang_Cursor_getNumArguments) X(clang_Cursor_getArgument)               \
  X(clang_getFunctionTypeCallingConv) X(clang_getCanonicalType) X(clang_getPointeeType)                 \
  X(clang_getElementType) X(clang_getNumElements) X(clang_getTypeSpelling) X(clang_Type_getSizeOf)      \
  X(clang_getAddressSpace) X(clang_isConstQualifiedType) X(clang_getCString) X(clang_disposeString)

namespace stowage::ir::clang_c {

struct LibClang {
#define STOWAGE_LIBCLANG_POINTER(name) decltype(&::name) name = nullptr;
  STOWAGE_LIBCLANG_FUNCTIONS(STOWAGE_LIBCLANG_POINTER)
#undef STOWAGE_LIBCLANG_POINTER
};

// Loads the library (once per process), or says why it cannot be loaded.
Status load_libclang();
// The loaded library; only valid after load_libclang succeeded.
const LibClang& libclang();

}  // namespace stowage::ir::clang_c

#ifndef STOWAGE_LIBCLANG_LOADER
#define clang_createIndex ::stowage::ir::clang_c::libclang().clang_createIndex
#define clang_disposeIndex ::stowage::ir::clang_c::libclang().clang_disposeIndex
#define clang_parseTranslationUnit2 ::stowage::ir::clang_c::libclang().clang_parseTranslationUnit2
#define clang_disposeTranslationUnit ::stowage::ir::clang_c::libclang().clang_disposeTranslationUnit
#define clang_getNumDiagnostics ::stowage::ir::clang_c::libclang().clang_getNumDiagnostics
#define clang_getDiagnostic ::stowage::ir::clang_c::libclang().clang_getDiagnostic
#define clang_disposeDiagnostic ::stowage::ir::clang_c::libclang().clang_disposeDiagnostic
#define clang_getDiagnosticSeverity ::stowage::ir::clang_c::libclang().clang_getDiagnosticSeverity
#define clang_getDiagnosticSpelling ::stowage::ir::clang_c::libclang().clang_getDiagnosticSpelling
#define clang_getDiagnosticLocation ::stowage::ir::clang_c::libclang().clang_getDiagnosticLocation
#define clang_getExpansionLocation ::stowage::ir::clang_c::libclang().clang_getExpansionLocation
#define clang_Location_isFromMainFile ::stowage::ir::clang_c::libclang().clang_Location_isFromMainFile
#define clang_getTranslationUnitCursor ::stowage::ir::clang_c::libclang().clang_getTranslationUnitCursor
#define clang_visitChildren ::stowage::ir::clang_c::libclang().clang_visitChildren
#define clang_getCursorKind ::stowage::ir::clang_c::libclang().clang_getCursorKind
#define clang_getCursorLocation ::stowage::ir::clang_c::libclang().clang_getCursorLocation
#define clang_getCursorSpelling ::stowage::ir::clang_c::libclang().clang_getCursorSpelling
#define clang_getCursorType ::stowage::ir::clang_c::libclang().clang_getCursorType
#define clang_isCursorDefinition ::stowage::ir::clang_c::libclang().clang_isCursorDefinition
#define clang_Cursor_getNumArguments ::stowage::ir::clang_c::libclang().clang_Cursor_getNumArguments
#define clang_Cursor_getArgument ::stowage::ir::clang_c::libclang().clang_Cursor_getArgument
#define clang_getFunctionTypeCallingConv ::stowage::ir::clang_c::libclang().clang_getFunctionTypeCallingConv
#define clang_getCanonicalType ::stowage::ir::clang_c::libclang().clang_getCanonicalType
#define clang_getPointeeType ::stowage::ir::clang_c::libclang().clang_getPointeeType
#define clang_getElementType ::stowage::ir::clang_c::libclang().clang_getElementType
#define clang_getNumElements ::stowage::ir::clang_c::libclang().clang_getNumElements
#define clang_getTypeSpelling ::stowage::ir::clang_c::libclang().clang_getTypeSpelling
#define clang_Type_getSizeOf ::stowage::ir::clang_c::libclang().clang_Type_getSizeOf
#define clang_getAddressSpace ::stowage::ir::clang_c::libclang().clang_getAddressSpace
#define clang_isConstQualifiedType ::stowage::ir::clang_c::libclang().clang_isConstQualifiedType
#define clang_getCString ::stowage::ir::clang_c::libclang().clang_getCString
#define clang_disposeString ::stowage::ir::clang_c::libclang().clang_disposeString
#endif
