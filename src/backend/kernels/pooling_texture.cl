// Pooling on NCHW4c images (docs/operators.md): the buffer kernels of
// pooling.cl on `global.texture` images [N, C4, H, W, 4], 4 channels a pixel.
//
// stowage_max_pool2d_image, stowage_avg_pool2d_image: arguments as in pooling.cl,
//   with planes = N * C4 image planes of H rows.
//   Launch: grid = [Q rounded up to local0, P rounded up to local1, N * C4].
// stowage_global_avg_pool_image: y [N, C4, 1, 1, 4] (height N * C4, width 1), the
//   mean of each plane's H * W pixels; one work-group of GAP_LOCAL work-items a
//   plane, summed in a fixed order.
//   Launch: local = [GAP_LOCAL, 1], grid = [GAP_LOCAL, N * C4].
// stowage_pooled_linear_image: stowage_pooled_linear (pooling.cl) reading x, a global
//   average pool's result, from its image [N, C4, 1, 1, 4]; w, bias and y are
//   buffers as there. Launch as there.
// stowage_squeeze_image: stowage_squeeze (pooling.cl) reading x from its image
//   [N, C4, H, W, 4]: a work-group takes `slots` = SE_LOCAL / lanes neighbouring blocks of
//   4 channels (blocks = ceil(C4 / slots)); w1 and p are buffers as there. Launch as there.
// Padded channels stay zero: every operation maps zeros to zeros. Each image is followed
// by its tensor's offset in the image (<stowage/image_offset.cl.h>); windows are clipped
// to the tensor's extents, never padded by the pixels around it.
#include <stowage/epilogue.cl.h>
#include <stowage/image.cl.h>
#include <stowage/image_offset.cl.h>
#include <stowage/pooling.cl.h>

#ifndef SE_LOCAL
#define SE_LOCAL 256  // work-items of a squeeze-and-excitation work-group (a power of two)
#endif
#if SE_LOCAL & (SE_LOCAL - 1)
#error "SE_LOCAL must be a power of two"
#endif

__kernel void stowage_max_pool2d_image(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                                       stowage_image_offset y_off, int H, int W, int P, int Q, int kernel_h,
                                       int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left, int dil_h,
                                       int dil_w) {
  const int q = get_global_id(0), p = get_global_id(1), plane = get_global_id(2);
  if (q >= Q || p >= P) return;
  const int h0 = p * stride_h - pad_top, w0 = q * stride_w - pad_left;
  const int plane_row = plane * H + x_off.y;
  float4 best = (float4)(-INFINITY);
  for (int r = 0; r < kernel_h; ++r) {
    const int ih = h0 + r * dil_h;
    if (ih < 0 || ih >= H) continue;
    for (int s = 0; s < kernel_w; ++s) {
      const int iw = w0 + s * dil_w;
      if (iw >= 0 && iw < W) best = fmax(best, read_imagef(x, kStowageSampler, (int2)(iw + x_off.x, plane_row + ih)));
    }
  }
  write_imagef(y, (int2)(q, plane * P + p) + y_off, best);
}

__kernel void stowage_avg_pool2d_image(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                                       stowage_image_offset y_off, int H, int W, int P, int Q, int kernel_h,
                                       int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left,
                                       int pad_bottom, int pad_right, int count_include_pad) {
  const int q = get_global_id(0), p = get_global_id(1), plane = get_global_id(2);
  if (q >= Q || p >= P) return;
  const int h0 = p * stride_h - pad_top, w0 = q * stride_w - pad_left;
  const int4 taps = stowage_pool_taps(h0, w0, kernel_h, kernel_w, H, W);
  const int plane_row = plane * H + x_off.y;
  float4 sum = (float4)(0.0f);
  for (int ih = taps.s0; ih < taps.s1; ++ih)
    for (int iw = taps.s2; iw < taps.s3; ++iw)
      sum += read_imagef(x, kStowageSampler, (int2)(iw + x_off.x, plane_row + ih));
  const int count = stowage_avg_pool_count(taps, h0, w0, kernel_h, kernel_w, H, W, pad_top, pad_left, pad_bottom,
                                           pad_right, count_include_pad);
  write_imagef(y, (int2)(q, plane * P + p) + y_off, count > 0 ? sum / (float)count : (float4)(0.0f));
}

__kernel __attribute__((reqd_work_group_size(GAP_LOCAL, 1, 1))) void stowage_global_avg_pool_image(
    read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y, stowage_image_offset y_off, int H,
    int W) {
  __local float4 partial[GAP_LOCAL];
  const int t = get_local_id(0), plane = get_group_id(1);
  const int plane_row = plane * H + x_off.y;
  float4 sum = (float4)(0.0f);
  for (int i = t; i < H * W; i += GAP_LOCAL) {
    const int h = i / W;
    sum += read_imagef(x, kStowageSampler, (int2)(i - h * W + x_off.x, plane_row + h));
  }
  partial[t] = sum;
  STOWAGE_GAP_SUM(partial, t);
  if (t == 0) write_imagef(y, (int2)(0, plane) + y_off, partial[0] / (float)(H * W));
}

__kernel __attribute__((reqd_work_group_size(PL_LOCAL, 1, 1))) void stowage_pooled_linear_image(
    read_only image2d_t x, stowage_image_offset x_off, __global const float* w, __global const float* bias,
    __global float* y, int C, int J, int flags, int act, float act_a, float act_b PL_NORM_PARAMS) {
  __local float partial[PL_SUMS * PL_LOCAL];
  const int t = get_local_id(0), blocks = (J + PL_ROWS - 1) / PL_ROWS;
  const int n = get_group_id(1) / blocks, j0 = (get_group_id(1) - n * blocks) * PL_ROWS;
  const int C4 = (C + 3) / 4;
  float acc[PL_SUMS];
  for (int r = 0; r < PL_SUMS; ++r) acc[r] = 0.0f;
  const float x0 = PL_NORM ? read_imagef(x, kStowageSampler, (int2)(0, n * C4) + x_off).x : 0.0f;
  for (int cb = t; cb < C4; cb += PL_LOCAL) {
    const float4 v = read_imagef(x, kStowageSampler, (int2)(0, n * C4 + cb) + x_off) - x0;
    const int c = cb * 4, lanes = min(4, C - c);
    PL_ROW_STATS(acc, v.x);
    if (lanes > 1) PL_ROW_STATS(acc, v.y);
    if (lanes > 2) PL_ROW_STATS(acc, v.z);
    if (lanes > 3) PL_ROW_STATS(acc, v.w);
#pragma unroll
    for (int r = 0; r < PL_ROWS; ++r) {  // rows past J repeat the last (not written)
      const __global float* wr = w + min(j0 + r, J - 1) * C + c;
      float a = fma(wr[0], v.x, acc[r]);
      if (lanes > 1) a = fma(wr[1], v.y, a);
      if (lanes > 2) a = fma(wr[2], v.z, a);
      if (lanes > 3) a = fma(wr[3], v.w, a);
      acc[r] = a;
    }
  }
  stowage_pooled_linear_end(acc, partial, t, n, j0, J, bias, y, flags, act, act_a, act_b PL_NORM_ARGS);
}

// ---- squeeze-and-excitation ----------------------------------------------------------

__kernel __attribute__((reqd_work_group_size(SE_LOCAL, 1, 1))) void stowage_squeeze_image(
    read_only image2d_t x, stowage_image_offset x_off, __global const float* w1, __global float* p, int C, int H, int W,
    int R, int lanes) {
  __local float4 partial[SE_LOCAL];
  const int t = get_local_id(0), C4 = (C + 3) / 4, HW = H * W;
  const int slots = SE_LOCAL / lanes, blocks = (C4 + slots - 1) / slots;
  const int n = get_group_id(1) / blocks, blk = get_group_id(1) - n * blocks, b0 = blk * slots;
  const int lane = t & (lanes - 1), slot = t / lanes;
  float4 sum = (float4)(0.0f);
  if (b0 + slot < C4) {
    const int plane_row = (n * C4 + b0 + slot) * H + x_off.y;
    for (int i = lane; i < HW; i += lanes) {
      const int h = i / W;
      sum += read_imagef(x, kStowageSampler, (int2)(i - h * W + x_off.x, plane_row + h));
    }
  }
  partial[t] = sum;
  STOWAGE_SE_LANES_SUM(partial, t, lane, lanes);
  if (lane == 0) partial[t] /= (float)HW;  // the means of block b0 + slot, at partial[slot * lanes]
  barrier(CLK_LOCAL_MEM_FENCE);
  const int c0 = b0 * 4, count = min(slots * 4, C - c0);
  for (int r = t; r < R; r += SE_LOCAL) {
    const __global float* row = w1 + r * C + c0;
    float v = 0.0f;
    for (int j = 0; j < count; j += 4) {  // channels past C: zero means, w1 not read
      const float4 m = partial[(j / 4) * lanes];
      v = fma(row[j], m.x, v);
      if (j + 1 < count) v = fma(row[j + 1], m.y, v);
      if (j + 2 < count) v = fma(row[j + 2], m.z, v);
      if (j + 3 < count) v = fma(row[j + 3], m.w, v);
    }
    p[(n * blocks + blk) * R + r] = v;
  }
}
