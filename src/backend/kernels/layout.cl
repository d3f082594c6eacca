// Data movement on buffers of any element type (docs/operators.md): transposes,
// concat copies, slices, broadcasts and tiles, padding. Typed with STOWAGE_T
// (<stowage/dtype.cl.h>; float32 unset). Up to 6 dimensions; the Python layer
// merges dimensions that move together so that few remain. Launch of every
// kernel here:
//   grid = [d5 rounded up to local0, d4 rounded up to local1, d0 d1 d2 d3].
//
// stowage_copy_strided: y[y_off + sum ik * syk] = x[x_off + sum ik * sxk] over the
//   index space [d0, .., d5]. A transpose (x strides permuted, y contiguous), a
//   concat input copied into its slice of the output (y strides of the output), a
//   slice (x strides times the steps, negative ones too), a broadcast (x stride 0).
// stowage_pad: y (contiguous, [d0, .., d5]) is x (contiguous, [e0, .., e5]) moved by
//   b0..b5 (pads before each dimension, negative ones crop); outside x, mode 0
//   (constant) writes value[0], 1 (reflect) mirrors about the edges without
//   repeating them, 2 (edge) repeats the edge, 3 (wrap) wraps around.
// stowage_interleave_channels: y [N, C, G, HW] from G parts x0 .. x3 [N, C, HW] (G
//   <= 4, parts past G unread), y[n][c][j][p] = xj[n][c][p], every tensor
//   contiguous: a channel shuffle of the Concat of G parts of C channels each
//   (ShuffleNet's units) in one launch, in place of a copy per part and a transpose.
//   Launch: grid = [HW rounded up to local0, C rounded up to local1, N G].
#include <stowage/dtype.cl.h>
#include <stowage/grid6.cl.h>

__kernel void stowage_copy_strided(__global const stowage_t* x, __global stowage_t* y, int d0, int d1, int d2, int d3,
                                   int d4, int d5, int sx0, int sx1, int sx2, int sx3, int sx4, int sx5, int sy0,
                                   int sy1, int sy2, int sy3, int sy4, int sy5, int x_off, int y_off) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  y[stowage_offset6(at, y_off, sy0, sy1, sy2, sy3, sy4, sy5)] =
      x[stowage_offset6(at, x_off, sx0, sx1, sx2, sx3, sx4, sx5)];
}

// Index j of an extent e padded with `mode`; -1 where the constant goes.
inline int stowage_pad_source(int j, int e, int mode) {
  if (j >= 0 && j < e) return j;
  if (mode == 0) return -1;
  if (mode == 2) return j < 0 ? 0 : e - 1;
  if (mode == 3) {
    const int m = j % e;
    return m < 0 ? m + e : m;
  }
  if (e == 1) return 0;
  const int period = 2 * (e - 1);  // reflect: e-1 .. 1 0 1 .. e-1 .. 1 0 ..
  int m = j % period;
  if (m < 0) m += period;
  return m < e ? m : period - m;
}

__kernel void stowage_pad(__global const stowage_t* x, __global stowage_t* y, __global const stowage_t* value, int mode,
                          int d0, int d1, int d2, int d3, int d4, int d5, int e0, int e1, int e2, int e3, int e4,
                          int e5, int b0, int b1, int b2, int b3, int b4, int b5) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int j0 = stowage_pad_source(at.i0 - b0, e0, mode), j1 = stowage_pad_source(at.i1 - b1, e1, mode),
            j2 = stowage_pad_source(at.i2 - b2, e2, mode), j3 = stowage_pad_source(at.i3 - b3, e3, mode),
            j4 = stowage_pad_source(at.i4 - b4, e4, mode), j5 = stowage_pad_source(at.i5 - b5, e5, mode);
  const bool inside = j0 >= 0 && j1 >= 0 && j2 >= 0 && j3 >= 0 && j4 >= 0 && j5 >= 0;
  const int iy = ((((at.i0 * d1 + at.i1) * d2 + at.i2) * d3 + at.i3) * d4 + at.i4) * d5 + at.i5;
  y[iy] = inside ? x[((((j0 * e1 + j1) * e2 + j2) * e3 + j3) * e4 + j4) * e5 + j5] : value[0];
}

__kernel void stowage_interleave_channels(__global const stowage_t* x0, __global const stowage_t* x1,
                                          __global const stowage_t* x2, __global const stowage_t* x3,
                                          __global stowage_t* y, int C, int G, int HW) {
  const int p = get_global_id(0), c = get_global_id(1), ng = get_global_id(2);
  if (p >= HW || c >= C) return;
  const int n = ng / G, j = ng - n * G;
  const __global stowage_t* x = j == 0 ? x0 : j == 1 ? x1 : j == 2 ? x2 : x3;
  y[((n * C + c) * G + j) * HW + p] = x[(n * C + c) * HW + p];
}
