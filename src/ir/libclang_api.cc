#define STOWAGE_LIBCLANG_LOADER
#include "libclang_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace stowage::ir::clang_c {
namespace {

LibClang g_library;
std::string g_error;
std::once_flag g_once;

void load() {
  // STOWAGE_LIBCLANG names the library: the soname found when Stowage was built.
  void* handle = dlopen(STOWAGE_LIBCLANG, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    g_error = fmt::format("cannot load libclang ({}): {}", STOWAGE_LIBCLANG, why ? why : "unknown reason");
    return;
  }
#define STOWAGE_LIBCLANG_RESOLVE(name)                                              \
  g_library.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));       \
  if (g_library.name == nullptr) {                                                  \
    g_error = fmt::format("libclang ({}) lacks the function {}", STOWAGE_LIBCLANG, #name); \
    return;                                                                         \
  }
  STOWAGE_LIBCLANG_FUNCTIONS(STOWAGE_LIBCLANG_RESOLVE)
#undef STOWAGE_LIBCLANG_RESOLVE
}

}  // namespace

Status load_libclang() {
  std::call_once(g_once, load);
  if (g_error.empty()) return Status::ok();
  return Error(ErrorKind::kUnsupported, g_error);
}

const LibClang& libclang() { return g_library; }

}  // namespace stowage::ir::clang_c
