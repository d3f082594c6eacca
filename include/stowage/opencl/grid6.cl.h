/* The index space of Stowage's data-movement and broadcasting kernels
 * (docs/operators.md): up to 6 dimensions [d0, .., d5], launched as
 *   grid = [d5 rounded up to local0, d4 rounded up to local1, d0 d1 d2 d3],
 * so that the two innermost dimensions get whole work-group rows and the
 * outer four share the third dimension of the grid. */
#ifndef STOWAGE_GRID6_CL_H
#define STOWAGE_GRID6_CL_H

/* A work-item's index (i0, .., i5); inside is 0 for the work-items past d4 or d5
 * (the rounding up), which must do nothing. */
typedef struct {
  int inside;
  int i0, i1, i2, i3, i4, i5;
} stowage_index6;

inline stowage_index6 stowage_grid_index6(int d1, int d2, int d3, int d4, int d5) {
  stowage_index6 at;
  at.i5 = get_global_id(0);
  at.i4 = get_global_id(1);
  at.inside = at.i5 < d5 && at.i4 < d4;
  int rest = get_global_id(2);
  at.i3 = rest % d3;
  rest /= d3;
  at.i2 = rest % d2;
  rest /= d2;
  at.i1 = rest % d1;
  at.i0 = rest / d1;
  return at;
}

/* The offset of index `at` in a tensor of strides s0 .. s5 (elements) from `base`. */
inline int stowage_offset6(stowage_index6 at, int base, int s0, int s1, int s2, int s3, int s4, int s5) {
  return base + at.i0 * s0 + at.i1 * s1 + at.i2 * s2 + at.i3 * s3 + at.i4 * s4 + at.i5 * s5;
}

#endif
