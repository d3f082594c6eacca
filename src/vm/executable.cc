#include "stowage/vm/executable.h"

namespace stowage {

int64_t Executable::find_function(std::string_view name) const {
  for (size_t i = 0; i < functions.size(); ++i) {
    if (functions[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace stowage
