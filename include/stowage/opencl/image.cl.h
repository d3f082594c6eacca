/* Helpers of the texture (NCHW4c image) kernels of Stowage's operator library
 * (docs/operators.md). A tensor [N, C, H, W] lives in a `global.texture` image as
 * [N, ceil(C/4), H, W, 4]: the pixel at column w, row (n * C4 + c4) * H + h holds
 * channels 4 c4 .. 4 c4 + 3 of position (h, w). */
#ifndef STOWAGE_IMAGE_CL_H
#define STOWAGE_IMAGE_CL_H

/* Image reads of the texture kernels: unnormalised coordinates. The clamp only
 * keeps a stray read defined: kernels test their tensor's extents themselves, since
 * the pixels around a tensor may belong to other tensors of the same image. */
__constant sampler_t kStowageSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;

/* Zeroes the lanes of a pixel that hold channels c4 * 4 + i >= C (NCHW4c pads
 * the channels to a multiple of 4 with zeros). */
inline float4 stowage_mask_channels(float4 v, int c4, int C) {
  const int left = C - c4 * 4;
  if (left >= 4) return v;
  return (float4)(left > 0 ? v.x : 0.0f, left > 1 ? v.y : 0.0f, left > 2 ? v.z : 0.0f, 0.0f);
}

#endif
