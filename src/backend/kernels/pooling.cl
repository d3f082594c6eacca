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
// stowage_pooled_linear: y [N, J] = act(bias + x [N, C] times w [J, C]^T): the
//   linear layer after a global average pool (x, its result) with constant weights,
//   at small batch, without split-K's second launch. A work-group of PL_LOCAL
//   work-items makes PL_ROWS outputs of one image: each work-item multiplies the
//   channels t, t + PL_LOCAL, ... (neighbouring work-items, neighbouring weights)
//   into its PL_ROWS sums, which the work-group adds in a fixed order.
//   Launch: local = [PL_LOCAL, 1], grid = [PL_LOCAL, N * ceil(J / PL_ROWS)].
#include <stowage/epilogue.cl.h>
#include <stowage/pooling.cl.h>

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

__kernel __attribute__((reqd_work_group_size(PL_LOCAL, 1, 1))) void stowage_pooled_linear(
    __global const float* x, __global const float* w, __global const float* bias, __global float* y, int C, int J,
    int flags, int act, float act_a, float act_b) {
  __local float partial[PL_ROWS * PL_LOCAL];
  const int t = get_local_id(0), blocks = (J + PL_ROWS - 1) / PL_ROWS;
  const int n = get_group_id(1) / blocks, j0 = (get_group_id(1) - n * blocks) * PL_ROWS;
  float acc[PL_ROWS];
  for (int r = 0; r < PL_ROWS; ++r) acc[r] = 0.0f;
  for (int c = t; c < C; c += PL_LOCAL) {
    const float v = x[n * C + c];
    // A constant trip count keeps acc in registers; rows past J repeat the last.
#pragma unroll
    for (int r = 0; r < PL_ROWS; ++r) acc[r] = fma(w[min(j0 + r, J - 1) * C + c], v, acc[r]);
  }
  stowage_pooled_linear_end(acc, partial, t, n, j0, J, bias, y, flags, act, act_a, act_b);
}
