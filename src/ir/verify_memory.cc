// Verifier rules on memory: storages, where tensors are placed in them, on-chip
// capacity, and image layouts.
#include <fmt/format.h>

#include <array>

#include "function_verifier.h"
#include "stowage/bytecode/storage_rules.h"
#include "stowage/ir/printer.h"

namespace stowage::ir::verify {
namespace {

Problem check_tensor_shape(const std::vector<int64_t>& shape, DType dtype) {
  for (int64_t extent : shape) {
    if (extent < 0) return fmt::format("shape {} has a negative extent", print_shape_list(shape));
  }
  if (!checked_nbytes(shape, dtype)) {
    return fmt::format("shape {} of {} is larger than 2^64 bytes", print_shape_list(shape), dtype_name(dtype));
  }
  return std::nullopt;
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += fmt::format("{}'{}'", i == 0 ? "" : ", ", names[i]);
  return out;
}

}  // namespace

Problem FunctionVerifier::find_scope(const std::string& name, const ScopeDesc** scope) const {
  *scope = target_.find_scope(name);
  if (*scope != nullptr) return std::nullopt;
  std::vector<std::string> names;
  for (const ScopeDesc& s : target_.scopes) names.push_back(s.name);
  return fmt::format("unknown scope '{}' (target '{}' has {})", name, target_.name, fmt::join(names, ", "));
}

Problem FunctionVerifier::check_alloc_storage(const Binding& b) {
  const ScopeDesc* scope = nullptr;
  if (auto p = find_scope(b.scope, &scope)) return p;
  if (b.device < 0) return fmt::format("device {} is negative", b.device);
  std::string size = print_shape_list(b.shape);
  bool is_image = scope->kind == ScopeKind::kImage2d;
  if (!is_image && b.shape.size() != 1) {
    return fmt::format("a storage in buffer scope '{}' has the size [nbytes], got {}", b.scope, size);
  }
  if (is_image && b.shape.size() != 2) {
    return fmt::format("a storage in image scope '{}' has the size [height, width], got {}", b.scope, size);
  }
  for (int64_t extent : b.shape) {
    if (extent <= 0) return fmt::format("storage size {} is not positive", size);
  }
  StorageInfo info;
  info.scope = scope;
  info.dtype = b.dtype;
  if (is_image) {
    if (Status s = is_image_pixel_type(b.dtype); !s) return s.error().message();
    info.height = static_cast<uint64_t>(b.shape[0]);
    info.width = static_cast<uint64_t>(b.shape[1]);
    if (info.height > target_.max_image_height) {
      return fmt::format("image height {} exceeds the target's maximum of {}", info.height, target_.max_image_height);
    }
    if (info.width > target_.max_image_width) {
      return fmt::format("image width {} exceeds the target's maximum of {}", info.width, target_.max_image_width);
    }
  } else {
    info.bytes = static_cast<uint64_t>(b.shape[0]);
    if (auto p = check_capacity(b, *scope, info.bytes)) return p;
  }
  result_info_.scope = scope;
  result_info_.storage = std::move(info);
  return std::nullopt;
}

// Storages live from alloc_storage to their kill_object or the function's end.
Problem FunctionVerifier::check_capacity(const Binding& b, const ScopeDesc& scope, uint64_t bytes) {
  if (scope.capacity == 0) return std::nullopt;
  if (bytes > scope.capacity) {
    return fmt::format("{} bytes exceed the capacity of scope '{}' ({} bytes)", bytes, scope.name, scope.capacity);
  }
  std::vector<std::string> live = live_storages_[&scope];
  uint64_t total = bytes;
  for (const std::string& name : live) {
    // Each storage is at most the capacity, so the sum cannot overflow before it exceeds it.
    total = checked_add(total, vars_.at(name).storage->bytes).value_or(UINT64_MAX);
  }
  if (total <= scope.capacity) return std::nullopt;
  live.push_back(b.result);
  return fmt::format("scope '{}' would hold {} bytes at once (storages {}), over its capacity of {} bytes", scope.name,
                     total, quoted_names(live), scope.capacity);
}

Problem FunctionVerifier::check_alloc_tensor(const Binding& b) {
  const std::string& storage_name = b.vars[0];
  VarInfo& storage_var = vars_.at(storage_name);
  if (storage_var.type.kind != Type::Kind::kStorage) {
    return fmt::format("'{}' is {}, not a Storage", storage_name, print_type(storage_var.type));
  }
  if (b.offset < 0) return fmt::format("offset {} is negative", b.offset);
  if (auto p = check_tensor_shape(b.shape, b.dtype)) return p;
  // Storages that arrive as parameters or call results have no size to check against.
  if (!storage_var.storage) return std::nullopt;
  StorageInfo& storage = *storage_var.storage;
  uint64_t nbytes = *checked_nbytes(b.shape, b.dtype);
  Placement placement;
  placement.storage = storage_name;
  placement.empty = nbytes == 0;
  Problem problem = storage.scope->kind == ScopeKind::kImage2d
                        ? check_image_tensor(b, storage_name, storage, placement)
                        : check_buffer_tensor(b, storage_name, storage, nbytes, placement);
  if (problem) return problem;
  result_info_.scope = storage.scope;
  result_info_.placements.push_back(std::move(placement));
  return std::nullopt;
}

Problem FunctionVerifier::check_buffer_tensor(const Binding& b, const std::string& storage_name,
                                              StorageInfo& storage, uint64_t nbytes, Placement& placement) {
  uint64_t offset = static_cast<uint64_t>(b.offset);
  if (Status s = tensor_fits_buffer(nbytes, offset, storage.bytes); !s) {
    return fmt::format("tensor '{}' in storage '{}': {}", b.result, storage_name, s.error().message());
  }
  if (Status s = offset_is_aligned(offset, storage.scope->alignment, storage.scope->name); !s) {
    return s.error().message();
  }
  placement.begin = offset;
  placement.end = offset + nbytes;
  if (placement.empty) return std::nullopt;
  return check_live_overlap(fmt::format("tensor '{}'", b.result), storage_name, storage, placement.begin,
                            placement.end);
}

Problem FunctionVerifier::check_live_overlap(const std::string& subject, const std::string& storage_name,
                                             const StorageInfo& storage, uint64_t begin, uint64_t end) const {
  for (const std::string& other_name : storage.live_tensors) {
    for (const Placement& other : vars_.at(other_name).placements) {
      if (other.storage != storage_name || other.empty || other.end <= begin || end <= other.begin) continue;
      return fmt::format("{} (bytes [{}, {})) overlaps live tensor '{}' (bytes [{}, {})) in storage '{}'", subject,
                         begin, end, other_name, other.begin, other.end, storage_name);
    }
  }
  return std::nullopt;
}

// For now an image holds its tensors at its origin: one live non-empty tensor each.
Problem FunctionVerifier::check_image_tensor(const Binding& b, const std::string& storage_name,
                                             StorageInfo& storage, Placement& placement) {
  std::string shape = print_shape_list(b.shape);
  if (b.dtype != storage.dtype) {
    return fmt::format("tensor dtype {} differs from the {} pixels of image storage '{}'", dtype_name(b.dtype),
                       dtype_name(storage.dtype), storage_name);
  }
  if (b.offset != 0) {
    return fmt::format("offset {} in image storage '{}': tensors in images start at offset 0", b.offset,
                       storage_name);
  }
  if (b.shape.empty() || b.shape.back() != 4) {
    return fmt::format("shape {} in image storage '{}' must end in 4 (the RGBA channels)", shape, storage_name);
  }
  if (b.shape.size() > 5) {
    return fmt::format("shape {} in image storage '{}' has more than 5 dimensions", shape, storage_name);
  }
  const std::string& layout = storage.scope->layout;
  std::optional<ImageExtent> extent = image_extent(b.shape, storage.scope->image_layout());
  if (!extent) return fmt::format("the image extent of shape {} overflows 64 bits", shape);
  if (Status s = tensor_fits_image(*extent, ImageExtent{storage.height, storage.width}); !s) {
    return fmt::format("tensor '{}' ({} layout) in storage '{}' {}", b.result, layout, storage_name,
                       s.error().message());
  }
  if (placement.empty) return std::nullopt;
  for (const std::string& other_name : storage.live_tensors) {
    if (vars_.at(other_name).placements.at(0).empty) continue;
    return fmt::format("tensor '{}' overlaps live tensor '{}' in image storage '{}' (both start at its origin)",
                       b.result, other_name, storage_name);
  }
  return std::nullopt;
}

Problem FunctionVerifier::check_empty(const Binding& b) {
  const ScopeDesc* scope = nullptr;
  if (auto p = find_scope(b.scope, &scope)) return p;
  if (auto p = check_tensor_shape(b.shape, b.dtype)) return p;
  result_info_.scope = scope;
  return std::nullopt;
}

}  // namespace stowage::ir::verify
