/* What the pooling kernels on buffers and on images share (docs/operators.md):
 * the window of an output inside the input, the divisor of an average pool, and
 * the global average pool's sum over a work-group. */
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

#endif
