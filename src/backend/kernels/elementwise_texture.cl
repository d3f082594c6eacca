// Elementwise operators on NCHW4c images (docs/operators.md): tensors
// [N, C, H, W] in `global.texture` images [N, C4, H, W, 4]. Every kernel runs one
// work-item per pixel, ends in the activation of <stowage/epilogue.cl.h> and
// writes zeros into the lanes of channels >= C. Each image is followed by its tensor's
// offset in the image (<stowage/image_offset.cl.h>), added to the pixel's coordinates.
//   Launch: grid = [W rounded up to local0, N * C4 * H rounded up to local1].
//
// stowage_binary_image: y = act(a op b), a and b of y's shape (op codes of elementwise.cl).
// stowage_unary_image: y = act(x).
// stowage_channel_affine_image: y = act(x * scale[c] + shift[c]) with scale and
//   shift C4 float4s (BatchNormalization, or a binary op with a per-channel constant).
// stowage_binary_channels_image: y = act(a op b[n b_batch + c b_channel]), b a buffer
//   computed at run time with one value per image and channel (a squeeze-and-excitation
//   scale [N, C, 1, 1]; b_batch 0: the same for every image, b_channel 0: for every channel).
#include <stowage/epilogue.cl.h>
#include <stowage/image.cl.h>
#include <stowage/image_offset.cl.h>

inline float4 stowage_binary_op4(float4 a, float4 b, int op) {
  switch (op) {
    case 1:
      return a - b;
    case 2:
      return a * b;
    case 3:
      return a / b;
    default:
      return a + b;
  }
}

__kernel void stowage_binary_image(read_only image2d_t a, stowage_image_offset a_off, read_only image2d_t b,
                                   stowage_image_offset b_off, write_only image2d_t y, stowage_image_offset y_off,
                                   int rows, int H, int W, int C, int op, int act, float act_a, float act_b) {
  const int col = get_global_id(0), row = get_global_id(1);
  if (col >= W || row >= rows) return;
  const int c4 = (row / H) % ((C + 3) / 4);
  const int2 at = (int2)(col, row);
  const float4 va = read_imagef(a, kStowageSampler, at + a_off);
  const float4 vb = read_imagef(b, kStowageSampler, at + b_off);
  const float4 v = stowage_activate4(stowage_binary_op4(va, vb, op), act, act_a, act_b);
  write_imagef(y, at + y_off, stowage_mask_channels(v, c4, C));
}

__kernel void stowage_unary_image(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                                  stowage_image_offset y_off, int rows, int H, int W, int C, int act, float act_a,
                                  float act_b) {
  const int col = get_global_id(0), row = get_global_id(1);
  if (col >= W || row >= rows) return;
  const int c4 = (row / H) % ((C + 3) / 4);
  const int2 at = (int2)(col, row);
  const float4 v = stowage_activate4(read_imagef(x, kStowageSampler, at + x_off), act, act_a, act_b);
  write_imagef(y, at + y_off, stowage_mask_channels(v, c4, C));
}

__kernel void stowage_channel_affine_image(read_only image2d_t x, stowage_image_offset x_off,
                                           __global const float4* scale, __global const float4* shift,
                                           write_only image2d_t y, stowage_image_offset y_off, int rows, int H, int W,
                                           int C, int act, float act_a, float act_b) {
  const int col = get_global_id(0), row = get_global_id(1);
  if (col >= W || row >= rows) return;
  const int c4 = (row / H) % ((C + 3) / 4);
  const int2 at = (int2)(col, row);
  const float4 v = fma(read_imagef(x, kStowageSampler, at + x_off), scale[c4], shift[c4]);
  write_imagef(y, at + y_off, stowage_mask_channels(stowage_activate4(v, act, act_a, act_b), c4, C));
}

__kernel void stowage_binary_channels_image(read_only image2d_t a, stowage_image_offset a_off, __global const float* b,
                                            write_only image2d_t y, stowage_image_offset y_off, int rows, int H, int W,
                                            int C, int b_batch, int b_channel, int op, int act, float act_a,
                                            float act_b) {
  const int col = get_global_id(0), row = get_global_id(1);
  if (col >= W || row >= rows) return;
  const int C4 = (C + 3) / 4, plane = row / H, n = plane / C4, c4 = plane - n * C4, c = c4 * 4;
  const __global float* bn = b + n * b_batch;
  const float4 vb = (float4)(bn[c * b_channel], c + 1 < C ? bn[(c + 1) * b_channel] : 0.0f,
                             c + 2 < C ? bn[(c + 2) * b_channel] : 0.0f, c + 3 < C ? bn[(c + 3) * b_channel] : 0.0f);
  const int2 at = (int2)(col, row);
  const float4 v =
      stowage_activate4(stowage_binary_op4(read_imagef(a, kStowageSampler, at + a_off), vb, op), act, act_a, act_b);
  write_imagef(y, at + y_off, stowage_mask_channels(v, c4, C));
}
