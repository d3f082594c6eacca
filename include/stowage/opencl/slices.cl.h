/* The slices of a work-group in Stowage's convolution kernels (docs/operators.md):
 * the local[2] slices of a work-group split a reduction (every slices-th input
 * channel or block to each), then add their partial sums through local memory.
 *
 * A work-item holds a register block `float4 acc[OB][PX]`; output j = o * PX + i of
 * the block is finished by slice j % slices, which adds every slice's value of it in
 * slice order (a fixed order: the sums do not depend on the scheduling).
 *
 * The unrolled loops over the block stay in the kernels (`#pragma unroll`: kernel
 * units may not use the pragma operator, so a macro cannot hold them), so that acc is indexed
 * by constants and stays in registers; these helpers take one value at a time.
 * Every work-item of the work-group writes its values and meets the barrier before
 * any sums; `partial` holds `items * slices * outputs` float4s (outputs = OB * PX). */
#ifndef STOWAGE_SLICES_CL_H
#define STOWAGE_SLICES_CL_H

/* Where slice sl keeps its value of output j of work-item t (of `items` a slice). */
inline int stowage_slices_at(int sl, int j, int outputs, int items, int t) { return (sl * outputs + j) * items + t; }

/* Keeps this slice's value v of output j for the slice that finishes it. */
inline void stowage_slices_put(__local float4* partial, float4 v, int j, int outputs, int slice, int items, int t) {
  partial[stowage_slices_at(slice, j, outputs, items, t)] = v;
}

/* Whether this slice finishes output j. */
inline bool stowage_slice_finishes(int j, int slice, int slices) { return j % slices == slice; }

/* Output j summed over every slice in slice order; own (this slice's value) when there
 * is one slice. */
inline float4 stowage_slices_sum(__local const float4* partial, float4 own, int j, int outputs, int slices, int items,
                                 int t) {
  if (slices == 1) return own;
  float4 v = partial[stowage_slices_at(0, j, outputs, items, t)];
  for (int sl = 1; sl < slices; ++sl) v += partial[stowage_slices_at(sl, j, outputs, items, t)];
  return v;
}

#endif
