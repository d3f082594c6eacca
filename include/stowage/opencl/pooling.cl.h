/* What the pooling kernels on buffers and on images share (docs/operators.md):
 * the window of an output inside the input, the divisor of an average pool, the
 * global average pool's sum over a work-group, the end of a pooled linear layer, and
 * the squeeze-and-excitation's sums and hidden values. */
#ifndef STOWAGE_POOLING_CL_H
#define STOWAGE_POOLING_CL_H

#ifndef GAP_LOCAL
#define GAP_LOCAL 64  // work-items of a global average pool's work-group
#endif
#if GAP_LOCAL & (GAP_LOCAL - 1)
#error "GAP_LOCAL must be a power of two"
#endif

/* The taps of the window that starts at input row h0, column w0 and lie inside the
 * H x W input: rows [s0, s1), columns [s2, s3). */
inline int4 stowage_pool_taps(int h0, int w0, int kernel_h, int kernel_w, int H, int W) {
  return (int4)(max(h0, 0), min(h0 + kernel_h, H), max(w0, 0), min(w0 + kernel_w, W));
}

/* The divisor of an average pool: the taps inside the input, or with count_include_pad
 * those inside the padded input [-pad_top, H + pad_bottom) x [-pad_left, W + pad_right). */
inline int stowage_avg_pool_count(int4 taps, int h0, int w0, int kernel_h, int kernel_w, int H, int W, int pad_top,
                                  int pad_left, int pad_bottom, int pad_right, int count_include_pad) {
  if (!count_include_pad) return (taps.s1 - taps.s0) * (taps.s3 - taps.s2);
  return (min(h0 + kernel_h, H + pad_bottom) - max(h0, -pad_top)) *
         (min(w0 + kernel_w, W + pad_right) - max(w0, -pad_left));
}

/* Adds partial[0 .. GAP_LOCAL) into partial[0] by halving, in a fixed order. Every
 * work-item of the work-group (t: its local id) runs it once it has written
 * partial[t]. A macro, so that partial may hold floats or float4s. */
#define STOWAGE_GAP_SUM(partial, t)                                  \
  do {                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                    \
    for (int step_ = GAP_LOCAL / 2; step_ > 0; step_ >>= 1) {        \
      if ((t) < step_) partial[t] += partial[(t) + step_];           \
      barrier(CLK_LOCAL_MEM_FENCE);                                  \
    }                                                                \
  } while (0)

#ifndef PL_LOCAL
#define PL_LOCAL 128  // work-items of a work-group of stowage_pooled_linear
#endif
#ifndef PL_ROWS
#define PL_ROWS 4  // outputs of a work-group of stowage_pooled_linear
#endif
#if PL_LOCAL & (PL_LOCAL - 1)
#error "PL_LOCAL must be a power of two"
#endif
#if PL_ROWS > PL_LOCAL
#error "PL_ROWS must not exceed PL_LOCAL (one work-item writes each output)"
#endif

// A unit built with PL_NORM 1 normalizes each pooled row x [n, 0 .. C) over its C
// values before the product, as a LayerNormalization between the pool and the linear
// layer does, whose scale and bias the caller folded into w and the bias:
//   y[n][j] = act(inv_n (sum_c w[j][c] (x[n][c] - x0) - m_n colsum[j]) + bias[j])
// with x0 = x[n][0] (a shift that keeps a large mean from cancelling the variance),
// m_n the mean of x[n][c] - x0, inv_n = 1 / sqrt(variance_n + norm_eps) and
// colsum[j] = sum_c w[j][c]: two more arguments after act_b, colsum and norm_eps.
#ifndef PL_NORM
#define PL_NORM 0
#endif
#if PL_NORM
#define PL_SUMS (PL_ROWS + 2)  // the outputs' sums, then the row's sum and sum of squares
#define PL_NORM_PARAMS , __global const float *colsum, float norm_eps
#define PL_NORM_ARGS , colsum, norm_eps, C
#define PL_NORM_END_PARAMS , __global const float *colsum, float norm_eps, int C
#else
#define PL_SUMS PL_ROWS
#define PL_NORM_PARAMS
#define PL_NORM_ARGS
#define PL_NORM_END_PARAMS
#endif

/* Adds a pooled value v (less x0) into the row's sums a work-item keeps after its
 * PL_ROWS outputs' sums in acc[PL_SUMS], where the row is normalized. */
#if PL_NORM
#define PL_ROW_STATS(acc, v)                               \
  do {                                                     \
    (acc)[PL_ROWS] += (v);                                 \
    (acc)[PL_ROWS + 1] = fma((v), (v), (acc)[PL_ROWS + 1]); \
  } while (0)
#else
#define PL_ROW_STATS(acc, v) \
  do {                       \
  } while (0)
#endif

/* (Needs <stowage/epilogue.cl.h> included before this header.)
 * The end of stowage_pooled_linear and its image twin: adds the work-items'
 * PL_SUMS partial sums acc[] over the work-group in a fixed order (t: the local
 * id; partial: PL_SUMS * PL_LOCAL floats of local memory) and writes outputs
 * j0 .. j0 + PL_ROWS - 1 of row n of y [N, J], normalized (PL_NORM), with bias and
 * activation. */
inline void stowage_pooled_linear_end(const float* acc, __local float* partial, int t, int n, int j0, int J,
                                      __global const float* bias, __global float* y, int flags, int act, float act_a,
                                      float act_b PL_NORM_END_PARAMS) {
  for (int r = 0; r < PL_SUMS; ++r) partial[r * PL_LOCAL + t] = acc[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = PL_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step)
      for (int r = 0; r < PL_SUMS; ++r) partial[r * PL_LOCAL + t] += partial[r * PL_LOCAL + t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t < PL_ROWS && j0 + t < J) {
    float v = partial[t * PL_LOCAL];
#if PL_NORM
    const float mean = partial[PL_ROWS * PL_LOCAL] / (float)C;
    const float inv = rsqrt(fmax(partial[(PL_ROWS + 1) * PL_LOCAL] / (float)C - mean * mean, 0.0f) + norm_eps);
    v = (v - mean * colsum[j0 + t]) * inv;
#endif
    v += (flags & STOWAGE_EPI_BIAS) ? bias[j0 + t] : 0.0f;
    y[n * J + j0 + t] = stowage_activate(v, act, act_a, act_b);
  }
}

/* Adds partial[t .. t + lanes) into partial[t] for the work-items of lane 0 (`lanes`
 * a power of two, the same in the whole work-group), in a fixed order; every
 * work-item runs it once it has written partial[t]. */
#define STOWAGE_SE_LANES_SUM(partial, t, lane, lanes)          \
  do {                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                              \
    for (int step_ = (lanes) / 2; step_ > 0; step_ >>= 1) {    \
      if ((lane) < step_) partial[t] += partial[(t) + step_];  \
      barrier(CLK_LOCAL_MEM_FENCE);                            \
    }                                                          \
  } while (0)

/* The squeeze-and-excitation's shared steps (stowage_excite_sums in pooling.cl, the
 * direct convolution that computes its input's scale in conv_direct.cl). They call
 * stowage_activate_code: include <stowage/epilogue.cl.h> before this header. */
#ifndef SE_MIN_LANES
#define SE_MIN_LANES 4  // the fewest work-items a hidden value's sum is spread over
#endif

/* The sum over i = first, first + step, ... below end of w[i * stride + at] * v[i], in 16
 * sums of every 16th term (16 loads of w in flight at once, where one chain of
 * dependent loads ran MobileNetV3-large's 672 x 168 blocks in 62 us), added in a
 * fixed order. */
inline float stowage_se_dot(__global const float* w, int stride, int at, __local const float* v, int first,
                            int step, int end) {
  float a[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) a[i] = 0.0f;
  int k = first;
  for (; k + 15 * step < end; k += 16 * step) {
#pragma unroll
    for (int i = 0; i < 16; ++i) a[i] = fma(w[(k + i * step) * stride + at], v[k + i * step], a[i]);
  }
  for (; k < end; k += step) a[0] = fma(w[k * stride + at], v[k], a[0]);  // a constant index: registers
  return (((a[0] + a[8]) + (a[4] + a[12])) + ((a[2] + a[10]) + (a[6] + a[14]))) +
         (((a[1] + a[9]) + (a[5] + a[13])) + ((a[3] + a[11]) + (a[7] + a[15])));
}

/* One image's hidden values from its channel sums: mean[c] = inv_hw times the G parts
 * sums[c G ..] added in order, then hidden[r] = act1(b1[r] + sum over c of w1t[c R + r]
 * mean[c]) (w1t [C, R]), `rows` hidden values at a time, each summed by `lanes` (at
 * least SE_MIN_LANES) work-items over every lanes-th channel (neighbouring work-items,
 * neighbouring hidden values: neighbouring weights), their parts then added in order:
 * a work-item walks C R / items channels, not C. Every work-item t < items of the
 * work-group calls it; part holds `items` floats; it ends with a barrier. */
inline void stowage_excite_hidden(__global const float* sums, int G, float inv_hw, __global const float* w1t,
                                  __global const float* b1, int C, int R, int act1, float act1_a, float act1_b,
                                  __local float* mean, __local float* hidden, __local float* part, int t,
                                  int items) {
  for (int c = t; c < C; c += items) {
    const __global float* parts = sums + c * G;
    float v = 0.0f;
    for (int g = 0; g < G; ++g) v += parts[g];
    mean[c] = v * inv_hw;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int rows = max(1, min(R, items / SE_MIN_LANES)), lanes = items / rows, row = t % rows, lane = t / rows;
  for (int r0 = 0; r0 < R; r0 += rows) {
    const int r = r0 + row;
    part[t] = (lane < lanes && r < R) ? stowage_se_dot(w1t, R, r, mean, lane, lanes, C) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && r < R) {
      float v = b1[r];
      for (int j = 0; j < lanes; ++j) v += part[j * rows + row];
      hidden[r] = stowage_activate_code(v, act1, act1_a, act1_b);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

#endif
