// GridSample (docs/operators.md): the values of x (N, C, [D,] H, W) at the
// positions a grid (N, [Do,] Ho, Wo, r) gives in [-1, 1] coordinates (x first, then
// y, then z), as ONNX defines them (opsets 16-22): nearest (halves to even), linear
// or cubic (Keys, a = -0.75) taps per axis, padding zeros, border or reflection
// (of the coordinate for nearest and linear, of each tap for cubic, as torch and ONNX
// Runtime do), align_corners. A 2-D sample is a 3-D one of depth 1 (rank 2: the grid has two
// components and the depth axis one tap of weight 1).
//
// stowage_grid_sample_{nearest,linear,cubic}: one work-item per output position
//   (ow, oh, n * out_d + od), looping over the channels (the taps are the same for
//   each). Launch: grid = [out_w, out_h, n * out_d] rounded up to the work-group.

#define GS_ZEROS 0
#define GS_BORDER 1
#define GS_REFLECTION 2

#define GS_NEAREST 0
#define GS_LINEAR 1
#define GS_CUBIC 2

// Folds x into [lo, hi] by reflecting at the edges as often as needed.
inline float gs_reflect(float x, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0.0f) return lo;
  if (x < lo) {
    const float d = lo - x;
    const float turns = floor(d / range);
    const float r = d - turns * range;
    return fmod(turns, 2.0f) == 0.0f ? lo + r : hi - r;
  }
  if (x > hi) {
    const float d = x - hi;
    const float turns = floor(d / range);
    const float r = d - turns * range;
    return fmod(turns, 2.0f) == 0.0f ? hi - r : lo + r;
  }
  return x;
}

// The index read at integral position i of an axis of `extent` pixels (a float: far
// positions stay exact enough to pad); -1 reads 0 (zeros padding, or NaN).
inline int gs_index(float i, int extent, int padding, float lo, float hi) {
  if (isnan(i)) return -1;
  if (padding == GS_ZEROS) return (i >= 0.0f && i < (float)extent) ? (int)i : -1;
  if (padding == GS_BORDER) return (int)clamp(i, 0.0f, (float)(extent - 1));
  return clamp((int)gs_reflect(i, lo, hi), 0, extent - 1);
}

inline float gs_cubic(float t, int k) {
  const float a = -0.75f;
  switch (k) {
    case 0: { const float s = t + 1.0f; return ((a * s - 5.0f * a) * s + 8.0f * a) * s - 4.0f * a; }
    case 1: return ((a + 2.0f) * t - (a + 3.0f)) * t * t + 1.0f;
    case 2: { const float s = 1.0f - t; return ((a + 2.0f) * s - (a + 3.0f)) * s * s + 1.0f; }
    default: { const float s = 2.0f - t; return ((a * s - 5.0f * a) * s + 8.0f * a) * s - 4.0f * a; }
  }
}

// The taps of one axis for the normalized coordinate g: their indices (-1: zero) and
// weights; returns how many (1 nearest, 2 linear, 4 cubic).
inline int gs_taps(float g, int extent, int mode, int align, int padding, int* index, float* weight) {
  const float lo = align ? 0.0f : -0.5f;
  const float hi = align ? (float)(extent - 1) : (float)extent - 0.5f;
  float x = align ? (g + 1.0f) * 0.5f * (float)(extent - 1) : ((g + 1.0f) * (float)extent - 1.0f) * 0.5f;
  if (mode == GS_NEAREST) x = rint(x);
  // Nearest and linear pad the coordinate; cubic (as torch and ONNX Runtime) pads each tap.
  if ((x < lo || x > hi) && mode != GS_CUBIC) {
    if (padding == GS_BORDER) x = clamp(x, 0.0f, (float)(extent - 1));
    else if (padding == GS_REFLECTION) x = gs_reflect(x, lo, hi);
  }
  if (mode == GS_NEAREST) {
    index[0] = gs_index(trunc(x), extent, padding, lo, hi);
    weight[0] = 1.0f;
    return 1;
  }
  const float base = floor(x);
  const float t = x - base;
  const int taps = mode == GS_LINEAR ? 2 : 4;
  const float first = mode == GS_LINEAR ? base : base - 1.0f;
  for (int k = 0; k < taps; ++k) {
    index[k] = gs_index(first + (float)k, extent, padding, lo, hi);
    weight[k] = mode == GS_LINEAR ? (k == 0 ? 1.0f - t : t) : gs_cubic(t, k);
  }
  return taps;
}

inline void gs_sample(int mode, __global const float* x, __global const float* grid, __global float* y,
                      int channels, int in_d, int in_h, int in_w, int out_d, int out_h, int out_w, int rank,
                      int align, int padding) {
  const int ow = get_global_id(0), oh = get_global_id(1), nd = get_global_id(2);
  if (ow >= out_w || oh >= out_h) return;
  const int n = nd / out_d, od = nd % out_d;
  const int position = (nd * out_h + oh) * out_w + ow;
  __global const float* g = grid + position * rank;
  int iw[4], ih[4], id[4];
  float ww[4], wh[4], wd[4];
  const int tw = gs_taps(g[0], in_w, mode, align, padding, iw, ww);
  const int th = gs_taps(g[1], in_h, mode, align, padding, ih, wh);
  int td = 1;
  id[0] = 0;
  wd[0] = 1.0f;
  if (rank == 3) td = gs_taps(g[2], in_d, mode, align, padding, id, wd);
  const int plane = in_d * in_h * in_w;
  const int out_plane = out_d * out_h * out_w;
  const int out_position = (od * out_h + oh) * out_w + ow;
  for (int c = 0; c < channels; ++c) {
    __global const float* xc = x + (n * channels + c) * plane;
    float sum = 0.0f;
    for (int a = 0; a < td; ++a) {
      if (id[a] < 0) continue;
      for (int b = 0; b < th; ++b) {
        if (ih[b] < 0) continue;
        float row = 0.0f;
        for (int e = 0; e < tw; ++e) {
          if (iw[e] >= 0) row += ww[e] * xc[(id[a] * in_h + ih[b]) * in_w + iw[e]];
        }
        sum += wd[a] * wh[b] * row;
      }
    }
    y[(n * channels + c) * out_plane + out_position] = sum;
  }
}

__kernel void stowage_grid_sample_nearest(__global const float* x, __global const float* grid, __global float* y,
                                          int channels, int in_d, int in_h, int in_w, int out_d, int out_h,
                                          int out_w, int rank, int align, int padding) {
  gs_sample(GS_NEAREST, x, grid, y, channels, in_d, in_h, in_w, out_d, out_h, out_w, rank, align, padding);
}

__kernel void stowage_grid_sample_linear(__global const float* x, __global const float* grid, __global float* y,
                                         int channels, int in_d, int in_h, int in_w, int out_d, int out_h,
                                         int out_w, int rank, int align, int padding) {
  gs_sample(GS_LINEAR, x, grid, y, channels, in_d, in_h, in_w, out_d, out_h, out_w, rank, align, padding);
}

__kernel void stowage_grid_sample_cubic(__global const float* x, __global const float* grid, __global float* y,
                                        int channels, int in_d, int in_h, int in_w, int out_d, int out_h,
                                        int out_w, int rank, int align, int padding) {
  gs_sample(GS_CUBIC, x, grid, y, channels, in_d, in_h, in_w, out_d, out_h, out_w, rank, align, padding);
}
