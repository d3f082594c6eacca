// Scans and selections along one axis (docs/operators.md): CumSum and TopK, on
// buffers viewed as [outer, n, inner] (the axis in the middle). Typed with
// STOWAGE_T (the data: float32, int32, int64), <stowage/dtype.cl.h>.
//
// stowage_cumsum: y[o, i, c] = sum of x[o, j, c] over j <= i (j < i where
//   `exclusive`; j >= i, j > i where `reverse`), added in walking order. One
//   work-item per (outer, inner) walks its line of n in order: simple and exact in
//   the order ONNX Runtime adds, but serial in n (a work-group tree scan would be
//   the faster kernel for long axes). grid = [inner, outer] (both rounded up).
// stowage_topk: the k first elements of each line of x in the order "largest
//   first" (`largest`) or "smallest first", ties to the lower index as ONNX
//   Runtime breaks them; values -> y [outer, k, inner], their positions ->
//   indices (int64). NaN ranks above every number and NaNs tie (so the order is
//   total). One work-item per element: it counts the elements ranked before it,
//   stopping once k have been counted; its rank, when below k, is its output
//   position (the output is always sorted, which sorted = 0 allows). O(n * k) at
//   best, O(n^2) a line at worst: fine for class scores, not for huge axes.
//   grid = [inner, n, outer] (the first two rounded up).

#include <stowage/dtype.cl.h>

__kernel void stowage_cumsum(__global const stowage_t* x, __global stowage_t* y, int outer, int n, int inner,
                             int exclusive, int reverse) {
  const int c = get_global_id(0), o = get_global_id(1);
  if (c >= inner || o >= outer) return;
  const int base = o * n * inner + c;
  const int step = reverse ? -inner : inner;
  int at = base + (reverse ? (n - 1) * inner : 0);
  stowage_t sum = (stowage_t)0;
  for (int i = 0; i < n; ++i, at += step) {
    const stowage_t v = x[at];
    if (exclusive) {
      y[at] = sum;
      sum += v;
    } else {
      sum += v;
      y[at] = sum;
    }
  }
}

// Whether a ranks strictly above b as values (largest first), NaN above all.
inline int scan_above(stowage_t a, stowage_t b) {
#if STOWAGE_T_IS_FLOAT
  if (isnan(b)) return 0;
  if (isnan(a)) return 1;
#endif
  return a > b;
}

inline int scan_tie(stowage_t a, stowage_t b) {
#if STOWAGE_T_IS_FLOAT
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
#endif
  return a == b;
}

__kernel void stowage_topk(__global const stowage_t* x, __global stowage_t* y, __global long* indices, int n,
                           int inner, int k, int largest) {
  const int c = get_global_id(0), i = get_global_id(1), o = get_global_id(2);
  if (c >= inner || i >= n) return;
  __global const stowage_t* line = x + o * n * inner + c;
  const stowage_t v = line[i * inner];
  int rank = 0;
  for (int j = 0; j < n && rank < k; ++j) {
    const stowage_t u = line[j * inner];
    const int before = largest ? scan_above(u, v) : scan_above(v, u);
    rank += before || (j < i && scan_tie(u, v));
  }
  if (rank >= k) return;
  const int at = (o * k + rank) * inner + c;
  y[at] = v;
  indices[at] = i;
}
