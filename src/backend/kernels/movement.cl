// Indexed data movement on buffers of any element type (docs/operators.md):
// gathers, scatters, Resize (per-axis passes over buffers, one pass over an NCHW4c
// image), Trilu, OneHot, Range. Typed with STOWAGE_T (the data; OneHot's indices)
// and STOWAGE_I (the indices: 1 int32, 2 int64), <stowage/dtype.cl.h>; STOWAGE_U
// is OneHot's value type.
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
// stowage_scatter_elements: y already holds the data; updates and indices share a
//   shape whose axis has `count` positions, [d0, .., d5] is it with that axis 1; each
//   work-item walks its line along the axis in order, combining updates[i] into y
//   at i's offset (strides sy, 0 along the axis) plus indices[i] * y_stride.
// stowage_scatter_nd: y already holds the data; indices [m, k], updates [m, inner];
//   each work-item walks the m rows in order for its column; grid = [inner].
// Scatters combine with `reduction` (stowage_scatter_reduce); walking in order
// gives ONNX's sequential result even where indices repeat.
// stowage_resize_axis: one axis of a Resize: x [outer, l_in, inner] ->
//   y [outer, l_out, inner]; the scale is scales[scale_at] (known at import or
//   computed at run time), or l_out / l_in where `sized` (Resize given sizes), the
//   crop roi[roi_at] and roi[roi_at + roi_stride]; source
//   coordinates, nearest rounding and the linear or cubic taps (antialiased when
//   downscaling, if asked) as ONNX's Resize defines them, edges clamped.
//   grid = [inner, l_out, outer]. stowage_resize_image: see its definition.
// stowage_trilu: x [batch, rows, cols] -> y, zero outside the triangle of diagonal
//   k (upper: col - row >= k, lower: col - row <= k); grid = [cols, rows, batch].
#include <stowage/dtype.cl.h>
#include <stowage/grid6.cl.h>
#include <stowage/image.cl.h>
#include <stowage/image_offset.cl.h>

// Resize's coordinates in double precision where the device has it (as ONNX's
// reference computes them), else in float.
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double stowage_coord;
#else
typedef float stowage_coord;
#endif

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

// ONNX's scatter reductions: 0 none (the update replaces), 1 add, 2 mul, 3 max, 4 min.
inline stowage_t stowage_scatter_reduce(stowage_t old, stowage_t update, int reduction) {
  switch (reduction) {
    case 1: return old + update;
    case 2: return old * update;
    case 3: return old > update ? old : update;
    case 4: return old < update ? old : update;
    default: return update;
  }
}

__kernel void stowage_scatter_elements(__global const stowage_t* updates, __global const stowage_i* indices,
                                       __global stowage_t* y, int d0, int d1, int d2, int d3, int d4, int d5, int su0,
                                       int su1, int su2, int su3, int su4, int su5, int sy0, int sy1, int sy2, int sy3,
                                       int sy4, int sy5, int count, int u_stride, int y_stride, int extent,
                                       int reduction) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int u0 = stowage_offset6(at, 0, su0, su1, su2, su3, su4, su5);
  const int y0 = stowage_offset6(at, 0, sy0, sy1, sy2, sy3, sy4, sy5);
  for (int t = 0; t < count; ++t) {  // in order: a later update of one element wins or reduces last
    const int iu = u0 + t * u_stride;
    const int k = stowage_wrap_index(indices[iu], extent);
    if (k < 0) continue;
    __global stowage_t* p = y + y0 + k * y_stride;
    *p = stowage_scatter_reduce(*p, updates[iu], reduction);
  }
}

__kernel void stowage_scatter_nd(__global const stowage_t* updates, __global const stowage_i* indices,
                                 __global const int* dims, __global stowage_t* y, int k, int m, int inner,
                                 int reduction) {
  const int i = get_global_id(0);
  if (i >= inner) return;
  for (int j = 0; j < m; ++j) {  // in order: a later row wins or reduces last
    __global const stowage_i* at = indices + j * k;
    int offset = 0;
    bool inside = true;
    for (int t = 0; t < k; ++t) {
      const int v = stowage_wrap_index(at[t], dims[2 * t]);
      inside = inside && v >= 0;
      offset += max(v, 0) * dims[2 * t + 1];
    }
    if (inside) y[offset + i] = stowage_scatter_reduce(y[offset + i], updates[j * inner + i], reduction);
  }
}

// Resize's source coordinate of output position j (ONNX's
// coordinate_transformation_mode, numbered as stowage.ops.movement.RESIZE_COORDINATES).
inline stowage_coord stowage_resize_source(int mode, int j, stowage_coord scale, stowage_coord out_width, int l_in,
                                           int l_out, stowage_coord roi_start, stowage_coord roi_end) {
  const stowage_coord centre = (j + (stowage_coord)0.5) / scale - (stowage_coord)0.5;
  switch (mode) {
    case 1: {  // half_pixel_symmetric
      const stowage_coord adjustment = l_out / out_width;
      return l_in / (stowage_coord)2 * (1 - adjustment) + centre;
    }
    case 2:  // pytorch_half_pixel (0 for one output, as ONNX's text and ONNX Runtime say)
      return l_out == 1 ? (stowage_coord)0 : centre;
    case 3:  // align_corners
      return out_width == 1 ? (stowage_coord)0 : j * (stowage_coord)(l_in - 1) / (out_width - 1);
    case 4:  // asymmetric
      return j / scale;
    case 5:  // tf_half_pixel_for_nn
      return (j + (stowage_coord)0.5) / scale;
    case 6: {  // tf_crop_and_resize
      const stowage_coord span = (roi_end - roi_start) * (l_in - 1);
      const stowage_coord at = out_width == 1 ? span / 2 : j * span / (out_width - 1);
      return at + roi_start * (l_in - 1);
    }
    default:  // half_pixel
      return centre;
  }
}

// The interpolation kernels at distance d: linear (filter 1) and cubic (2, Keys' with a).
inline stowage_coord stowage_resize_filter(int filter, stowage_coord d, stowage_coord a) {
  d = fabs(d);
  if (filter == 1) return d < 1 ? 1 - d : 0;
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// One output position's taps along one axis of a Resize: indices base + first + t
// for t < taps (at an integer source position, one lower with ratio 1), weights
// stowage_resize_weight; for nearest (filter 0) the one index `nearest`; outside:
// a tf_crop_and_resize position outside the input (the extrapolation value).
typedef struct {
  int outside, nearest, base, first, taps;
  stowage_coord ratio, s;
} stowage_resize_taps;

inline stowage_resize_taps stowage_resize_plan(int j, int l_in, int l_out, stowage_coord scale, int sized,
                                               stowage_coord roi_start, stowage_coord roi_end, int mode, int filter,
                                               int nearest, int antialias) {
  stowage_resize_taps p;
  // Sized (the output extent given): the scale is l_out / l_in exactly.
  if (sized) scale = (stowage_coord)l_out / l_in;
  const stowage_coord out_width = sized ? (stowage_coord)l_out : scale * l_in;
  const stowage_coord at = stowage_resize_source(mode, j, scale, out_width, l_in, l_out, roi_start, roi_end);
  p.outside = mode == 6 && (at < 0 || at > l_in - 1);
  const stowage_coord below = floor(at);
  const bool whole = at == below;
  // nearest: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil, 4 simple
  const stowage_coord frac = at - below;
  const int mode_n = nearest == 4 ? (scale < 1 ? 3 : 2) : nearest;
  const bool up = !whole && (mode_n == 3 || (mode_n == 0 && frac > 0.5) || (mode_n == 1 && frac >= 0.5));
  p.nearest = clamp((int)below + (up ? 1 : 0), 0, l_in - 1);
  // first = 1 - taps / 2; the filter stretched by 1/s when antialiasing a shrink.
  p.ratio = whole ? (stowage_coord)1 : frac;
  p.base = whole ? (int)at - 1 : (int)below;
  p.s = antialias ? fmin(scale, (stowage_coord)1) : (stowage_coord)1;
  p.first = filter == 0 ? 0 : (int)floor((filter == 1 ? -1 : -2) / p.s) + 1;
  p.taps = filter == 0 ? 1 : 2 - 2 * p.first;
  return p;
}

// Tap t's weight; *index gets its input index (clamped to the edges).
inline stowage_coord stowage_resize_weight(stowage_resize_taps p, int t, int l_in, int filter, stowage_coord cubic_a,
                                           int exclude_outside, int* index) {
  if (filter == 0) {
    *index = p.nearest;
    return 1;
  }
  const int k = p.base + p.first + t;
  *index = clamp(k, 0, l_in - 1);
  if (exclude_outside && (k < 0 || k >= l_in)) return 0;
  return stowage_resize_filter(filter, p.s * (p.first + t - p.ratio), cubic_a);
}

__kernel void stowage_resize_axis(__global const stowage_t* x, __global const float* scales,
                                  __global const float* roi, __global stowage_t* y, int l_in, int l_out, int inner,
                                  int scale_at, int sized, int roi_at, int roi_stride, int mode, int filter,
                                  int nearest, float cubic_a, int exclude_outside, int antialias,
                                  float extrapolation) {
  const int i = get_global_id(0), j = get_global_id(1), o = get_global_id(2);
  if (i >= inner || j >= l_out) return;
  __global const stowage_t* row = x + o * l_in * inner + i;
  const int out = (o * l_out + j) * inner + i;
  const stowage_coord roi_start = roi_at < 0 ? 0 : roi[roi_at], roi_end = roi_at < 0 ? 1 : roi[roi_at + roi_stride];
  const stowage_resize_taps p = stowage_resize_plan(j, l_in, l_out, scales[scale_at], sized, roi_start, roi_end, mode,
                                                    filter, nearest, antialias);
  if (p.outside) {
    y[out] = (stowage_t)extrapolation;
    return;
  }
  if (filter == 0) {  // a copy: exact for every type
    y[out] = row[p.nearest * inner];
    return;
  }
  stowage_coord acc = 0, total = 0;
  for (int t = 0; t < p.taps; ++t) {
    int k;
    const stowage_coord w = stowage_resize_weight(p, t, l_in, filter, cubic_a, exclude_outside, &k);
    acc += w * (stowage_coord)row[k * inner];
    total += w;
  }
  if (antialias || exclude_outside) acc = total == 0 ? acc : acc / total;
  y[out] = (stowage_t)acc;
}

// stowage_resize_image: Resize of H and W of an NCHW4c image x [N, C4, H, W, 4] into
//   y [N, C4, h_out, w_out, 4] in one pass (the two axes' taps multiplied; an axis
//   left alone is sized with its own extent, an identity). Not tf_crop_and_resize.
//   x_off, y_off: the tensors' offsets in their images; taps are clamped to x's extents.
//   Launch: grid = [w_out rounded up to local0, h_out rounded up to local1, N * C4].
__kernel void stowage_resize_image(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                                   stowage_image_offset y_off, __global const float* scales, int h_in, int w_in,
                                   int h_out, int w_out, int scale_h_at, int sized_h, int scale_w_at, int sized_w,
                                   int mode, int filter, int nearest, float cubic_a, int exclude_outside,
                                   int antialias) {
  const int w = get_global_id(0), h = get_global_id(1), plane = get_global_id(2);
  if (w >= w_out || h >= h_out) return;
  const stowage_resize_taps ph = stowage_resize_plan(h, h_in, h_out, scales[scale_h_at], sized_h, 0, 1, mode, filter,
                                                     nearest, antialias);
  const stowage_resize_taps pw = stowage_resize_plan(w, w_in, w_out, scales[scale_w_at], sized_w, 0, 1, mode, filter,
                                                     nearest, antialias);
  float4 acc = 0.0f;
  stowage_coord total_h = 0, total_w = 0;
  for (int th = 0; th < ph.taps; ++th) {
    int kh;
    const stowage_coord wh = stowage_resize_weight(ph, th, h_in, filter, cubic_a, exclude_outside, &kh);
    total_h += wh;
    float4 row = 0.0f;
    const int in_row = plane * h_in + kh + x_off.y;
    total_w = 0;
    for (int tw = 0; tw < pw.taps; ++tw) {
      int kw;
      const stowage_coord ww = stowage_resize_weight(pw, tw, w_in, filter, cubic_a, exclude_outside, &kw);
      row += (float)ww * read_imagef(x, kStowageSampler, (int2)(kw + x_off.x, in_row));
      total_w += ww;
    }
    acc += (float)wh * row;
  }
  if ((antialias || exclude_outside) && total_h * total_w != 0) acc /= (float)(total_h * total_w);
  write_imagef(y, (int2)(w, plane * h_out + h) + y_off, acc);
}

__kernel void stowage_trilu(__global const stowage_t* x, __global stowage_t* y, int rows, int cols, int k, int upper) {
  const int c = get_global_id(0), r = get_global_id(1), b = get_global_id(2);
  if (c >= cols || r >= rows) return;
  const int at = (b * rows + r) * cols + c;
  const bool keep = upper ? (c - r >= k) : (c - r <= k);
  y[at] = keep ? x[at] : (stowage_t)0;
}

// stowage_one_hot: indices x [outer, inner] (any type, truncated to integers; negative
//   ones count from the end), values [off, on] (stowage_u) -> y [outer, depth, inner]
//   of on where the index is d, else off; grid = [inner, depth, outer].
__kernel void stowage_one_hot(__global const stowage_t* x, __global const stowage_u* values, __global stowage_u* y,
                              int depth, int inner) {
  const int i = get_global_id(0), d = get_global_id(1), o = get_global_id(2);
  if (i >= inner || d >= depth) return;
  long k = (long)x[o * inner + i];
  if (k < 0) k += depth;
  y[(o * depth + d) * inner + i] = k == d ? values[1] : values[0];
}

// stowage_range: y[i] = start[0] + i * delta[0] for i < n; grid = [n rounded up].
__kernel void stowage_range(__global const stowage_t* start, __global const stowage_t* delta, __global stowage_t* y,
                            int n) {
  const int i = get_global_id(0);
  if (i < n) y[i] = start[0] + (stowage_t)i * delta[0];
}
