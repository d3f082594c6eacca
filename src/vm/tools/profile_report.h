// vm-run's profiles in the model's words: time per model node (a fused kernel's
// nodes together) and per op type, and a Chrome trace of the kernel launches.
#pragma once

#include <string>
#include <vector>

#include "stowage/vm/vm.h"

namespace stowage::vm {

// Device time per model node group and per op type (kernel_times), most first; the
// instructions the executable names no node for are one row, "(no node)".
void print_node_times(const Profile& p, int invocations);

// The launches as a Chrome trace (JSON; chrome://tracing, Perfetto): one complete
// event per launch named after its model nodes (the kernel's name where none are
// known), with the kernel, nodes and op types in its args, times in microseconds
// from the first launch's start.
std::string chrome_trace(const Executable& exe, const std::vector<LaunchRecord>& launches);

}  // namespace stowage::vm
