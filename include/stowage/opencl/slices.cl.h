/* The slices of a work-group in Stowage's convolution kernels (docs/operators.md):
 * the local[2] slices of a work-group split a reduction (every slices-th input
 * channel or block to each), then add their partial sums through local memory.
 *
 * A work-item holds a register block `float4 acc[OB][PX]`; output j = o * PX + i of
 * the block is finished by slice j % slices, which adds every slice's value of it in
 * slice order (a fixed order: the sums do not depend on the scheduling).
 *
 * These are macros, not functions: their loops unroll over constant indices, so
 * that acc stays in registers (a pointer to it would put it in memory). Every
 * work-item of the work-group must reach STOWAGE_SLICES_REDUCE (it holds a barrier
 * when slices > 1); `partial` is `__local float4[items * slices * OB * PX]` at least. */
#ifndef STOWAGE_SLICES_CL_H
#define STOWAGE_SLICES_CL_H

/* Index of output j of work-item t (of `items` a slice) in slice sl's partial sums. */
#define STOWAGE_SLICES_AT(sl, j, OB, PX, items, t) ((((sl) * (OB) * (PX)) + (j)) * (items) + (t))

/* Leaves in acc[o][i], for the outputs this slice finishes, the sum over every slice
 * (with one slice, acc as it is). */
#define STOWAGE_SLICES_REDUCE(partial, acc, OB, PX, slice, slices, items, t)                     \
  do {                                                                                           \
    if ((slices) <= 1) break;                                                                    \
    _Pragma("unroll") for (int o_ = 0; o_ < (OB); ++o_)                                          \
      _Pragma("unroll") for (int i_ = 0; i_ < (PX); ++i_)                                        \
        partial[STOWAGE_SLICES_AT(slice, o_ * (PX) + i_, OB, PX, items, t)] = acc[o_][i_];       \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    _Pragma("unroll") for (int o_ = 0; o_ < (OB); ++o_)                                          \
      _Pragma("unroll") for (int i_ = 0; i_ < (PX); ++i_) {                                     \
        const int j_ = o_ * (PX) + i_;                                                           \
        if (j_ % (slices) != (slice)) continue;                                                  \
        float4 sum_ = partial[STOWAGE_SLICES_AT(0, j_, OB, PX, items, t)];                       \
        for (int sl_ = 1; sl_ < (slices); ++sl_)                                                 \
          sum_ += partial[STOWAGE_SLICES_AT(sl_, j_, OB, PX, items, t)];                         \
        acc[o_][i_] = sum_;                                                                      \
      }                                                                                          \
  } while (0)

/* Declares the register block `float4 acc[OB][PX]`, zeroed. */
#define STOWAGE_SLICES_BLOCK(acc, OB, PX)                 \
  float4 acc[OB][PX];                                     \
  _Pragma("unroll") for (int o_ = 0; o_ < (OB); ++o_)     \
    _Pragma("unroll") for (int i_ = 0; i_ < (PX); ++i_) acc[o_][i_] = (float4)(0.0f)

/* Loops, unrolled, over the outputs (o, i) of the block that this slice finishes:
 * the statement that follows runs for each, with o and i constants once unrolled
 * (`continue` skips to the next). */
#define STOWAGE_SLICES_FOR_FINISHED(o, i, OB, PX, slice, slices) \
  _Pragma("unroll") for (int o = 0; o < (OB); ++o)                \
    _Pragma("unroll") for (int i = 0; i < (PX); ++i)              \
      if (((o) * (PX) + (i)) % (slices) == (slice))

#endif
