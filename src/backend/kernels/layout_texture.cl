// Layout transforms between NCHW buffers and NCHW4c images (docs/operators.md).
// A tensor [N, C, H, W] lives in a `global.texture` image as [N, C4, H, W, 4]:
// channel c of position (h, w) is lane c % 4 of the pixel at column w, row
// (n * C4 + c / 4) * H + h; lanes of channels >= C hold zeros.
//   Launch (both): grid = [W rounded up to local0, H rounded up to local1, N * C4].
//
// stowage_nchw_to_image: x (buffer) -> y (image).
// stowage_image_to_nchw: x (image) -> y (buffer).
// stowage_copy_image_channels: copies x [N, Cx4, H, W, 4] into the blocks
//   c4_offset .. c4_offset + Cx4 - 1 of y [N, Cy4, H, W, 4] (a concatenation of
//   inputs whose channel counts are multiples of 4). Launch: grid as above, N * Cx4.
// Each image is followed by its tensor's offset in the image (<stowage/image_offset.cl.h>).
#include <stowage/image.cl.h>
#include <stowage/image_offset.cl.h>

__kernel void stowage_nchw_to_image(__global const float* x, write_only image2d_t y, stowage_image_offset y_off, int C,
                                    int H, int W) {
  const int w = get_global_id(0), h = get_global_id(1), plane = get_global_id(2);
  if (w >= W || h >= H) return;
  const int C4 = (C + 3) / 4, img = plane / C4, c = (plane - img * C4) * 4;
  const int HW = H * W, at = (img * C + c) * HW + h * W + w;
  const float4 v = (float4)(x[at], c + 1 < C ? x[at + HW] : 0.0f, c + 2 < C ? x[at + 2 * HW] : 0.0f,
                            c + 3 < C ? x[at + 3 * HW] : 0.0f);
  write_imagef(y, (int2)(w, plane * H + h) + y_off, v);
}

__kernel void stowage_image_to_nchw(read_only image2d_t x, stowage_image_offset x_off, __global float* y, int C, int H,
                                    int W) {
  const int w = get_global_id(0), h = get_global_id(1), plane = get_global_id(2);
  if (w >= W || h >= H) return;
  const int C4 = (C + 3) / 4, img = plane / C4, c = (plane - img * C4) * 4;
  const int HW = H * W, at = (img * C + c) * HW + h * W + w;
  const float4 v = read_imagef(x, kStowageSampler, (int2)(w, plane * H + h) + x_off);
  y[at] = v.x;
  if (c + 1 < C) y[at + HW] = v.y;
  if (c + 2 < C) y[at + 2 * HW] = v.z;
  if (c + 3 < C) y[at + 3 * HW] = v.w;
}

__kernel void stowage_copy_image_channels(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                                          stowage_image_offset y_off, int Cx4, int Cy4, int c4_offset, int H, int W) {
  const int w = get_global_id(0), h = get_global_id(1), plane = get_global_id(2);
  if (w >= W || h >= H) return;
  const int img = plane / Cx4, c4 = plane - img * Cx4;
  const float4 v = read_imagef(x, kStowageSampler, (int2)(w, plane * H + h) + x_off);
  write_imagef(y, (int2)(w, (img * Cy4 + c4_offset + c4) * H + h) + y_off, v);
}
