/* What the pooling kernels on buffers and on images share (docs/operators.md):
 * the window of an output inside the input, the divisor of an average pool, the
 * global average pool's sum over a work-group, the end of a pooled linear layer, and
 * the squeeze-and-excitation kernels' sum over lanes. */
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

/* (Needs <stowage/epilogue.cl.h> included before this header.)
 * The end of stowage_pooled_linear and its image twin: adds the work-items'
 * PL_ROWS partial sums acc[] over the work-group in a fixed order (t: the local
 * id; partial: PL_ROWS * PL_LOCAL floats of local memory) and writes outputs
 * j0 .. j0 + PL_ROWS - 1 of row n of y [N, J], with bias and activation. */
inline void stowage_pooled_linear_end(const float* acc, __local float* partial, int t, int n, int j0, int J,
                                      __global const float* bias, __global float* y, int flags, int act, float act_a,
                                      float act_b) {
  for (int r = 0; r < PL_ROWS; ++r) partial[r * PL_LOCAL + t] = acc[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = PL_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step)
      for (int r = 0; r < PL_ROWS; ++r) partial[r * PL_LOCAL + t] += partial[r * PL_LOCAL + t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t < PL_ROWS && j0 + t < J) {
    const float v = partial[t * PL_LOCAL] + ((flags & STOWAGE_EPI_BIAS) ? bias[j0 + t] : 0.0f);
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

#endif
