// Pooling on NCHW float32 buffers (docs/operators.md). Input [N, C, H, W],
// output [N, C, P, Q]; the window of output (p, q) starts at input row
// p * stride_h - pad_top and column q * stride_w - pad_left.
//
// stowage_max_pool2d: the largest value of the window (taps dil_h, dil_w apart)
//   inside the input; padding is ignored.
// stowage_avg_pool2d: the mean of the window. count_include_pad = 0 divides by
//   the taps inside the input, 1 by the taps inside the padded input
//   [-pad_top, H + pad_bottom) x [-pad_left, W + pad_right).
//   Launch (both): grid = [Q rounded up to local0, P rounded up to local1, N * C].
// stowage_global_avg_pool: y[i] = mean of x[i * HW .. i * HW + HW), i < rows, one
//   work-group of GAP_LOCAL work-items per row, summed in a fixed order.
//   Launch: local = [GAP_LOCAL, 1], grid = [GAP_LOCAL, rows].
// stowage_global_avg_pool_split: the same of an x that a split reduction left in
//   parts, not yet added up: x holds in_parts planes of in_plane values, and value e
//   is their sum in part order plus in_bias[e / in_row] and in_res[e] (bits 1 and 2
//   of in_flags), as the split's sum kernels add them; it also writes that sum to
//   x_sum[e], the added-up x for its other readers. Launch as stowage_global_avg_pool.
// stowage_pooled_linear: y [N, J] = act(bias + x [N, C] times w [J, C]^T): the
//   linear layer after a global average pool (x, its result) with constant weights,
//   at small batch, without split-K's second launch. A work-group of PL_LOCAL
//   work-items makes PL_ROWS outputs of one image: each work-item multiplies the
//   channels t, t + PL_LOCAL, ... (neighbouring work-items, neighbouring weights)
//   into its PL_ROWS sums, which the work-group adds in a fixed order.
//   Launch: local = [PL_LOCAL, 1], grid = [PL_LOCAL, N * ceil(J / PL_ROWS)]. Built
//   with PL_NORM 1, it normalizes each row of x first (<stowage/pooling.cl.h>).
// stowage_squeeze, stowage_excite: a squeeze-and-excitation's scales per image and
//   channel, s [N, C] = act2(b2 + w2 act1(b1 + w1 mean_HW(x))) for x [N, C, HW], w1 [R, C],
//   w2t [R, C] (w2 [C, R] transposed), b1 [R], b2 [C] (zeros for none), in two launches
//   that each fill the device:
//   stowage_squeeze: a work-group takes `slots` = SE_LOCAL / lanes neighbouring channels of
//     an image (block blk), their means (`lanes` work-items a channel, a power of two,
//     added in a fixed order), and their part of the first 1x1 convolution:
//     p[n][blk][r] = sum over its channels c of w1[r][c] mean_c, p [N, blocks, R].
//     Launch: local = [SE_LOCAL, 1], grid = [SE_LOCAL, N * blocks], blocks = ceil(C / slots).
//   The constants of a launch come as one buffer, params (a pointer argument costs
//   NVIDIA's host about 1 us a launch, docs/vm_overhead.md): b1, w2t, b2 in that
//   order for stowage_excite, w1t, b1, w2t, b2 for stowage_excite_sums.
//   stowage_excite: a work-group adds the parts of every hidden value of an image,
//     act1(b1[r] + sum over blk of p[n][blk][r]) (R <= SE_MAX_HIDDEN), then writes the
//     scales of a block of SE_BLOCK channels, SE_LOCAL / SE_BLOCK work-items each.
//     Launch: local = [SE_LOCAL, 1], grid = [SE_LOCAL, N * ceil(C / SE_BLOCK)].
//   stowage_excite_sums: stowage_excite where the pool came with x: sums [N, C, G]
//     holds G parts of each channel's sum (stowage_conv2d_depthwise built with
//     DW_SUMS), mean = inv_hw times their sum (added in order), and the work-group
//     applies the first convolution itself, w1t [C, R] (w1 transposed), C <=
//     SE_MAX_CHANNELS: the squeeze and the excitation in one launch, launched as stowage_excite.
#include <stowage/epilogue.cl.h>
#include <stowage/pooling.cl.h>

#ifndef SE_LOCAL
#define SE_LOCAL 256  // work-items of a squeeze-and-excitation work-group (a power of two)
#endif
#ifndef SE_BLOCK
#define SE_BLOCK 64  // scales a work-group of stowage_excite writes (dividing SE_LOCAL)
#endif
#ifndef SE_MAX_HIDDEN
#define SE_MAX_HIDDEN 1024  // the most hidden values (squeezed channels) of stowage_excite
#endif
#ifndef SE_MAX_CHANNELS
#define SE_MAX_CHANNELS 2048  // the most channels of stowage_excite_sums
#endif
#if SE_LOCAL & (SE_LOCAL - 1) || SE_LOCAL % SE_BLOCK || SE_LOCAL % SE_MIN_LANES
#error "SE_LOCAL must be a power of two, SE_BLOCK and SE_MIN_LANES divide it"
#endif

__kernel void stowage_max_pool2d(__global const float* x, __global float* y, int H, int W, int P, int Q, int kernel_h,
                                 int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left, int dil_h,
                                 int dil_w) {
  const int q = get_global_id(0), p = get_global_id(1), plane = get_global_id(2);
  if (q >= Q || p >= P) return;
  const __global float* xp = x + plane * H * W;
  const int h0 = p * stride_h - pad_top, w0 = q * stride_w - pad_left;
  float best = -INFINITY;
  for (int r = 0; r < kernel_h; ++r) {
    const int ih = h0 + r * dil_h;
    if (ih < 0 || ih >= H) continue;
    for (int s = 0; s < kernel_w; ++s) {
      const int iw = w0 + s * dil_w;
      if (iw >= 0 && iw < W) best = fmax(best, xp[ih * W + iw]);
    }
  }
  y[(plane * P + p) * Q + q] = best;
}

__kernel void stowage_avg_pool2d(__global const float* x, __global float* y, int H, int W, int P, int Q, int kernel_h,
                                 int kernel_w, int stride_h, int stride_w, int pad_top, int pad_left, int pad_bottom,
                                 int pad_right, int count_include_pad) {
  const int q = get_global_id(0), p = get_global_id(1), plane = get_global_id(2);
  if (q >= Q || p >= P) return;
  const __global float* xp = x + plane * H * W;
  const int h0 = p * stride_h - pad_top, w0 = q * stride_w - pad_left;
  const int4 taps = stowage_pool_taps(h0, w0, kernel_h, kernel_w, H, W);
  float sum = 0.0f;
  for (int ih = taps.s0; ih < taps.s1; ++ih)
    for (int iw = taps.s2; iw < taps.s3; ++iw) sum += xp[ih * W + iw];
  const int count = stowage_avg_pool_count(taps, h0, w0, kernel_h, kernel_w, H, W, pad_top, pad_left, pad_bottom,
                                           pad_right, count_include_pad);
  y[(plane * P + p) * Q + q] = count > 0 ? sum / (float)count : 0.0f;
}

__kernel __attribute__((reqd_work_group_size(GAP_LOCAL, 1, 1))) void stowage_global_avg_pool(__global const float* x,
                                                                                             __global float* y,
                                                                                             int HW) {
  __local float partial[GAP_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  const __global float* xr = x + row * HW;
  float sum = 0.0f;
  for (int i = t; i < HW; i += GAP_LOCAL) sum += xr[i];
  partial[t] = sum;
  STOWAGE_GAP_SUM(partial, t);
  if (t == 0) y[row] = partial[0] / (float)HW;
}

__kernel __attribute__((reqd_work_group_size(GAP_LOCAL, 1, 1))) void stowage_global_avg_pool_split(
    __global const float* x, __global float* y, int HW, int in_parts, int in_plane, int in_row, int in_flags,
    __global const float* in_bias, __global const float* in_res, __global float* x_sum) {
  __local float partial[GAP_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  float sum = 0.0f;
  for (int i = t; i < HW; i += GAP_LOCAL) {
    const int e = row * HW + i;
    float v = 0.0f;
    for (int part = 0; part < in_parts; ++part) v += x[part * in_plane + e];
    if (in_flags & 1) v += in_bias[e / in_row];
    if (in_flags & 2) v += in_res[e];
    x_sum[e] = v;
    sum += v;
  }
  partial[t] = sum;
  STOWAGE_GAP_SUM(partial, t);
  if (t == 0) y[row] = partial[0] / (float)HW;
}

__kernel __attribute__((reqd_work_group_size(PL_LOCAL, 1, 1))) void stowage_pooled_linear(
    __global const float* x, __global const float* w, __global const float* bias, __global float* y, int C, int J,
    int flags, int act, float act_a, float act_b PL_NORM_PARAMS) {
  __local float partial[PL_SUMS * PL_LOCAL];
  const int t = get_local_id(0), blocks = (J + PL_ROWS - 1) / PL_ROWS;
  const int n = get_group_id(1) / blocks, j0 = (get_group_id(1) - n * blocks) * PL_ROWS;
  float acc[PL_SUMS];
  for (int r = 0; r < PL_SUMS; ++r) acc[r] = 0.0f;
  const float x0 = PL_NORM ? x[n * C] : 0.0f;
  for (int c = t; c < C; c += PL_LOCAL) {
    const float v = x[n * C + c] - x0;
    PL_ROW_STATS(acc, v);
    // A constant trip count keeps acc in registers; rows past J repeat the last.
#pragma unroll
    for (int r = 0; r < PL_ROWS; ++r) acc[r] = fma(w[min(j0 + r, J - 1) * C + c], v, acc[r]);
  }
  stowage_pooled_linear_end(acc, partial, t, n, j0, J, bias, y, flags, act, act_a, act_b PL_NORM_ARGS);
}

// stowage_pool_window: pooling over up to three spatial dimensions [D, H, W] (a 1D
//   or 2D pool has leading extents 1) with dilations, any output extent (ceil_mode
//   too): mode 0 the largest value of the window's taps inside the input, 1 their
//   mean (count_include_pad = 1: divided by the taps inside the padded input
//   [-b, size + e) of each dimension, else by those inside the input), 2 their Lp
//   norm (sum |x|^lp)^(1/lp). Output [planes, P0, P1, P2]; the window of output
//   (o0, o1, o2) starts at o * s - b in each dimension, taps d apart.
//   Launch: grid = [P2 rounded up to local0, P1 rounded up to local1, planes * P0].
// stowage_max_pool_indices: the largest value as mode 0, and its index (int64) in x
//   flattened: plane * D H W plus, with storage_order 0, (i0 H + i1) W + i2, with
//   storage_order 1 (column-major) i0 + i1 D + i2 D H (i1 + i2 H for a 2D pool).
//   Same launch.
#define STOWAGE_POOL_ARGS                                                                                            \
  int D, int H, int W, int P0, int P1, int P2, int k0, int k1, int k2, int s0, int s1, int s2, int b0, int b1, int b2, \
      int e0, int e1, int e2, int d0, int d1, int d2

__kernel void stowage_pool_window(__global const float* x, __global float* y, STOWAGE_POOL_ARGS, int mode,
                                  int count_include_pad, float lp) {
  const int o2 = get_global_id(0), o1 = get_global_id(1), z = get_global_id(2);
  if (o2 >= P2 || o1 >= P1) return;
  const int plane = z / P0, o0 = z - plane * P0;
  const __global float* xp = x + (long)plane * D * H * W;
  const int a0 = o0 * s0 - b0, a1 = o1 * s1 - b1, a2 = o2 * s2 - b2;
  float acc = mode == 0 ? -INFINITY : 0.0f;
  int inside = 0, padded = 0;
  for (int t0 = 0; t0 < k0; ++t0) {
    const int i0 = a0 + t0 * d0;
    if (i0 >= D + e0) break;
    for (int t1 = 0; t1 < k1; ++t1) {
      const int i1 = a1 + t1 * d1;
      if (i1 >= H + e1) break;
      for (int t2 = 0; t2 < k2; ++t2) {
        const int i2 = a2 + t2 * d2;
        if (i2 >= W + e2) break;
        ++padded;
        if (i0 < 0 || i0 >= D || i1 < 0 || i1 >= H || i2 < 0 || i2 >= W) continue;
        const float v = xp[(i0 * H + i1) * W + i2];
        ++inside;
        if (mode == 0)
          acc = fmax(acc, v);
        else if (mode == 1)
          acc += v;
        else
          acc += pow(fabs(v), lp);
      }
    }
  }
  float result = acc;
  if (mode == 1) {
    const int count = count_include_pad ? padded : inside;
    result = count > 0 ? acc / (float)count : 0.0f;
  } else if (mode == 2) {
    result = pow(acc, 1.0f / lp);
  }
  y[((long)plane * P0 + o0) * P1 * P2 + o1 * P2 + o2] = result;
}

__kernel void stowage_max_pool_indices(__global const float* x, __global float* y, __global long* indices,
                                       STOWAGE_POOL_ARGS, int storage_order) {
  const int o2 = get_global_id(0), o1 = get_global_id(1), z = get_global_id(2);
  if (o2 >= P2 || o1 >= P1) return;
  const int plane = z / P0, o0 = z - plane * P0;
  const __global float* xp = x + (long)plane * D * H * W;
  const int a0 = o0 * s0 - b0, a1 = o1 * s1 - b1, a2 = o2 * s2 - b2;
  float best = -INFINITY;
  int at0 = -1, at1 = 0, at2 = 0;
  for (int t0 = 0; t0 < k0; ++t0) {
    const int i0 = a0 + t0 * d0;
    if (i0 < 0 || i0 >= D) continue;
    for (int t1 = 0; t1 < k1; ++t1) {
      const int i1 = a1 + t1 * d1;
      if (i1 < 0 || i1 >= H) continue;
      for (int t2 = 0; t2 < k2; ++t2) {
        const int i2 = a2 + t2 * d2;
        if (i2 < 0 || i2 >= W) continue;
        const float v = xp[(i0 * H + i1) * W + i2];
        if (at0 < 0 || v > best) {
          best = v;
          at0 = i0;
          at1 = i1;
          at2 = i2;
        }
      }
    }
  }
  const long out = ((long)plane * P0 + o0) * P1 * P2 + o1 * P2 + o2;
  long index = (long)(at0 * H + at1) * W + at2;
  if (storage_order) index = at0 + (long)at1 * D + (long)at2 * D * H;  // column-major: dimension 0 fastest
  y[out] = best;
  indices[out] = (long)plane * D * H * W + index;
}

// ---- squeeze-and-excitation ----------------------------------------------------------

__kernel __attribute__((reqd_work_group_size(SE_LOCAL, 1, 1))) void stowage_squeeze(__global const float* x,
                                                                                    __global const float* w1,
                                                                                    __global float* p, int C, int HW,
                                                                                    int R, int lanes) {
  __local float partial[SE_LOCAL];
  const int t = get_local_id(0), slots = SE_LOCAL / lanes, blocks = (C + slots - 1) / slots;
  const int n = get_group_id(1) / blocks, blk = get_group_id(1) - n * blocks, c0 = blk * slots;
  const int lane = t & (lanes - 1), slot = t / lanes;
  float sum = 0.0f;
  if (c0 + slot < C) {
    const __global float* plane = x + (n * C + c0 + slot) * HW;
    for (int i = lane; i < HW; i += lanes) sum += plane[i];
  }
  partial[t] = sum;
  STOWAGE_SE_LANES_SUM(partial, t, lane, lanes);
  if (lane == 0) partial[t] /= (float)HW;  // channel c0 + slot's mean, at partial[slot * lanes]
  barrier(CLK_LOCAL_MEM_FENCE);
  const int count = min(slots, C - c0);
  for (int r = t; r < R; r += SE_LOCAL) {
    const __global float* row = w1 + r * C + c0;
    float v = 0.0f;
    for (int j = 0; j < count; ++j) v = fma(row[j], partial[j * lanes], v);
    p[(n * blocks + blk) * R + r] = v;
  }
}

// The scales of channels c0 .. c0 + SE_BLOCK - 1 of image n from its hidden values
// (in local memory; every work-item of the work-group calls it).
inline void stowage_excite_block(__local const float* hidden, __local float* part, __global const float* w2t,
                                 __global const float* b2, __global float* s, int n, int c0, int C, int R, int act2,
                                 float act2_a, float act2_b) {
  const int t = get_local_id(0), parts = SE_LOCAL / SE_BLOCK, k = t % SE_BLOCK, q = t / SE_BLOCK, c = c0 + k;
  part[t] = c < C ? stowage_se_dot(w2t, C, c, hidden, q, parts, R) : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (q == 0 && c < C) {
    float v = b2[c];
    for (int j = 0; j < parts; ++j) v += part[j * SE_BLOCK + k];
    s[n * C + c] = stowage_activate_code(v, act2, act2_a, act2_b);
  }
}

__kernel __attribute__((reqd_work_group_size(SE_LOCAL, 1, 1))) void stowage_excite(
    __global const float* p, __global const float* params, __global float* s, int C, int R, int blocks, int act1,
    float act1_a, float act1_b, int act2, float act2_a, float act2_b) {
  const __global float *b1 = params, *w2t = b1 + R, *b2 = w2t + R * C;
  __local float hidden[SE_MAX_HIDDEN];
  __local float part[SE_LOCAL];
  const int t = get_local_id(0), scale_blocks = (C + SE_BLOCK - 1) / SE_BLOCK;
  const int n = get_group_id(1) / scale_blocks, c0 = (get_group_id(1) - n * scale_blocks) * SE_BLOCK;
  const __global float* pn = p + n * blocks * R;
  for (int r = t; r < R; r += SE_LOCAL) {
    float v = b1[r];
    for (int b = 0; b < blocks; ++b) v += pn[b * R + r];
    hidden[r] = stowage_activate_code(v, act1, act1_a, act1_b);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  stowage_excite_block(hidden, part, w2t, b2, s, n, c0, C, R, act2, act2_a, act2_b);
}

__kernel __attribute__((reqd_work_group_size(SE_LOCAL, 1, 1))) void stowage_excite_sums(
    __global const float* sums, __global const float* params, __global float* s, int C, int R, int G, float inv_hw,
    int act1, float act1_a, float act1_b, int act2, float act2_a, float act2_b) {
  const __global float *w1t = params, *b1 = w1t + C * R, *w2t = b1 + R, *b2 = w2t + R * C;
  __local float mean[SE_MAX_CHANNELS];
  __local float hidden[SE_MAX_HIDDEN];
  __local float part[SE_LOCAL];
  const int t = get_local_id(0), scale_blocks = (C + SE_BLOCK - 1) / SE_BLOCK;
  const int n = get_group_id(1) / scale_blocks, c0 = (get_group_id(1) - n * scale_blocks) * SE_BLOCK;
  stowage_excite_hidden(sums + n * C * G, G, inv_hw, w1t, b1, C, R, act1, act1_a, act1_b, mean, hidden, part, t,
                        SE_LOCAL);
  stowage_excite_block(hidden, part, w2t, b2, s, n, c0, C, R, act2, act2_a, act2_b);
}
