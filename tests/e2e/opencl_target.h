// The shipped `opencl` target, loaded once, for the end-to-end tests.
#pragma once

#include "stowage/bytecode/target.h"

namespace stowage::testing {

inline const TargetDesc& opencl_target() {
  static const TargetDesc target = TargetDesc::load("opencl").value_or_throw();
  return target;
}

}  // namespace stowage::testing
