// The storage rules: a tensor fits its storage, its offset is aligned to its
// scope, image pixels are RGBA float32 or float16, and a tensor's image extent
// fits its image storage. The IR verifier, the bytecode loader and the VM share
// these functions, so each rule's condition and message are written once; callers
// put their own context (source position, instruction word, register) around the
// message.
#pragma once

#include <cstdint>
#include <string_view>

#include "stowage/bytecode/executable.h"
#include "stowage/support/dtype.h"
#include "stowage/support/error.h"

namespace stowage {

// `nbytes` at `offset` lie inside a storage of `storage_bytes`; no overflow.
Status tensor_fits_buffer(uint64_t nbytes, uint64_t offset, uint64_t storage_bytes);

// `offset` is a multiple of the `alignment` of `scope` (an alignment of 0 refuses).
Status offset_is_aligned(uint64_t offset, uint64_t alignment, std::string_view scope);

// Image storages hold RGBA pixels of float32 or float16.
Status is_image_pixel_type(DType pixel);

// A tensor whose image extent is `needed` fits an image storage of `storage`.
Status tensor_fits_image(ImageExtent needed, ImageExtent storage);

// The same at top-left pixel `at`: the rectangle lies inside the storage; no overflow.
Status tensor_fits_image(ImageExtent needed, ImageOffset at, ImageExtent storage);

// Image offsets are passed to kernels as int2: x and y are below 2^31.
inline constexpr uint64_t kImageOffsetLimit = uint64_t{1} << 31;
Status image_offset_in_range(ImageOffset at);

// alloc_tensor's offset operand for a tensor in an image storage (version 1.6):
// y << 32 | x. Unpacking never fails; image_offset_in_range checks the halves.
inline uint64_t pack_image_offset(ImageOffset at) { return at.y << 32 | (at.x & 0xffffffffu); }
inline ImageOffset unpack_image_offset(uint64_t packed) { return ImageOffset{packed & 0xffffffffu, packed >> 32}; }

}  // namespace stowage
