// Batched matrix products on float32 buffers (docs/operators.md): Gemm, MatMul
// and the 1x1 convolutions of stride 1 without padding.
//
// stowage_gemm: for each batch z = z1 * nz2 + z2 (z1 < batches / nz2):
//   Y[m][n] = act(alpha * sum_k A[m][k] * B[k][n] + bias(m, n) + res[m][n])
//   A[m][k] = a[a_base + a_z1 z1 + a_z2 z2 + m sam + k sak]
//   B[k][n] = b[b_base + b_z1 z1 + b_z2 z2 + k sbk + n sbn]
//   bias(m, n) = bias[bias_z1 z1 + bias_z2 z2 + m sbias_m + n sbias_n]   (flags & STOWAGE_EPI_BIAS)
//   Y[m][n] = y[y_base + y_z1 z1 + y_z2 z2 + m sym + n], res likewise   (flags & STOWAGE_EPI_RESIDUAL)
// Strides are in elements; a stride of 0 broadcasts; sym (Y's rows) is N where Y is
// a matrix of its own, more where it is written into a transpose. Two batch levels cover a 1x1
// convolution (z1 the image, z2 the group) and MatMul's broadcast batch; the
// Python layer launches once per outer index when a MatMul needs more.
//
// Split-K: the reduction is cut into parts of k_len terms (a multiple of
// GEMM_TILE_K; k_len >= K: one part), a work-group each; part p of batch z is
// work-group z * parts + p of dimension 2 and writes its sums (no epilogue: flags 0,
// act 0, alpha 1): with y_first 1 part 0 into y itself and part p > 0 at
// ws + (p - 1) * y_part, with y_first 0 (y shares storage with the residual) part p
// at ws + p * y_part; stowage_gemm_split_sum adds them up in part order before the
// epilogue. With one part ws, y_part and y_first are not read.
//
// Tiling: GEMM_TILE_M x GEMM_TILE_N outputs per work-group, GEMM_TILE_K terms per
// step through local memory, GEMM_WPT_M x GEMM_WPT_N outputs per work-item, in
// blocks of 4 x 4: work-item (tx, ty) holds rows ty * 4 + i * 4 * (TILE_M / WPT_M)
// (+ 0..3) and columns tx * 4 + j * 4 * (TILE_N / WPT_N) (+ 0..3), so that it reads
// local memory as float4s and writes 4 neighbouring outputs. Two local buffers:
// while the work-group multiplies one step, each work-item holds its share of the
// next step's tiles in registers (loaded before, stored after), one barrier a step.
// The tiles are read from global memory as float4s along the contiguous extent of
// each operand where the unit says the launch allows it (GEMM_A_VEC, GEMM_B_VEC;
// every offset a multiple of 4 and that extent too), else one value at a time
// along whichever extent is contiguous (a runtime choice, uniform over the launch);
// GEMM_Y_VEC writes float4s (N and Y's offsets and sym multiples of 4).
//   GEMM_A_VEC 1: along k (sak = 1); 2: along m (sam = 1).
//   GEMM_B_VEC 1: along n (sbn = 1); 2: along k (sbk = 1).
// GEMM_SLICES > 1 cuts each step's terms into that many runs, each multiplied by a
// set of TILE_M / WPT_M x TILE_N / WPT_N work-items into sums of its own; at the end
// each set finishes WPT_M / SLICES of every work-item's rows, adding the other sets'
// sums of them (through local memory, in set order) before the epilogue.
// Launch: local = [GEMM_TILE_N / GEMM_WPT_N, GEMM_SLICES * GEMM_TILE_M / GEMM_WPT_M, 1],
//   grid = [ceil(N / GEMM_TILE_N) * local0, ceil(M / GEMM_TILE_M) * local1, batches * parts].
//
// A unit built with STOWAGE_IN_AFFINE 1 reads B[k][n] through an affine map per row
// k and an activation, as a 1x1 convolution reads its input after a BatchNormalization
// (and ReLU) or a squeeze-and-excitation scale:
//   B[k][n] = in_act(b[...] * in_scale[in_z1 z1 + in_z2 z2 + k] + in_shift[k])
// with seven more arguments after y_part: in_scale, in_shift, in_z1, in_z2, in_act,
// in_act_a, in_act_b (in_z1, in_z2: in_scale's strides per batch level).
//
// A unit built with STOWAGE_A_NORM 1 normalizes each row of A (over its K terms) as a
// LayerNormalization does, whose scale and bias the caller folded into B and the bias:
//   Y[m][n] = epilogue(inv_m * (sum_k A[m][k] B[k][n] - mean_m * colsum[n]))
// mean_m and inv_m = 1 / sqrt(variance_m + norm_eps) from the A tiles in local memory
// as they pass (sums of A[m][k] - A[m][0], which keeps a large mean from cancelling
// the variance), colsum[n] = sum_k B[k][n] (colsum_z like bias_z; the caller passes it
// beside a bias). Three more arguments after the others: colsum, norm_eps and
// norm_stats. Split-K: each part sums its own terms of the rows (shifted by A[m][0],
// read from A, so every part shifts alike) and writes them, without the norm, as the
// other parts' sums are written; the work-groups of column tile 0 also write each
// row's (sum, sum of squares, shift) of their part at
// norm_stats[((z parts + p) M + m) 3 ..]; stowage_gemm_split_sum (the unit's, with
// colsum, norm_eps, norm_stats and K after its own arguments) adds both up and
// normalizes before the epilogue.
//
// stowage_gemm_split_sum: y[e] = act(alpha * sum over parts p of part p's sum at e
//   + bias + res[e]) for e < total = batches * M * N, part 0's in y[e] (y_first 1) or
//   partial[e], part p's in partial[(p - y_first) * total + e], Y contiguous [batches, M, N]
//   (y_base 0, sym = N, y_z2 = M N, y_z1 = nz2 M N); bias as stowage_gemm's. With
//   GEMM_Y_VEC, four neighbouring outputs a work-item.
//   Launch: grid = [total (total / 4 with GEMM_Y_VEC) rounded up to local0].
//
// stowage_gemv: y [M, N] = act(x [M, K] times w [N, Kw]^T + bias) for a few rows
//   (M <= GEMV_MAX_M: a classifier's fully connected layers at batch 1), w's rows
//   padded to Kw (a multiple of 4, zeros past K). Bandwidth-bound: each weight is
//   read once, as float4s, by a work-group of GEMV_LOCAL work-items making
//   GEMV_ROWS outputs of every row of x; neighbouring work-items read neighbouring
//   float4s of a weight row, and the work-group adds their sums in a fixed order.
//   x is read as float4s where K is a multiple of 4, else one value at a time.
//   Launch: local = [GEMV_LOCAL], grid = [GEMV_LOCAL * ceil(N / GEMV_ROWS)].
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

#if STOWAGE_A_NORM
#define GEMM_NORM_PARAMS , __global const float *colsum, float norm_eps, __global float *norm_stats
#define GEMM_NORM_SUM_PARAMS , __global const float *colsum, float norm_eps, __global const float *norm_stats, int K
#else
#define GEMM_NORM_PARAMS
#define GEMM_NORM_SUM_PARAMS
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
#ifndef GEMM_A_VEC
#define GEMM_A_VEC 0
#endif
#ifndef GEMM_B_VEC
#define GEMM_B_VEC 0
#endif
#ifndef GEMM_Y_VEC
#define GEMM_Y_VEC 0
#endif
// How many steps ahead of its products a step's tiles are loaded: 1, or 2 (two
// register sets: loads have two steps' products to arrive, which keeps more bytes in
// flight where few work-groups share a compute unit and the weights come from DRAM).
#ifndef GEMM_AHEAD
#define GEMM_AHEAD 1
#endif
#if GEMM_AHEAD != 1 && GEMM_AHEAD != 2
#error "GEMM_AHEAD must be 1 or 2"
#endif

// Sets of work-items, each multiplying a run of every step's terms (the header says
// how): more work-items in flight without fewer outputs each.
#ifndef GEMM_SLICES
#define GEMM_SLICES 1
#endif
#define GEMM_THREADS_M (GEMM_TILE_M / GEMM_WPT_M)
#define GEMM_THREADS_N (GEMM_TILE_N / GEMM_WPT_N)
#define GEMM_SLICE_THREADS (GEMM_THREADS_M * GEMM_THREADS_N)
#define GEMM_THREADS (GEMM_SLICE_THREADS * GEMM_SLICES)
#define GEMM_SLICE_K (GEMM_TILE_K / GEMM_SLICES)
// Each slice finishes GEMM_SLICE_ROWS of every work-item's rows (the epilogue is
// shared as the products are): row i of a work-item is slice i / GEMM_SLICE_ROWS's.
#define GEMM_SLICE_ROWS (GEMM_WPT_M / GEMM_SLICES)
#define GEMM_OWNS(i) ((i) / GEMM_SLICE_ROWS == slice)
// float4s per row of a local tile: one more than the tile's, so that values stored
// down a column (an operand read along k) fall into different banks.
#define GEMM_ROW_A (GEMM_TILE_M / 4 + 1)
#define GEMM_ROW_B (GEMM_TILE_N / 4 + 1)
// Values (vector loads: float4s) of each tile a work-item loads per step.
#define GEMM_A_LOADS (GEMM_TILE_K * GEMM_TILE_M / GEMM_THREADS / (GEMM_A_VEC ? 4 : 1))
#define GEMM_B_LOADS (GEMM_TILE_K * GEMM_TILE_N / GEMM_THREADS / (GEMM_B_VEC ? 4 : 1))

#if GEMM_TILE_M % GEMM_WPT_M != 0 || GEMM_TILE_N % GEMM_WPT_N != 0
#error "GEMM_TILE_M and GEMM_TILE_N must be multiples of GEMM_WPT_M and GEMM_WPT_N"
#endif
#if GEMM_WPT_M % 4 != 0 || GEMM_WPT_N % 4 != 0 || GEMM_TILE_K % 4 != 0
#error "GEMM_WPT_M, GEMM_WPT_N and GEMM_TILE_K must be multiples of 4"
#endif
#if GEMM_SLICES < 1 || GEMM_TILE_K % GEMM_SLICES != 0 || GEMM_WPT_M % GEMM_SLICES != 0
#error "GEMM_SLICES must divide GEMM_TILE_K and GEMM_WPT_M"
#endif
#if (GEMM_TILE_K * GEMM_TILE_M / 4) % GEMM_THREADS != 0 || (GEMM_TILE_K * GEMM_TILE_N / 4) % GEMM_THREADS != 0
#error "the tiles must hold a multiple of 4 times the work-group size of elements"
#endif
#if STOWAGE_A_NORM
// Work-items per row of A while the rows' sums are gathered.
#define GEMM_NORM_GROUPS (GEMM_THREADS / GEMM_TILE_M)
#if GEMM_NORM_GROUPS < 1 || GEMM_THREADS % GEMM_TILE_M != 0
#error "STOWAGE_A_NORM takes a work-group of a multiple of GEMM_TILE_M work-items"
#endif
#if 2 * GEMM_THREADS + GEMM_TILE_M > 8 * GEMM_TILE_K * GEMM_ROW_A
#error "STOWAGE_A_NORM: the rows' sums must fit where A's tiles were"
#endif
#endif

#if GEMM_A_VEC
typedef float4 gemm_a_t;
#else
typedef float gemm_a_t;
#endif
#if GEMM_B_VEC
typedef float4 gemm_b_t;
#else
typedef float gemm_b_t;
#endif

// 4 values at p, 16-byte aligned (the launch guarantees it): one wide access.
#define GEMM_LOAD4(p) (*(const __global float4*)(p))

// Local value (k, i) of a tile whose rows hold `row` float4s.
#define GEMM_AT(tile, row, k, i) (((__local float*)(tile))[(k) * (row) * 4 + (i)])

// This step's values of A [k0, k_end) x [m0, m0 + TILE_M) into registers (zeros outside).
inline void stowage_gemm_load_a(gemm_a_t* reg, const __global float* az, int tid, int k0, int k_end, int m0, int M,
                                int sam, int sak) {
#pragma unroll
  for (int l = 0; l < GEMM_A_LOADS; ++l) {
    const int e = tid + l * GEMM_THREADS;
#if GEMM_A_VEC == 1
    const int m = m0 + e / (GEMM_TILE_K / 4), k = k0 + e % (GEMM_TILE_K / 4) * 4;
    reg[l] = (m < M && k < k_end) ? GEMM_LOAD4(az + m * sam + k) : (float4)(0.0f);
#elif GEMM_A_VEC == 2
    const int k = k0 + e / (GEMM_TILE_M / 4), m = m0 + e % (GEMM_TILE_M / 4) * 4;
    reg[l] = (m < M && k < k_end) ? GEMM_LOAD4(az + k * sak + m) : (float4)(0.0f);
#else
    const bool along_m = sam == 1;
    const int k = k0 + (along_m ? e / GEMM_TILE_M : e % GEMM_TILE_K);
    const int m = m0 + (along_m ? e % GEMM_TILE_M : e / GEMM_TILE_K);
    reg[l] = (m < M && k < k_end) ? az[m * sam + k * sak] : 0.0f;
#endif
  }
}

inline void stowage_gemm_store_a(__local float4* tile, const gemm_a_t* reg, int tid, int sam) {
#pragma unroll
  for (int l = 0; l < GEMM_A_LOADS; ++l) {
    const int e = tid + l * GEMM_THREADS;
#if GEMM_A_VEC == 1
    const int m = e / (GEMM_TILE_K / 4), k = e % (GEMM_TILE_K / 4) * 4;
    GEMM_AT(tile, GEMM_ROW_A, k, m) = reg[l].x;
    GEMM_AT(tile, GEMM_ROW_A, k + 1, m) = reg[l].y;
    GEMM_AT(tile, GEMM_ROW_A, k + 2, m) = reg[l].z;
    GEMM_AT(tile, GEMM_ROW_A, k + 3, m) = reg[l].w;
#elif GEMM_A_VEC == 2
    tile[e / (GEMM_TILE_M / 4) * GEMM_ROW_A + e % (GEMM_TILE_M / 4)] = reg[l];
#else
    const bool along_m = sam == 1;
    const int k = along_m ? e / GEMM_TILE_M : e % GEMM_TILE_K, m = along_m ? e % GEMM_TILE_M : e / GEMM_TILE_K;
    GEMM_AT(tile, GEMM_ROW_A, k, m) = reg[l];
#endif
  }
}

#if STOWAGE_IN_AFFINE
#define GEMM_IN_ARGS , in_scale_z, in_shift, in_act, in_act_a, in_act_b
#define GEMM_IN_DECL \
  , const __global float *in_scale_z, const __global float *in_shift, int in_act, float in_act_a, float in_act_b
#else
#define GEMM_IN_ARGS
#define GEMM_IN_DECL
#endif

// This step's values of B [k0, k_end) x [n0, n0 + TILE_N) into registers (zeros outside).
inline void stowage_gemm_load_b(gemm_b_t* reg, const __global float* bz, int tid, int k0, int k_end, int n0, int N,
                                int sbk, int sbn GEMM_IN_DECL) {
#pragma unroll
  for (int l = 0; l < GEMM_B_LOADS; ++l) {
    const int e = tid + l * GEMM_THREADS;
#if GEMM_B_VEC == 1
    const int k = k0 + e / (GEMM_TILE_N / 4), n = n0 + e % (GEMM_TILE_N / 4) * 4;
    float4 v = (float4)(0.0f);
    if (n < N && k < k_end) {
      v = GEMM_LOAD4(bz + k * sbk + n);
#if STOWAGE_IN_AFFINE
      v = (float4)(GEMM_IN(v.x, k), GEMM_IN(v.y, k), GEMM_IN(v.z, k), GEMM_IN(v.w, k));
#endif
    }
    reg[l] = v;
#elif GEMM_B_VEC == 2
    const int n = n0 + e / (GEMM_TILE_K / 4), k = k0 + e % (GEMM_TILE_K / 4) * 4;
    float4 v = (float4)(0.0f);
    if (n < N && k < k_end) {
      v = GEMM_LOAD4(bz + n * sbn + k);
#if STOWAGE_IN_AFFINE
      v = (float4)(GEMM_IN(v.x, k), GEMM_IN(v.y, k + 1), GEMM_IN(v.z, k + 2), GEMM_IN(v.w, k + 3));
#endif
    }
    reg[l] = v;
#else
    const bool along_n = sbn == 1;
    const int k = k0 + (along_n ? e / GEMM_TILE_N : e % GEMM_TILE_K);
    const int n = n0 + (along_n ? e % GEMM_TILE_N : e / GEMM_TILE_K);
    reg[l] = (n < N && k < k_end) ? GEMM_IN(bz[k * sbk + n * sbn], k) : 0.0f;
#endif
  }
}

inline void stowage_gemm_store_b(__local float4* tile, const gemm_b_t* reg, int tid, int sbn) {
#pragma unroll
  for (int l = 0; l < GEMM_B_LOADS; ++l) {
    const int e = tid + l * GEMM_THREADS;
#if GEMM_B_VEC == 1
    tile[e / (GEMM_TILE_N / 4) * GEMM_ROW_B + e % (GEMM_TILE_N / 4)] = reg[l];
#elif GEMM_B_VEC == 2
    const int n = e / (GEMM_TILE_K / 4), k = e % (GEMM_TILE_K / 4) * 4;
    GEMM_AT(tile, GEMM_ROW_B, k, n) = reg[l].x;
    GEMM_AT(tile, GEMM_ROW_B, k + 1, n) = reg[l].y;
    GEMM_AT(tile, GEMM_ROW_B, k + 2, n) = reg[l].z;
    GEMM_AT(tile, GEMM_ROW_B, k + 3, n) = reg[l].w;
#else
    const bool along_n = sbn == 1;
    const int k = along_n ? e / GEMM_TILE_N : e % GEMM_TILE_K, n = along_n ? e % GEMM_TILE_N : e / GEMM_TILE_K;
    GEMM_AT(tile, GEMM_ROW_B, k, n) = reg[l];
#endif
  }
}

// The epilogue of one output value (m, n): alpha, bias, residual, activation.
#define GEMM_EPILOGUE_ONE(v, m, n, idx)                                                \
  do {                                                                                 \
    v *= alpha;                                                                        \
    if (flags & STOWAGE_EPI_BIAS) v += bias_z[(m) * sbias_m + (n) * sbias_n];          \
    if (flags & STOWAGE_EPI_RESIDUAL) v += res[idx];                                   \
  } while (0)

__kernel __attribute__((reqd_work_group_size(GEMM_THREADS_N, GEMM_THREADS_M * GEMM_SLICES, 1))) void stowage_gemm(
    __global const float* a, __global const float* b, __global const float* bias, __global const float* res,
    __global float* y, __global float* ws, int M, int N, int K, int sam, int sak, int sbk, int sbn, int sym,
    int sbias_m, int sbias_n, int nz2,
    int a_z1, int a_z2, int b_z1, int b_z2, int y_z1, int y_z2, int bias_z1, int bias_z2, int a_base, int b_base,
    int y_base, float alpha, int flags, int act, float act_a, float act_b, int k_len, int y_part,
    int y_first GEMM_IN_PARAMS GEMM_NORM_PARAMS) {
  __local float4 a_tile[2][GEMM_TILE_K * GEMM_ROW_A];
  __local float4 b_tile[2][GEMM_TILE_K * GEMM_ROW_B];
  const int tx = get_local_id(0), ty = get_local_id(1) % GEMM_THREADS_M, slice = get_local_id(1) / GEMM_THREADS_M;
  const int tid = get_local_id(1) * GEMM_THREADS_N + tx;
  const int parts = max(1, (K + k_len - 1) / k_len);
  const int part = get_group_id(2) % parts, z = get_group_id(2) / parts;
  const int z1 = z / nz2, z2 = z - z1 * nz2;
  const int m0 = get_group_id(1) * GEMM_TILE_M, n0 = get_group_id(0) * GEMM_TILE_N;
  const int k_begin = part * k_len, k_end = min(K, k_begin + k_len);
  const __global float* az = a + a_base + a_z1 * z1 + a_z2 * z2;
  const __global float* bz = b + b_base + b_z1 * z1 + b_z2 * z2;
#if STOWAGE_IN_AFFINE
  const __global float* in_scale_z = in_scale + in_z1 * z1 + in_z2 * z2;
#endif

  float4 acc[GEMM_WPT_M][GEMM_WPT_N / 4];
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i)
#pragma unroll
    for (int j = 0; j < GEMM_WPT_N / 4; ++j) acc[i][j] = (float4)(0.0f);

  // Register sets for the steps in flight. With GEMM_AHEAD 1 each step loads the next
  // into set 0 and stores it after its products; with 2, step s loads step s + 2 into
  // set s % 2 and stores step s + 1 (loaded during step s - 1) from the other set.
  gemm_a_t a_reg0[GEMM_A_LOADS], a_reg1[GEMM_A_LOADS];
  gemm_b_t b_reg0[GEMM_B_LOADS], b_reg1[GEMM_B_LOADS];
  stowage_gemm_load_a(a_reg0, az, tid, k_begin, k_end, m0, M, sam, sak);
  stowage_gemm_load_b(b_reg0, bz, tid, k_begin, k_end, n0, N, sbk, sbn GEMM_IN_ARGS);
  stowage_gemm_store_a(a_tile[0], a_reg0, tid, sam);
  stowage_gemm_store_b(b_tile[0], b_reg0, tid, sbn);
#if GEMM_AHEAD == 2
  if (k_begin + GEMM_TILE_K < k_end) {
    stowage_gemm_load_a(a_reg1, az, tid, k_begin + GEMM_TILE_K, k_end, m0, M, sam, sak);
    stowage_gemm_load_b(b_reg1, bz, tid, k_begin + GEMM_TILE_K, k_end, n0, N, sbk, sbn GEMM_IN_ARGS);
  }
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
#if STOWAGE_A_NORM
  // Row norm_row's sums over the terms norm_part, norm_part + GEMM_NORM_GROUPS, ...
  // of each step, less the row's first value.
  const int norm_row = tid % GEMM_TILE_M, norm_part = tid / GEMM_TILE_M;
  const float norm_shift = parts == 1              ? GEMM_AT(a_tile[0], GEMM_ROW_A, 0, norm_row)
                           : m0 + norm_row < M ? az[(m0 + norm_row) * sam]
                                               : 0.0f;
  float norm_s1 = 0.0f, norm_s2 = 0.0f;
#endif
  int buf = 0;
  for (int k0 = k_begin; k0 < k_end; k0 += GEMM_TILE_K) {
    const bool has_next = k0 + GEMM_TILE_K < k_end;
    const int k_far = k0 + GEMM_AHEAD * GEMM_TILE_K;
    // buf is the step's parity: which set to load into (uniform over the work-group).
    if (k_far < k_end) {  // a later step's tiles, on their way while this one is multiplied
      if (GEMM_AHEAD == 1 || buf == 0) {
        stowage_gemm_load_a(a_reg0, az, tid, k_far, k_end, m0, M, sam, sak);
        stowage_gemm_load_b(b_reg0, bz, tid, k_far, k_end, n0, N, sbk, sbn GEMM_IN_ARGS);
      } else {
        stowage_gemm_load_a(a_reg1, az, tid, k_far, k_end, m0, M, sam, sak);
        stowage_gemm_load_b(b_reg1, bz, tid, k_far, k_end, n0, N, sbk, sbn GEMM_IN_ARGS);
      }
    }
    const __local float4* at = a_tile[buf];
    const __local float4* bt = b_tile[buf];
#pragma unroll
    for (int q = 0; q < GEMM_SLICE_K; ++q) {
      const int kk = slice * GEMM_SLICE_K + q;
      float4 av[GEMM_WPT_M / 4], bv[GEMM_WPT_N / 4];
#pragma unroll
      for (int i = 0; i < GEMM_WPT_M / 4; ++i) av[i] = at[kk * GEMM_ROW_A + i * GEMM_THREADS_M + ty];
#pragma unroll
      for (int j = 0; j < GEMM_WPT_N / 4; ++j) bv[j] = bt[kk * GEMM_ROW_B + j * GEMM_THREADS_N + tx];
#pragma unroll
      for (int i = 0; i < GEMM_WPT_M / 4; ++i)
#pragma unroll
        for (int j = 0; j < GEMM_WPT_N / 4; ++j) {
          acc[4 * i][j] = fma((float4)(av[i].x), bv[j], acc[4 * i][j]);
          acc[4 * i + 1][j] = fma((float4)(av[i].y), bv[j], acc[4 * i + 1][j]);
          acc[4 * i + 2][j] = fma((float4)(av[i].z), bv[j], acc[4 * i + 2][j]);
          acc[4 * i + 3][j] = fma((float4)(av[i].w), bv[j], acc[4 * i + 3][j]);
        }
    }
#if STOWAGE_A_NORM
    for (int kk = norm_part; kk < GEMM_TILE_K && k0 + kk < k_end; kk += GEMM_NORM_GROUPS) {
      const float d = GEMM_AT(at, GEMM_ROW_A, kk, norm_row) - norm_shift;
      norm_s1 += d;
      norm_s2 = fma(d, d, norm_s2);
    }
#endif
    if (has_next) {  // the other buffer: every work-item finished with it before the last barrier
      if (GEMM_AHEAD == 1 || buf == 1) {
        stowage_gemm_store_a(a_tile[buf ^ 1], a_reg0, tid, sam);
        stowage_gemm_store_b(b_tile[buf ^ 1], b_reg0, tid, sbn);
      } else {
        stowage_gemm_store_a(a_tile[buf ^ 1], a_reg1, tid, sam);
        stowage_gemm_store_b(b_tile[buf ^ 1], b_reg1, tid, sbn);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    buf ^= 1;
  }

#if STOWAGE_A_NORM
  // The rows' sums and first values through local memory (the tiles are free: the
  // loop ended on a barrier), then each work-item's rows' mean and inverse deviation.
  __local float* norm_sums = (__local float*)a_tile;
  norm_sums[norm_part * GEMM_TILE_M + norm_row] = norm_s1;
  norm_sums[(GEMM_NORM_GROUPS + norm_part) * GEMM_TILE_M + norm_row] = norm_s2;
  if (norm_part == 0) norm_sums[2 * GEMM_NORM_GROUPS * GEMM_TILE_M + norm_row] = norm_shift;
  barrier(CLK_LOCAL_MEM_FENCE);
  float norm_mean[GEMM_WPT_M], norm_inv[GEMM_WPT_M];
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i) {
    if (!GEMM_OWNS(i)) continue;  // another slice finishes the row
    const int r = (i / 4) * 4 * GEMM_THREADS_M + ty * 4 + i % 4;
    float s1 = 0.0f, s2 = 0.0f;
    for (int g = 0; g < GEMM_NORM_GROUPS; ++g) {
      s1 += norm_sums[g * GEMM_TILE_M + r];
      s2 += norm_sums[(GEMM_NORM_GROUPS + g) * GEMM_TILE_M + r];
    }
    const float shift = norm_sums[2 * GEMM_NORM_GROUPS * GEMM_TILE_M + r];
    if (parts > 1 && tx == 0 && get_group_id(0) == 0 && m0 + r < M) {  // this part's sums, once per row
      __global float* st = norm_stats + ((long)(z * parts + part) * M + m0 + r) * 3;
      st[0] = s1;
      st[1] = s2;
      st[2] = shift;
    }
    const float d = s1 / (float)K;
    norm_mean[i] = shift + d;
    norm_inv[i] = rsqrt(fmax(s2 / (float)K - d * d, 0.0f) + norm_eps);
  }
#endif
#if GEMM_SLICES > 1
  // Each slice's sums of the rows other slices finish into local memory, then each
  // slice adds the others' sums of its own rows in slice order. Neighbouring
  // work-items store neighbouring float4s; row i's sums by slice w sit at w's place
  // among the slices other than the row's own.
  __local float4 slice_sums[(GEMM_SLICES - 1) * GEMM_WPT_M * (GEMM_WPT_N / 4) * GEMM_SLICE_THREADS];
  const int slice_tid = ty * GEMM_THREADS_N + tx;
#define GEMM_SLOT(w, i, j)                                                                               \
  (((((w) - ((w) > (i) / GEMM_SLICE_ROWS)) * GEMM_WPT_M + (i)) * (GEMM_WPT_N / 4) + (j)) * GEMM_SLICE_THREADS + \
   slice_tid)
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i)
#pragma unroll
    for (int j = 0; j < GEMM_WPT_N / 4; ++j)
      if (!GEMM_OWNS(i)) slice_sums[GEMM_SLOT(slice, i, j)] = acc[i][j];
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i)
#pragma unroll
    for (int w = 0; w < GEMM_SLICES; ++w)
#pragma unroll
      for (int j = 0; j < GEMM_WPT_N / 4; ++j)
        if (GEMM_OWNS(i) && w != slice) acc[i][j] += slice_sums[GEMM_SLOT(w, i, j)];
#undef GEMM_SLOT
#endif
  int y_off = y_base + y_z1 * z1 + y_z2 * z2;
  if (y_part != 0 && part >= y_first) {  // a part of a split reduction into the workspace
    y = ws;
    y_off += (part - y_first) * y_part;
  }
  const __global float* bias_z = bias + bias_z1 * z1 + bias_z2 * z2;
#if STOWAGE_A_NORM
  float4 norm_c[GEMM_WPT_N / 4];  // colsum at this work-item's columns, read once for all its rows
#pragma unroll
  for (int j = 0; j < GEMM_WPT_N / 4; ++j) {
    const int n = n0 + j * 4 * GEMM_THREADS_N + tx * 4;
    const __global float* cs = colsum + bias_z1 * z1 + bias_z2 * z2 + n;
    norm_c[j] = (float4)(n < N ? cs[0] : 0.0f, n + 1 < N ? cs[1] : 0.0f, n + 2 < N ? cs[2] : 0.0f,
                         n + 3 < N ? cs[3] : 0.0f);
  }
#endif
#pragma unroll
  for (int i = 0; i < GEMM_WPT_M; ++i) {
    const int m = m0 + (i / 4) * 4 * GEMM_THREADS_M + ty * 4 + i % 4;
    if (m >= M || !GEMM_OWNS(i)) continue;
#pragma unroll
    for (int j = 0; j < GEMM_WPT_N / 4; ++j) {
      const int n = n0 + j * 4 * GEMM_THREADS_N + tx * 4;
      if (n >= N) continue;
      const int idx = y_off + m * sym + n;
      float4 v = acc[i][j];
#if STOWAGE_A_NORM
      if (parts == 1) v = norm_inv[i] * (v - norm_mean[i] * norm_c[j]);
#endif
      GEMM_EPILOGUE_ONE(v.x, m, n, idx);
      if (n + 1 < N) GEMM_EPILOGUE_ONE(v.y, m, n + 1, idx + 1);
      if (n + 2 < N) GEMM_EPILOGUE_ONE(v.z, m, n + 2, idx + 2);
      if (n + 3 < N) GEMM_EPILOGUE_ONE(v.w, m, n + 3, idx + 3);
      v = stowage_activate4(v, act, act_a, act_b);
#if GEMM_Y_VEC
      *(__global float4*)(y + idx) = v;
#else
      y[idx] = v.x;
      if (n + 1 < N) y[idx + 1] = v.y;
      if (n + 2 < N) y[idx + 2] = v.z;
      if (n + 3 < N) y[idx + 3] = v.w;
#endif
    }
  }
}

// With GEMM_Y_VEC (N a multiple of 4) each work-item adds up four neighbouring
// outputs of a row as float4s: a fourth of the work-items and wide loads.
#if GEMM_Y_VEC
#define SUM_WIDTH 4
typedef float4 sum_t;
#define SUM_LOAD(p) vload4(0, (p))
#else
#define SUM_WIDTH 1
typedef float sum_t;
#define SUM_LOAD(p) (*(p))
#endif

__kernel void stowage_gemm_split_sum(__global const float* partial, __global const float* bias,
                                     __global const float* res, __global float* y, int parts, int y_first,
                                     int total, int M, int N, int nz2, int bias_z1, int bias_z2, int sbias_m,
                                     int sbias_n, float alpha, int flags, int act, float act_a,
                                     float act_b GEMM_NORM_SUM_PARAMS) {
  const int e = get_global_id(0) * SUM_WIDTH;
  if (e >= total) return;
  sum_t v = y_first ? SUM_LOAD(y + e) : (sum_t)(0.0f);
  for (int p = y_first; p < parts; ++p) v += SUM_LOAD(partial + (p - y_first) * total + e);
  const int n = e % N, row = e / N, m = row % M, z = row / M, z1 = z / nz2, z2 = z - z1 * nz2;
  const __global float* bias_z = bias + bias_z1 * z1 + bias_z2 * z2;
#if STOWAGE_A_NORM
  // The row's sums over every part, in part order.
  const __global float* st = norm_stats + ((long)z * parts * M + m) * 3;
  float s1 = 0.0f, s2 = 0.0f;
  for (int p = 0; p < parts; ++p) {
    s1 += st[(long)p * M * 3];
    s2 += st[(long)p * M * 3 + 1];
  }
  const float d = s1 / (float)K;
  const float inv = rsqrt(fmax(s2 / (float)K - d * d, 0.0f) + norm_eps);
  v = inv * (v - (st[2] + d) * SUM_LOAD(colsum + bias_z1 * z1 + bias_z2 * z2 + n));
#endif
#if GEMM_Y_VEC
  GEMM_EPILOGUE_ONE(v.x, m, n, e);
  GEMM_EPILOGUE_ONE(v.y, m, n + 1, e + 1);
  GEMM_EPILOGUE_ONE(v.z, m, n + 2, e + 2);
  GEMM_EPILOGUE_ONE(v.w, m, n + 3, e + 3);
  vstore4(stowage_activate4(v, act, act_a, act_b), 0, y + e);
#else
  GEMM_EPILOGUE_ONE(v, m, n, e);
  y[e] = stowage_activate(v, act, act_a, act_b);
#endif
}
#undef SUM_LOAD

#ifndef GEMV_LOCAL
#define GEMV_LOCAL 128
#endif
#ifndef GEMV_ROWS
#define GEMV_ROWS 4
#endif
#ifndef GEMV_MAX_M
#define GEMV_MAX_M 4
#endif
#if GEMV_LOCAL & (GEMV_LOCAL - 1)
#error "GEMV_LOCAL must be a power of two"
#endif

__kernel __attribute__((reqd_work_group_size(GEMV_LOCAL, 1, 1))) void stowage_gemv(
    __global const float* x, __global const float4* w, __global const float* bias, __global float* y, int M, int N,
    int K, int Kw, int flags, int act, float act_a, float act_b) {
  __local float partial[GEMV_ROWS * GEMV_MAX_M][GEMV_LOCAL];
  const int t = get_local_id(0), n0 = get_group_id(0) * GEMV_ROWS;
  const int K4 = Kw / 4;
  float acc[GEMV_ROWS][GEMV_MAX_M];
#pragma unroll
  for (int r = 0; r < GEMV_ROWS; ++r)
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) acc[r][m] = 0.0f;
  const bool x_vec = (K & 3) == 0;
  for (int q = t; q < K4; q += GEMV_LOCAL) {
    float4 xv[GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) {
      if (m >= M) {
        xv[m] = (float4)(0.0f);
      } else if (x_vec) {
        xv[m] = GEMM_LOAD4(x + m * K + 4 * q);
      } else {  // zeros past K (w's padding holds zeros too)
        const int k = 4 * q;
        const __global float* xr = x + m * K;
        xv[m] = (float4)(xr[k], k + 1 < K ? xr[k + 1] : 0.0f, k + 2 < K ? xr[k + 2] : 0.0f,
                         k + 3 < K ? xr[k + 3] : 0.0f);
      }
    }
    // A constant trip count keeps acc in registers; rows past N repeat the last.
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r) {
      const float4 wv = w[min(n0 + r, N - 1) * K4 + q];
#pragma unroll
      for (int m = 0; m < GEMV_MAX_M; ++m) acc[r][m] += dot(wv, xv[m]);
    }
  }
#pragma unroll
  for (int r = 0; r < GEMV_ROWS; ++r)
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) partial[r * GEMV_MAX_M + m][t] = acc[r][m];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = GEMV_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step)
#pragma unroll
      for (int o = 0; o < GEMV_ROWS * GEMV_MAX_M; ++o) partial[o][t] += partial[o][t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t < GEMV_ROWS * GEMV_MAX_M) {
    const int r = t / GEMV_MAX_M, m = t % GEMV_MAX_M, n = n0 + r;
    if (n < N && m < M) {
      float v = partial[t][0];
      if (flags & STOWAGE_EPI_BIAS) v += bias[n];
      y[m * N + n] = stowage_activate(v, act, act_a, act_b);
    }
  }
}
