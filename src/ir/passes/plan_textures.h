// Texture scopes of the planning pass (plan_memory.cc): which image storage
// each texture tensor goes to and where in it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "stowage/bytecode/target.h"
#include "stowage/ir/planner.h"
#include "stowage/support/error.h"

namespace stowage::ir {

struct TextureTensor {
  std::string name;
  const ScopeDesc* scope = nullptr;
  std::string scope_name;  // as requested
  DType dtype = DType::kFloat32;
  ImageExtent extent;
  int64_t first = 0;  // its `empty`
  int64_t last = 0;   // its last use
  // Bound to an image parameter without an offset parameter after it: the
  // kernel reads or writes it from the image's origin.
  bool at_origin = false;
};

struct TextureStorage {
  std::string name;
  std::string scope_name;
  DType dtype = DType::kFloat32;
  ImageExtent extent;  // at least 1 x 1
};

struct TexturePlan {
  std::vector<size_t> storage;      // per tensor: its storage in `storages`
  std::vector<ImageOffset> offset;  // per tensor
  std::vector<TextureStorage> storages;
  std::vector<ScopeReport> reports;  // one per scope, as requested
};

// Places the tensors, in order of allocation. `apart` lists pairs of tensors
// (indices) that one launch binds to a read_only and a write_only image
// parameter: they go to different storages. `naive`: every tensor an image
// of its own. `fresh_name` gives an unused name for a storage from a stem.
Expected<TexturePlan> plan_textures(const std::string& function, const std::vector<TextureTensor>& tensors,
                                    const std::vector<std::pair<size_t, size_t>>& apart, const TargetDesc& target,
                                    bool naive, const std::function<std::string(const std::string&)>& fresh_name);

}  // namespace stowage::ir
