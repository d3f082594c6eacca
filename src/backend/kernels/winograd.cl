// Winograd F(4x4, 3x3) convolution on NCHW float32 buffers (docs/operators.md): a
// 3x3 convolution of stride 1, dilation 1 and one group as three launches,
//   1. stowage_winograd_input   V[e][c][t] = (B^T d_{c,t} B)[e]
//   2. stowage_gemm, 36 batches M[e][k][t] = sum_c U[e][c][k] V[e][c][t]
//   3. stowage_winograd_output  y(tile t, channel k) = A^T M[.][k][t] A, then the epilogue
// for tiles t of 4x4 outputs: t = (n TH + ty) TW + tx over TH = ceil(P / 4) rows and
// TW = ceil(Q / 4) columns of tiles per image, e = 6 i + j the 36 transformed values
// of a tile. d_{c,t} is the 6x6 input patch of channel c at rows 4 ty - pad_top + 0..5
// and columns 4 tx - pad_left + 0..5 (zero outside the input); U = G g G^T per output
// and input channel, computed when the program is compiled (the Python layer).
// The product takes 36 / 16 multiplications per output where the direct convolution
// takes 9: 4x fewer, for transforms that only add and scale by small integers.
//
// The tiles are taken in chunks, [t0, t0 + tiles): V and M hold one chunk, with
// rows of ts >= tiles values (ts a multiple of 4, so the GEMM reads them as
// float4s); the input kernel writes zeros in columns tiles..ts-1.
// Launch: stowage_winograd_input grid = [ts rounded up to local0, C];
//   stowage_winograd_output grid = [tiles rounded up to local0, K].
// The output kernel ends in the epilogue of <stowage/epilogue.cl.h> (bias[k], the
// residual of the output's shape, which may be y itself, then the activation).
#include <stowage/epilogue.cl.h>

// B^T d for one column (or row) of six values.
#define WINO_BT(d0, d1, d2, d3, d4, d5, t)       \
  t[0] = fma(4.0f, d0, fma(-5.0f, d2, d4));      \
  t[1] = fma(-4.0f, d1 + d2, d3 + d4);           \
  t[2] = fma(4.0f, d1 - d2, d4 - d3);            \
  t[3] = fma(2.0f, d3 - d1, d4 - d2);            \
  t[4] = fma(2.0f, d1 - d3, d4 - d2);            \
  t[5] = fma(4.0f, d1, fma(-5.0f, d3, d5))

// A^T m for one column (or row) of six values: four outputs.
#define WINO_AT(m0, m1, m2, m3, m4, m5, o)       \
  o[0] = m0 + m1 + m2 + m3 + m4;                 \
  o[1] = fma(2.0f, m3 - m4, m1 - m2);            \
  o[2] = fma(4.0f, m3 + m4, m1 + m2);            \
  o[3] = fma(8.0f, m3 - m4, m1 - m2) + m5

__kernel void stowage_winograd_input(__global const float* x, __global float* v, int N, int C, int H, int W, int TH,
                                     int TW, int pad_top, int pad_left, int t0, int tiles, int ts) {
  const int i = get_global_id(0), c = get_global_id(1);
  if (i >= ts || c >= C) return;
  __global float* out = v + (size_t)c * ts + i;
  const size_t plane = (size_t)C * ts;  // between transformed values e and e + 1
  if (i >= tiles) {  // the row's padding: zeros the GEMM reads
#pragma unroll
    for (int e = 0; e < 36; ++e) out[e * plane] = 0.0f;
    return;
  }
  const int t = t0 + i, tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
  const int h0 = 4 * ty - pad_top, w0 = 4 * tx - pad_left;
  const __global float* xc = x + ((size_t)n * C + c) * H * W;
  float d[6][6];
#pragma unroll
  for (int r = 0; r < 6; ++r) {
    const int h = h0 + r;
    const bool row_in = h >= 0 && h < H;
#pragma unroll
    for (int s = 0; s < 6; ++s) {
      const int w = w0 + s;
      d[r][s] = row_in && w >= 0 && w < W ? xc[h * W + w] : 0.0f;
    }
  }
  float bd[6][6];  // B^T d: the transform of each column
#pragma unroll
  for (int s = 0; s < 6; ++s) {
    float t6[6];
    WINO_BT(d[0][s], d[1][s], d[2][s], d[3][s], d[4][s], d[5][s], t6);
#pragma unroll
    for (int r = 0; r < 6; ++r) bd[r][s] = t6[r];
  }
#pragma unroll
  for (int r = 0; r < 6; ++r) {  // (B^T d) B: the transform of each row
    float t6[6];
    WINO_BT(bd[r][0], bd[r][1], bd[r][2], bd[r][3], bd[r][4], bd[r][5], t6);
#pragma unroll
    for (int s = 0; s < 6; ++s) out[(6 * r + s) * plane] = t6[s];
  }
}

__kernel void stowage_winograd_output(__global const float* m, __global const float* bias, __global const float* res,
                                      __global float* y, int K, int P, int Q, int TH, int TW, int t0, int tiles,
                                      int ts, int flags, int act, float act_a, float act_b) {
  const int i = get_global_id(0), k = get_global_id(1);
  if (i >= tiles || k >= K) return;
  const __global float* in = m + (size_t)k * ts + i;
  const size_t plane = (size_t)K * ts;
  float am[4][6];  // A^T M: the transform of each column
#pragma unroll
  for (int s = 0; s < 6; ++s) {
    float o[4];
    WINO_AT(in[s * plane], in[(6 + s) * plane], in[(12 + s) * plane], in[(18 + s) * plane], in[(24 + s) * plane],
            in[(30 + s) * plane], o);
#pragma unroll
    for (int r = 0; r < 4; ++r) am[r][s] = o[r];
  }
  const int t = t0 + i, tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
  const float b = (flags & STOWAGE_EPI_BIAS) ? bias[k] : 0.0f;
  const size_t base = ((size_t)n * K + k) * P * Q;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int p = 4 * ty + r;
    if (p >= P) break;
    float o[4];
    WINO_AT(am[r][0], am[r][1], am[r][2], am[r][3], am[r][4], am[r][5], o);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int q = 4 * tx + s;
      if (q >= Q) break;
      const size_t idx = base + (size_t)p * Q + q;
      float val = o[s] + b;
      if (flags & STOWAGE_EPI_RESIDUAL) val += res[idx];
      y[idx] = stowage_activate(val, act, act_a, act_b);
    }
  }
}
