// Where an instruction came from in the model a front end imported: the nodes it
// computes (all of them for a fused kernel), so that profiles speak of the model's
// own nodes and op types. Carried in the optional `origins` section (version 1.5);
// the VM reads it only to name what it profiles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stowage {

struct NodeOrigin {
  std::string op;    // the node's operator, e.g. "Conv"
  std::string node;  // the node's name in the model
  friend bool operator==(const NodeOrigin&, const NodeOrigin&) = default;
};

struct SiteOrigin {
  uint32_t pc = 0;  // the instruction's index in its function's code
  std::vector<NodeOrigin> nodes;
  friend bool operator==(const SiteOrigin&, const SiteOrigin&) = default;
};

struct FunctionOrigins {
  std::string function;
  std::vector<SiteOrigin> sites;  // in increasing pc order
  friend bool operator==(const FunctionOrigins&, const FunctionOrigins&) = default;
};

}  // namespace stowage
