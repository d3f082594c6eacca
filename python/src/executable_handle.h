// What stowage.Executable holds: the executable, shared with every VM made from
// it, and the IR module as compiled when it was compiled in this process.
#pragma once

#include "stowage/ir/planner.h"

#include <memory>
#include <optional>

#include "stowage/ir/ir.h"
#include "stowage/bytecode/executable.h"

namespace stowage::python {

struct ExecutableHandle {
  std::shared_ptr<const Executable> executable;
  std::optional<ir::Module> module;
  std::optional<ir::MemoryReport> memory;  // the planner's report, when compiled here
};

}  // namespace stowage::python
