#include "stowage/bytecode/storage_rules.h"

#include <fmt/format.h>

namespace stowage {

Status tensor_fits_buffer(uint64_t nbytes, uint64_t offset, uint64_t storage_bytes) {
  // Written as a subtraction so that an offset near 2^64 cannot wrap into range.
  if (nbytes <= storage_bytes && offset <= storage_bytes - nbytes) return Status::ok();
  return Error(ErrorKind::kVerify, fmt::format("{} bytes at offset {} do not fit in a storage of {} bytes", nbytes,
                                               offset, storage_bytes));
}

Status offset_is_aligned(uint64_t offset, uint64_t alignment, std::string_view scope) {
  if (alignment != 0 && offset % alignment == 0) return Status::ok();
  return Error(ErrorKind::kVerify,
               fmt::format("offset {} is not a multiple of {}, the alignment of scope '{}'", offset, alignment, scope));
}

Status is_image_pixel_type(DType pixel) {
  if (pixel == DType::kFloat32 || pixel == DType::kFloat16) return Status::ok();
  return Error(ErrorKind::kVerify,
               fmt::format("an image storage holds RGBA float32 or float16 pixels, not {}", dtype_name(pixel)));
}

Status tensor_fits_image(ImageExtent needed, ImageExtent storage) {
  if (needed.height <= storage.height && needed.width <= storage.width) return Status::ok();
  return Error(ErrorKind::kVerify, fmt::format("needs an image of height {} and width {}, but the storage is [{}, {}]",
                                               needed.height, needed.width, storage.height, storage.width));
}

Status tensor_fits_image(ImageExtent needed, ImageOffset at, ImageExtent storage) {
  if (at == ImageOffset{}) return tensor_fits_image(needed, storage);
  if (at.y <= storage.height && needed.height <= storage.height - at.y && at.x <= storage.width &&
      needed.width <= storage.width - at.x) {
    return Status::ok();
  }
  return Error(ErrorKind::kVerify,
               fmt::format("needs an image of height {} and width {} at [{}, {}], but the storage is [{}, {}]",
                           needed.height, needed.width, at.y, at.x, storage.height, storage.width));
}

Status image_offset_in_range(ImageOffset at) {
  if (at.x < kImageOffsetLimit && at.y < kImageOffsetLimit) return Status::ok();
  return Error(ErrorKind::kVerify,
               fmt::format("image offset [{}, {}] is out of range: row and column must be below 2^31", at.y, at.x));
}

}  // namespace stowage
