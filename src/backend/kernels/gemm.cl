// Batched matrix products on float32 buffers (docs/operators.md): Gemm, MatMul
// and the 1x1 convolutions of stride 1 without padding.
//
// stowage_gemm: for each batch z = z1 * nz2 + z2 (z1 < grid2 / nz2):
//   Y[m][n] = act(alpha * sum_k A[m][k] * B[k][n] + bias(m, n) + res[m][n])
//   A[m][k] = a[a_base + a_z1 z1 + a_z2 z2 + m sam + k sak]
//   B[k][n] = b[b_base + b_z1 z1 + b_z2 z2 + k sbk + n sbn]
//   bias(m, n) = bias[bias_z1 z1 + bias_z2 z2 + m sbias_m + n sbias_n]   (flags & STOWAGE_EPI_BIAS)
//   Y[m][n] = y[y_base + y_z1 z1 + y_z2 z2 + m N + n], res likewise   (flags & STOWAGE_EPI_RESIDUAL)
// Strides are in elements; a stride of 0 broadcasts. Two batch levels cover a 1x1
// convolution (z1 the image, z2 the group) and MatMul's broadcast batch; the
// Python layer launches once per outer index when a MatMul needs more.
//
// Tiling as in conv.cl: GEMM_TILE_M x GEMM_TILE_N per work-group, GEMM_TILE_K per
// step through local memory, GEMM_WPT_M x GEMM_WPT_N per work-item. The tiles are
// loaded along whichever of the two extents is contiguous in memory (a runtime
// choice, uniform over the launch), so transposed operands stay coalesced.
// Launch: local = [GEMM_TILE_N / GEMM_WPT_N, GEMM_TILE_M / GEMM_WPT_M, 1],
//   grid = [ceil(N / GEMM_TILE_N) * local0, ceil(M / GEMM_TILE_M) * local1, batches].
//
// A unit built with STOWAGE_IN_AFFINE 1 reads B[k][n] through an affine map per row
// k and an activation, as a 1x1 convolution reads its input after a BatchNormalization
// (and ReLU) or a squeeze-and-excitation scale:
//   B[k][n] = in_act(b[...] * in_scale[in_z1 z1 + in_z2 z2 + k] + in_shift[k])
// with seven more arguments after act_b: in_scale, in_shift, in_z1, in_z2, in_act,
// in_act_a, in_act_b (in_z1, in_z2: in_scale's strides per batch level).
#include <stowage/epilogue.cl.h>

#if STOWAGE_IN_AFFINE
#define GEMM_IN_PARAMS                                                                                    \
  , __global const float* in_scale, __global const float* in_shift, int in_z1, int in_z2, int in_act, \
      float in_act_a, float in_act_b
// B[k][n] read through the map.
#define GEMM_IN(v, k) \
  stowage_activate_code(fma((v), in_scale_z[k], in_shift[k]), STOWAGE_IN_ACT_CODE(in_act), in_act_a, in_act_b)
#else
#define GEMM_IN_PARAMS
#define GEMM_IN(v, k) (v)
#endif

#ifndef GEMM_TILE_M
#define GEMM_TILE_M 64
#endif
#ifndef GEMM_TILE_N
#define GEMM_TILE_N 64
#endif
#ifndef GEMM_TILE_K
#define GEMM_TILE_K 16
#endif
#ifndef GEMM_WPT_M
#define GEMM_WPT_M 8
#endif
#ifndef GEMM_WPT_N
#define GEMM_WPT_N 8
#endif

#define GEMM_THREADS_M (GEMM_TILE_M / GEMM_WPT_M)
#define GEMM_THREADS_N (GEMM_TILE_N / GEMM_WPT_N)
#define GEMM_THREADS (GEMM_THREADS_M * GEMM_THREADS_N)
#define GEMM_A_LOADS (GEMM_TILE_K * GEMM_TILE_M / GEMM_THREADS)
#define GEMM_B_LOADS (GEMM_TILE_K * GEMM_TILE_N / GEMM_THREADS)

#if GEMM_TILE_M % GEMM_WPT_M != 0 || GEMM_TILE_N % GEMM_WPT_N != 0
#error "GEMM_TILE_M and GEMM_TILE_N must be multiples of GEMM_WPT_M and GEMM_WPT_N"
#endif
#if (GEMM_TILE_K * GEMM_TILE_M) % GEMM_THREADS != 0 || (GEMM_TILE_K * GEMM_TILE_N) % GEMM_THREADS != 0
#error "the tiles must hold a multiple of the work-group size of elements"
#endif

__kernel __attribute__((reqd_work_group_size(GEMM_THREADS_N, GEMM_THREADS_M, 1))) void stowage_gemm(
    __global const float* a, __global const float* b, __global const float* bias, __global const float* res,
    __global float* y, int M, int N, int K, int sam, int sak, int sbk, int sbn, int sbias_m, int sbias_n, int nz2,
    int a_z1, int a_z2, int b_z1, int b_z2, int y_z1, int y_z2, int bias_z1, int bias_z2, int a_base, int b_base,
    int y_base, float alpha, int flags, int act, float act_a, float act_b GEMM_IN_PARAMS) {
  __local float a_tile[GEMM_TILE_K][GEMM_TILE_M];
  __local float b_tile[GEMM_TILE_K][GEMM_TILE_N];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int tid = ty * GEMM_THREADS_N + tx;
  const int z = get_group_id(2), z1 = z / nz2, z2 = z - z1 * nz2;
  const int m0 = get_group_id(1) * GEMM_TILE_M, n0 = get_group_id(0) * GEMM_TILE_N;
  const __global float* az = a + a_base + a_z1 * z1 + a_z2 * z2;
  const __global float* bz = b + b_base + b_z1 * z1 + b_z2 * z2;
  const bool a_along_m = sam == 1;  // else along k
  const bool b_along_n = sbn == 1;  // else along k
#if STOWAGE_IN_AFFINE
  const __global float* in_scale_z = in_scale + in_z1 * z1 + in_z2 * z2;
#endif

  float acc[GEMM_WPT_M][GEMM_WPT_N];
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i)
#pragma unroll
    for (int j = 0; j < GEMM_WPT_N; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += GEMM_TILE_K) {
#pragma unroll
    for (int l = 0; l < GEMM_A_LOADS; ++l) {
      const int e = tid + l * GEMM_THREADS;
      const int kk = a_along_m ? e / GEMM_TILE_M : e % GEMM_TILE_K;
      const int mm = a_along_m ? e % GEMM_TILE_M : e / GEMM_TILE_K;
      const int k = k0 + kk, m = m0 + mm;
      a_tile[kk][mm] = (k < K && m < M) ? az[m * sam + k * sak] : 0.0f;
    }
#pragma unroll
    for (int l = 0; l < GEMM_B_LOADS; ++l) {
      const int e = tid + l * GEMM_THREADS;
      const int kk = b_along_n ? e / GEMM_TILE_N : e % GEMM_TILE_K;
      const int nn = b_along_n ? e % GEMM_TILE_N : e / GEMM_TILE_K;
      const int k = k0 + kk, n = n0 + nn;
      b_tile[kk][nn] = (k < K && n < N) ? GEMM_IN(bz[k * sbk + n * sbn], k) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int kk = 0; kk < GEMM_TILE_K; ++kk) {
      float av[GEMM_WPT_M], bv[GEMM_WPT_N];
#pragma unroll
      for (int i = 0; i < GEMM_WPT_M; ++i) av[i] = a_tile[kk][ty + i * GEMM_THREADS_M];
#pragma unroll
      for (int j = 0; j < GEMM_WPT_N; ++j) bv[j] = b_tile[kk][tx + j * GEMM_THREADS_N];
#pragma unroll
      for (int i = 0; i < GEMM_WPT_M; ++i)
#pragma unroll
        for (int j = 0; j < GEMM_WPT_N; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  const int y_off = y_base + y_z1 * z1 + y_z2 * z2;
  const __global float* bias_z = bias + bias_z1 * z1 + bias_z2 * z2;
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i) {
    const int m = m0 + ty + i * GEMM_THREADS_M;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < GEMM_WPT_N; ++j) {
      const int n = n0 + tx + j * GEMM_THREADS_N;
      if (n >= N) continue;
      const int idx = y_off + m * N + n;
      float v = alpha * acc[i][j];
      if (flags & STOWAGE_EPI_BIAS) v += bias_z[m * sbias_m + n * sbias_n];
      if (flags & STOWAGE_EPI_RESIDUAL) v += res[idx];
      y[idx] = stowage_activate(v, act, act_a, act_b);
    }
  }
}
