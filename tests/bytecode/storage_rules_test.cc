// The storage rules the verifier, the loader and the VM share: each accepts what
// fits and refuses, with its one message, what does not.
#include "stowage/bytecode/storage_rules.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace stowage {
namespace {

std::string message(const Status& s) { return s ? std::string("ok") : s.error().message(); }

TEST(StorageRules, TensorFitsBuffer) {
  EXPECT_TRUE(tensor_fits_buffer(1024, 3072, 4096));
  EXPECT_TRUE(tensor_fits_buffer(0, 4096, 4096));
  EXPECT_TRUE(tensor_fits_buffer(0, 0, 0));
  EXPECT_EQ(message(tensor_fits_buffer(1024, 3968, 4096)),
            "1024 bytes at offset 3968 do not fit in a storage of 4096 bytes");
  EXPECT_FALSE(tensor_fits_buffer(8192, 0, 4096));
  EXPECT_FALSE(tensor_fits_buffer(0, 4097, 4096));
}

TEST(StorageRules, TensorFitsBufferDoesNotWrap) {
  // offset + nbytes wraps to 63; a naive sum would accept it.
  EXPECT_EQ(message(tensor_fits_buffer(64, UINT64_MAX, 4096)),
            "64 bytes at offset 18446744073709551615 do not fit in a storage of 4096 bytes");
  EXPECT_FALSE(tensor_fits_buffer(UINT64_MAX, 1, 4096));
  EXPECT_FALSE(tensor_fits_buffer(UINT64_MAX, UINT64_MAX, UINT64_MAX));
  EXPECT_TRUE(tensor_fits_buffer(UINT64_MAX, 0, UINT64_MAX));
  EXPECT_TRUE(tensor_fits_buffer(1, UINT64_MAX - 1, UINT64_MAX));
}

TEST(StorageRules, OffsetIsAligned) {
  EXPECT_TRUE(offset_is_aligned(0, 128, "global"));
  EXPECT_TRUE(offset_is_aligned(2048, 1024, "global.vtcm"));
  EXPECT_TRUE(offset_is_aligned(7, 1, "global"));
  EXPECT_EQ(message(offset_is_aligned(2112, 1024, "global.vtcm")),
            "offset 2112 is not a multiple of 1024, the alignment of scope 'global.vtcm'");
  EXPECT_FALSE(offset_is_aligned(UINT64_MAX, 2, "global"));
  EXPECT_FALSE(offset_is_aligned(0, 0, "global"));  // no alignment is a broken scope, never a pass
}

TEST(StorageRules, ImagePixelType) {
  EXPECT_TRUE(is_image_pixel_type(DType::kFloat32));
  EXPECT_TRUE(is_image_pixel_type(DType::kFloat16));
  EXPECT_EQ(message(is_image_pixel_type(DType::kInt32)),
            "an image storage holds RGBA float32 or float16 pixels, not int32");
  EXPECT_FALSE(is_image_pixel_type(DType::kUInt8));
}

TEST(StorageRules, TensorFitsImage) {
  EXPECT_TRUE(tensor_fits_image(ImageExtent{16, 8}, ImageExtent{16, 8}));
  EXPECT_TRUE(tensor_fits_image(ImageExtent{1, 1}, ImageExtent{16, 8}));
  EXPECT_TRUE(tensor_fits_image(ImageExtent{0, 0}, ImageExtent{1, 1}));
  EXPECT_EQ(message(tensor_fits_image(ImageExtent{16, 16}, ImageExtent{16, 8})),
            "needs an image of height 16 and width 16, but the storage is [16, 8]");
  EXPECT_FALSE(tensor_fits_image(ImageExtent{17, 8}, ImageExtent{16, 8}));
  EXPECT_FALSE(tensor_fits_image(ImageExtent{UINT64_MAX, 1}, ImageExtent{16, 8}));
}

}  // namespace
}  // namespace stowage
