// Indexed data movement on buffers of any element type (docs/operators.md):
// gathers, scatters, the per-axis passes of Resize, Trilu. Typed with STOWAGE_T
// (the data) and STOWAGE_I (the indices: 1 int32, 2 int64), <stowage/dtype.cl.h>.
// An index below zero counts from the end; one still outside the extent reads 0
// (gathers) or writes nothing (scatters): ONNX leaves it an error, and no kernel
// here reads or writes outside its tensors.
//
// stowage_gather: data [outer, extent, inner], indices [count] -> y [outer, count, inner];
//   grid = [inner, count, outer] (the first two rounded up).
// stowage_gather_elements: y and indices of shape [d0, .., d5] (contiguous); y[i] is
//   data at i's offset by strides sd (sd of the gathered axis 0) plus
//   indices[i] * axis_stride; grid as <stowage/grid6.cl.h> says.
// stowage_gather_nd: data [batch, ...], indices [batch, m, k], dims [2k] = (extent,
//   element stride) of data's first k dimensions after the batch ones ->
//   y [batch, m, inner]; grid = [inner, m, batch].
// stowage_scatter_elements: y already holds the data; updates and indices of shape
//   [d0, .., d5]; writes updates[i] at i's offset in y (strides sy, that of the axis
//   0) plus indices[i] * axis_stride.
// stowage_scatter_nd: y already holds the data; indices [m, k], updates [m, inner];
//   grid = [inner, m, 1].
// stowage_resize_axis: one axis of a Resize: x [outer, l_in, inner] ->
//   y [outer, l_out, inner], y[o, j, i] = sum over t < taps of weight[j taps + t] *
//   x[o, index[j taps + t], i] (index -1: the extrapolation value); one tap copies.
//   grid = [inner, l_out, outer].
// stowage_trilu: x [batch, rows, cols] -> y, zero outside the triangle of diagonal
//   k (upper: col - row >= k, lower: col - row <= k); grid = [cols, rows, batch].
#include <stowage/dtype.cl.h>
#include <stowage/grid6.cl.h>

inline int stowage_wrap_index(long k, int extent) {
  if (k < 0) k += extent;
  return (k < 0 || k >= extent) ? -1 : (int)k;
}

__kernel void stowage_gather(__global const stowage_t* data, __global const stowage_i* indices, __global stowage_t* y,
                             int extent, int count, int inner) {
  const int i = get_global_id(0), j = get_global_id(1), o = get_global_id(2);
  if (i >= inner || j >= count) return;
  const int k = stowage_wrap_index(indices[j], extent);
  y[(o * count + j) * inner + i] = k < 0 ? (stowage_t)0 : data[(o * extent + k) * inner + i];
}

__kernel void stowage_gather_elements(__global const stowage_t* data, __global const stowage_i* indices,
                                      __global stowage_t* y, int d0, int d1, int d2, int d3, int d4, int d5, int sd0,
                                      int sd1, int sd2, int sd3, int sd4, int sd5, int axis_stride, int extent) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int iy = stowage_offset6(at, 0, d1 * d2 * d3 * d4 * d5, d2 * d3 * d4 * d5, d3 * d4 * d5, d4 * d5, d5, 1);
  const int k = stowage_wrap_index(indices[iy], extent);
  y[iy] = k < 0 ? (stowage_t)0 : data[stowage_offset6(at, k * axis_stride, sd0, sd1, sd2, sd3, sd4, sd5)];
}

__kernel void stowage_gather_nd(__global const stowage_t* data, __global const stowage_i* indices,
                                __global const int* dims, __global stowage_t* y, int k, int m, int inner,
                                int batch_stride) {
  const int i = get_global_id(0), j = get_global_id(1), b = get_global_id(2);
  if (i >= inner || j >= m) return;
  __global const stowage_i* at = indices + (b * m + j) * k;
  int offset = b * batch_stride;
  bool inside = true;
  for (int t = 0; t < k; ++t) {
    const int v = stowage_wrap_index(at[t], dims[2 * t]);
    inside = inside && v >= 0;
    offset += max(v, 0) * dims[2 * t + 1];
  }
  y[(b * m + j) * inner + i] = inside ? data[offset + i] : (stowage_t)0;
}

__kernel void stowage_scatter_elements(__global const stowage_t* updates, __global const stowage_i* indices,
                                       __global stowage_t* y, int d0, int d1, int d2, int d3, int d4, int d5, int sy0,
                                       int sy1, int sy2, int sy3, int sy4, int sy5, int axis_stride, int extent) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int iu = stowage_offset6(at, 0, d1 * d2 * d3 * d4 * d5, d2 * d3 * d4 * d5, d3 * d4 * d5, d4 * d5, d5, 1);
  const int k = stowage_wrap_index(indices[iu], extent);
  if (k >= 0) y[stowage_offset6(at, k * axis_stride, sy0, sy1, sy2, sy3, sy4, sy5)] = updates[iu];
}

__kernel void stowage_scatter_nd(__global const stowage_t* updates, __global const stowage_i* indices,
                                 __global const int* dims, __global stowage_t* y, int k, int m, int inner) {
  const int i = get_global_id(0), j = get_global_id(1);
  if (i >= inner || j >= m) return;
  __global const stowage_i* at = indices + j * k;
  int offset = 0;
  for (int t = 0; t < k; ++t) {
    const int v = stowage_wrap_index(at[t], dims[2 * t]);
    if (v < 0) return;
    offset += v * dims[2 * t + 1];
  }
  y[offset + i] = updates[j * inner + i];
}

__kernel void stowage_resize_axis(__global const stowage_t* x, __global const int* index,
                                  __global const float* weight, __global stowage_t* y, int taps, int l_in, int l_out,
                                  int inner, float extrapolation) {
  const int i = get_global_id(0), j = get_global_id(1), o = get_global_id(2);
  if (i >= inner || j >= l_out) return;
  __global const stowage_t* row = x + o * l_in * inner + i;
  const int out = (o * l_out + j) * inner + i;
  if (taps == 1) {
    const int s = index[j];
    y[out] = s < 0 ? (stowage_t)extrapolation : row[s * inner];
    return;
  }
  float acc = 0.0f;
  for (int t = 0; t < taps; ++t) {
    const int s = index[j * taps + t];
    acc += weight[j * taps + t] * (s < 0 ? extrapolation : (float)row[s * inner]);
  }
  y[out] = (stowage_t)acc;
}

__kernel void stowage_trilu(__global const stowage_t* x, __global stowage_t* y, int rows, int cols, int k, int upper) {
  const int c = get_global_id(0), r = get_global_id(1), b = get_global_id(2);
  if (c >= cols || r >= rows) return;
  const int at = (b * rows + r) * cols + c;
  const bool keep = upper ? (c - r >= k) : (c - r <= k);
  y[at] = keep ? x[at] : (stowage_t)0;
}
