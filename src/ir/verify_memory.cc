// Verifier rules on memory: storages, where tensors are placed in them, on-chip
// capacity, and image layouts.
#include <fmt/format.h>

#include <array>

#include "function_verifier.h"
#include "stowage/bytecode/storage_rules.h"
#include "stowage/ir/printer.h"

namespace stowage::ir::verify {
namespace {

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += fmt::format("{}'{}'", i == 0 ? "" : ", ", names[i]);
  return out;
}

}  // namespace

Status check_tensor_shape(const std::vector<int64_t>& shape, DType dtype) {
  for (int64_t extent : shape) {
    if (extent < 0) return broken_rule("shape {} has a negative extent", print_shape_list(shape));
  }
  if (!checked_nbytes(shape, dtype)) {
    return broken_rule("shape {} of {} is larger than 2^64 bytes", print_shape_list(shape), dtype_name(dtype));
  }
  return Status::ok();
}

Expected<const ScopeDesc*> FunctionVerifier::find_scope(const std::string& name) const {
  if (const ScopeDesc* scope = target_.find_scope(name)) return scope;
  std::vector<std::string> names;
  for (const ScopeDesc& s : target_.scopes) names.push_back(s.name);
  return broken_rule("unknown scope '{}' (target '{}' has {})", name, target_.name, fmt::join(names, ", "));
}

Status FunctionVerifier::check_alloc_storage(const Binding& b) {
  STOWAGE_TRY_ASSIGN(const ScopeDesc* scope, find_scope(b.scope));
  if (b.device < 0) return broken_rule("device {} is negative", b.device);
  std::string size = print_shape_list(b.shape);
  bool is_image = scope->kind == ScopeKind::kImage2d;
  if (!is_image && b.shape.size() != 1) {
    return broken_rule("a storage in buffer scope '{}' has the size [nbytes], got {}", b.scope, size);
  }
  if (is_image && b.shape.size() != 2) {
    return broken_rule("a storage in image scope '{}' has the size [height, width], got {}", b.scope, size);
  }
  for (int64_t extent : b.shape) {
    if (extent <= 0) return broken_rule("storage size {} is not positive", size);
  }
  StorageInfo info;
  info.scope = scope;
  info.dtype = b.dtype;
  if (is_image) {
    STOWAGE_TRY(is_image_pixel_type(b.dtype));
    info.height = static_cast<uint64_t>(b.shape[0]);
    info.width = static_cast<uint64_t>(b.shape[1]);
    if (info.height > target_.max_image_height) {
      return broken_rule("image height {} exceeds the target's maximum of {}", info.height, target_.max_image_height);
    }
    if (info.width > target_.max_image_width) {
      return broken_rule("image width {} exceeds the target's maximum of {}", info.width, target_.max_image_width);
    }
  } else {
    info.bytes = static_cast<uint64_t>(b.shape[0]);
    STOWAGE_TRY(check_capacity(b, *scope, info.bytes));
  }
  result_info_.scope = scope;
  result_info_.storage = std::move(info);
  return Status::ok();
}

// Storages live from alloc_storage to their kill_object or the function's end.
Status FunctionVerifier::check_capacity(const Binding& b, const ScopeDesc& scope, uint64_t bytes) {
  if (scope.capacity == 0) return Status::ok();
  if (bytes > scope.capacity) {
    return broken_rule("{} bytes exceed the capacity of scope '{}' ({} bytes)", bytes, scope.name, scope.capacity);
  }
  std::vector<std::string> live = live_storages_[&scope];
  uint64_t total = bytes;
  for (const std::string& name : live) {
    // Each storage is at most the capacity, so the sum cannot overflow before it exceeds it.
    total = checked_add(total, vars_.at(name).storage->bytes).value_or(UINT64_MAX);
  }
  if (total <= scope.capacity) return Status::ok();
  live.push_back(b.result);
  return broken_rule("scope '{}' would hold {} bytes at once (storages {}), over its capacity of {} bytes", scope.name,
                     total, quoted_names(live), scope.capacity);
}

Status FunctionVerifier::check_alloc_tensor(const Binding& b) {
  const std::string& storage_name = b.vars[0];
  VarInfo& storage_var = vars_.at(storage_name);
  if (storage_var.type.kind != Type::Kind::kStorage) {
    return broken_rule("'{}' is {}, not a Storage", storage_name, print_type(storage_var.type));
  }
  if (b.offset < 0) return broken_rule("offset {} is negative", b.offset);
  STOWAGE_TRY(check_tensor_shape(b.shape, b.dtype));
  if (Status s = image_offset_in_range(b.image_offset); !s) {
    return broken_rule("tensor '{}': {}", b.result, s.error().message());
  }
  // Storages that arrive as parameters or call results have no size to check against.
  if (!storage_var.storage) return Status::ok();
  StorageInfo& storage = *storage_var.storage;
  uint64_t nbytes = *checked_nbytes(b.shape, b.dtype);
  Placement placement;
  placement.storage = storage_name;
  placement.empty = nbytes == 0;
  STOWAGE_TRY(storage.scope->kind == ScopeKind::kImage2d
                  ? check_image_tensor(b, storage_name, storage, placement)
                  : check_buffer_tensor(b, storage_name, storage, nbytes, placement));
  result_info_.scope = storage.scope;
  result_info_.placements.push_back(std::move(placement));
  if (storage.scope->kind == ScopeKind::kImage2d) {
    result_info_.image_storage = storage_name;
    result_info_.image_offset = b.image_offset;
  }
  return Status::ok();
}

Status FunctionVerifier::check_buffer_tensor(const Binding& b, const std::string& storage_name,
                                             StorageInfo& storage, uint64_t nbytes, Placement& placement) {
  if (b.image_offset != ImageOffset{}) {
    return broken_rule("tensor '{}' in buffer storage '{}' has an image offset [{}, {}]; a tensor in a buffer is "
                       "placed at a byte offset",
                       b.result, storage_name, b.image_offset.y, b.image_offset.x);
  }
  uint64_t offset = static_cast<uint64_t>(b.offset);
  if (Status s = tensor_fits_buffer(nbytes, offset, storage.bytes); !s) {
    return broken_rule("tensor '{}' in storage '{}': {}", b.result, storage_name, s.error().message());
  }
  STOWAGE_TRY(offset_is_aligned(offset, storage.scope->alignment, storage.scope->name));
  placement.begin = offset;
  placement.end = offset + nbytes;
  if (placement.empty) return Status::ok();
  return check_live_overlap(fmt::format("tensor '{}'", b.result), storage_name, storage, placement.begin,
                            placement.end);
}

Status FunctionVerifier::check_live_overlap(const std::string& subject, const std::string& storage_name,
                                            const StorageInfo& storage, uint64_t begin, uint64_t end) const {
  for (const std::string& other_name : storage.live_tensors) {
    for (const Placement& other : vars_.at(other_name).placements) {
      if (other.storage != storage_name || other.empty || other.end <= begin || end <= other.begin) continue;
      return broken_rule("{} (bytes [{}, {})) overlaps live tensor '{}' (bytes [{}, {})) in storage '{}'", subject,
                         begin, end, other_name, other.begin, other.end, storage_name);
    }
  }
  return Status::ok();
}

// A tensor in an image is a rectangle of pixels at its image offset: inside the
// storage, and apart from the rectangles of the storage's other live tensors.
Status FunctionVerifier::check_image_tensor(const Binding& b, const std::string& storage_name,
                                            StorageInfo& storage, Placement& placement) {
  std::string shape = print_shape_list(b.shape);
  if (b.dtype != storage.dtype) {
    return broken_rule("tensor dtype {} differs from the {} pixels of image storage '{}'", dtype_name(b.dtype),
                       dtype_name(storage.dtype), storage_name);
  }
  if (b.offset != 0) {
    return broken_rule("offset {} in image storage '{}': a tensor in an image is placed at a pixel [y, x], not at a "
                       "byte offset",
                       b.offset, storage_name);
  }
  if (b.shape.empty() || b.shape.back() != 4) {
    return broken_rule("shape {} in image storage '{}' must end in 4 (the RGBA channels)", shape, storage_name);
  }
  if (b.shape.size() > 5) {
    return broken_rule("shape {} in image storage '{}' has more than 5 dimensions", shape, storage_name);
  }
  const std::string& layout = storage.scope->layout;
  std::optional<ImageExtent> extent = image_extent(b.shape, storage.scope->image_layout());
  if (!extent) return broken_rule("the image extent of shape {} overflows 64 bits", shape);
  if (Status s = tensor_fits_image(*extent, b.image_offset, ImageExtent{storage.height, storage.width}); !s) {
    return broken_rule("tensor '{}' ({} layout) in storage '{}' {}", b.result, layout, storage_name,
                       s.error().message());
  }
  result_info_.image_extent = *extent;
  if (placement.empty) return Status::ok();
  const ImageOffset& at = b.image_offset;
  for (const std::string& other_name : storage.live_tensors) {
    const VarInfo& other = vars_.at(other_name);
    if (other.placements.at(0).empty) continue;
    const ImageOffset& o = other.image_offset;
    const ImageExtent& e = other.image_extent;
    // Offsets are below 2^31 and extents inside the storage: the sums do not wrap.
    if (at.x >= o.x + e.width || o.x >= at.x + extent->width || at.y >= o.y + e.height ||
        o.y >= at.y + extent->height) {
      continue;
    }
    return broken_rule("tensor '{}' (rows {} to {}, columns {} to {}) overlaps live tensor '{}' (rows {} to {}, "
                       "columns {} to {}) in image storage '{}'",
                       b.result, at.y, at.y + extent->height - 1, at.x, at.x + extent->width - 1, other_name, o.y,
                       o.y + e.height - 1, o.x, o.x + e.width - 1, storage_name);
  }
  return Status::ok();
}

Status FunctionVerifier::check_empty(const Binding& b) {
  STOWAGE_TRY_ASSIGN(const ScopeDesc* scope, find_scope(b.scope));
  STOWAGE_TRY(check_tensor_shape(b.shape, b.dtype));
  result_info_.scope = scope;
  if (scope->kind == ScopeKind::kImage2d) result_info_.image_storage = b.result;  // the planner gives it an image
  return Status::ok();
}

}  // namespace stowage::ir::verify
