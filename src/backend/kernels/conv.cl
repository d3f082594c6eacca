// Convolution on NCHW float32 buffers (docs/operators.md).
//
// stowage_conv2d: every stride, padding, dilation and group count, as an
// implicit GEMM per group g:
//   Y_g[m][n] = sum_k Wt_g[k][m] * X_g[k][n]
//   m < Kg = K / groups               an output channel of the group
//   n < N * P * Q                     an output pixel of one image of the batch
//   k < Cg * R * S (Cg = C / groups)  an input channel and a kernel tap
// X_g[k][n] is the input value tap k of pixel n reads (zero in the padding); it is
// gathered into local memory, never materialised. The weights come transposed,
// w[g][k][m] (the layout the Python layer makes), so a tile's loads are contiguous.
//
// Tiling: a work-group computes a CONV_TILE_M x CONV_TILE_N tile of Y_g, walking
// k in steps of CONV_TILE_K through local memory; each work-item holds a
// CONV_WPT_M x CONV_WPT_N register block (rows ty + i * THREADS_M, columns
// tx + j * THREADS_N: neighbouring work-items store neighbouring pixels).
// Split-K: with k_split > 1 the reduction is cut into k_split parts (whole
// steps), each a work-group of its own, which write their partial sums to y as a
// workspace [k_split, K, N * P * Q]; stowage_conv2d_split_sum then adds them in a
// fixed order and applies the epilogue. It gives layers with few output tiles
// (late layers at batch 1) enough work-groups to fill a GPU.
// Launch: local = [CONV_TILE_N / CONV_WPT_N, CONV_TILE_M / CONV_WPT_M, 1],
//   grid = [ceil(N*P*Q / CONV_TILE_N) * local0, ceil(Kg / CONV_TILE_M) * local1, groups * k_split].
// stowage_conv2d_split_sum: grid = [N*P*Q, K], each rounded up to the work-group.
//
// stowage_conv2d_depthwise: groups == C (one input channel per group, any
// multiplier K / C); w[k][r][s], with STOWAGE_EPI_BIAS_AFTER_WEIGHTS the K biases
// right after them (bias then null). A work-item computes DW_PX neighbouring pixels
// of one row of one output channel.
// Launch: grid = [ceil(Q / DW_PX) rounded up to local0, P rounded up to local1, N * K],
//   local[2] = 1.
// A unit built with DW_SUMS 1 takes one more argument after act_b, `sums`: each
// work-group also adds up the outputs it wrote (after the activation) in a fixed
// order, sums[(n K + k) G + g] for work-group g = group(1) groups(0) + group(0) of
// the G = groups(0) groups(1) covering a channel plane: the squeeze of a
// squeeze-and-excitation reading this output (stowage_excite_sums) without reading
// the output again.
//
// stowage_conv2d_depthwise_split: stowage_conv2d_depthwise (no residual, no DW_SUMS)
// of an input that a split reduction left in parts, not yet added up: x holds
// in_parts planes of N C H W values, and each input value is their sum in part order
// plus in_bias[c] and in_res (bits STOWAGE_EPI_BIAS and STOWAGE_EPI_RESIDUAL of
// in_flags), as the split's sum kernels add them. Each work-group adds up once the
// inputs its outputs read (its tile: local rows + R - 1 by local columns DW_PX + S - 1
// values, at most DW_SPLIT_TILE) into local memory, and the work-groups of each input
// channel's first output channel write the sums under their outputs to x_sum: the
// added-up input, for its later readers. So every pixel stays where it is: P == H,
// Q == W, unit strides and dilations, S <= DW_ROW_TAPS (the host checks). Launch as
// stowage_conv2d_depthwise.
//
// Both end in the epilogue of <stowage/epilogue.cl.h>: + bias[k], + res (the
// output's shape), activation. res may be y itself (a residual updated in place):
// each output is read and written by the same work-item. Indices are int: every
// tensor has fewer than 2^31 elements (the Python layer checks).
//
// A unit built with STOWAGE_IN_AFFINE 1 gives stowage_conv2d six more arguments
// after act_b (in_scale, in_shift, in_batch, in_act, in_act_a, in_act_b) and reads
// input channel c of image n as in_act(x * in_scale[n in_batch + c] + in_shift[c]):
// a BatchNormalization (and activation) before the convolution, or a
// squeeze-and-excitation scale per image (in_batch = C). The padding stays zero.
#include <stowage/epilogue.cl.h>

#if STOWAGE_IN_AFFINE
#define CONV_IN_PARAMS                                                                                     \
  , __global const float* in_scale, __global const float* in_shift, int in_batch, int in_act, float in_act_a, \
      float in_act_b
// A value of channel kc of group g read for pixel column j, through the map.
#define CONV_IN(v, j, kc)                                                                  \
  stowage_activate_code(fma((v), in_scale[b_scale[j] + (kc)], in_shift[g * Cg + (kc)]), \
                        STOWAGE_IN_ACT_CODE(in_act), in_act_a, in_act_b)
#else
#define CONV_IN_PARAMS
#define CONV_IN(v, j, kc) (v)
#endif

#ifndef CONV_TILE_M
#define CONV_TILE_M 64
#endif
#ifndef CONV_TILE_N
#define CONV_TILE_N 64
#endif
#ifndef CONV_TILE_K
#define CONV_TILE_K 16
#endif
#ifndef CONV_WPT_M
#define CONV_WPT_M 8
#endif
#ifndef CONV_WPT_N
#define CONV_WPT_N 8
#endif
#ifndef DW_PX
#define DW_PX 4
#endif
// 1: each step's tiles are loaded during the step before (two local buffers); 0: each
// step loads its own between two barriers (see stowage_conv2d's main loop).
#ifndef CONV_AHEAD
#define CONV_AHEAD 0
#endif
#if CONV_AHEAD != 0 && CONV_AHEAD != 1
#error "CONV_AHEAD must be 0 or 1"
#endif
#ifndef DW_SUMS
#define DW_SUMS 0
#endif
#ifndef DW_ROW_TAPS
#define DW_ROW_TAPS 7  // the widest kernel row the depthwise kernel keeps in registers at unit stride
#endif
// DW_R > 0: a unit for kernels of DW_R rows: the rows' loop unrolled and, where the
// rows fit registers (unit stride and dilation along w, S <= DW_ROW_TAPS), rows outside
// the input read as zeros, so that every row's loads may be issued before the products.
#ifndef DW_R
#define DW_R 0
#endif
#if DW_SUMS
#define DW_SUMS_PARAMS , __global float* sums
#define DW_MAX_GROUP 256  // work-items of a work-group (sizes its partial sums in local memory)
#else
#define DW_SUMS_PARAMS
#endif

#define CONV_THREADS_M (CONV_TILE_M / CONV_WPT_M)
#define CONV_THREADS_N (CONV_TILE_N / CONV_WPT_N)
#define CONV_THREADS (CONV_THREADS_M * CONV_THREADS_N)
#define CONV_A_LOADS (CONV_TILE_K * CONV_TILE_M / CONV_THREADS)
// Loading the input tile: work-item t owns the columns t % CONV_TILE_N + j * CONV_THREADS
// (j < CONV_B_COLS) and the rows t / CONV_TILE_N + l * CONV_B_ROW_STEP (l < CONV_B_ROWS). It
// decomposes its pixels once, and walks its rows' (channel, tap) incrementally:
// no division in the main loop.
#if CONV_THREADS >= CONV_TILE_N
#define CONV_B_COLS 1
#define CONV_B_ROW_STEP (CONV_THREADS / CONV_TILE_N)
#else
#define CONV_B_COLS (CONV_TILE_N / CONV_THREADS)
#define CONV_B_ROW_STEP 1
#endif
#define CONV_B_ROWS (CONV_TILE_K / CONV_B_ROW_STEP)

#if CONV_TILE_M % CONV_WPT_M != 0 || CONV_TILE_N % CONV_WPT_N != 0
#error "CONV_TILE_M and CONV_TILE_N must be multiples of CONV_WPT_M and CONV_WPT_N"
#endif
#if CONV_THREADS % CONV_TILE_N != 0 && CONV_TILE_N % CONV_THREADS != 0
#error "the work-group size and CONV_TILE_N must divide one another"
#endif
#if CONV_TILE_K % CONV_B_ROW_STEP != 0 || (CONV_TILE_K * CONV_TILE_M) % CONV_THREADS != 0
#error "CONV_TILE_K must be a multiple of work-group / CONV_TILE_N, CONV_TILE_K * CONV_TILE_M of the work-group"
#endif

// A step's values from registers into local tiles: a_reg[l] is weight value
// tid + l * CONV_THREADS of the step's [CONV_TILE_K][CONV_TILE_M] tile, b_reg[l][j]
// the input value at row tid / CONV_TILE_N + l * CONV_B_ROW_STEP, column
// tid % CONV_TILE_N + j * CONV_THREADS.
inline void stowage_conv_store(__local float (*a_tile)[CONV_TILE_M], __local float (*b_tile)[CONV_TILE_N],
                               const float* a_reg, float (*b_reg)[CONV_B_COLS], int tid) {
#pragma unroll
  for (int l = 0; l < CONV_A_LOADS; ++l) {
    const int e = tid + l * CONV_THREADS;
    a_tile[e / CONV_TILE_M][e % CONV_TILE_M] = a_reg[l];
  }
  const int b_col = tid % CONV_TILE_N, b_row = tid / CONV_TILE_N;
#pragma unroll
  for (int l = 0; l < CONV_B_ROWS; ++l)
#pragma unroll
    for (int j = 0; j < CONV_B_COLS; ++j) b_tile[b_row + l * CONV_B_ROW_STEP][b_col + j * CONV_THREADS] = b_reg[l][j];
}

__kernel __attribute__((reqd_work_group_size(CONV_THREADS_N, CONV_THREADS_M, 1))) void stowage_conv2d(
    __global const float* x, __global const float* w, __global const float* bias, __global const float* res,
    __global float* y, int N, int C, int H, int W, int K, int P, int Q, int R, int S, int stride_h, int stride_w,
    int pad_top, int pad_left, int dil_h, int dil_w, int groups, int k_split, int flags, int act, float act_a,
    float act_b CONV_IN_PARAMS) {
  __local float a_tile[1 + CONV_AHEAD][CONV_TILE_K][CONV_TILE_M];
  __local float b_tile[1 + CONV_AHEAD][CONV_TILE_K][CONV_TILE_N];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int tid = ty * CONV_THREADS_N + tx;
  const int z = get_group_id(2), g = z / k_split, split = z - g * k_split;
  const int Cg = C / groups, Kg = K / groups;
  const int RS = R * S, Kred = Cg * RS;
  const int PQ = P * Q, NPQ = N * PQ, HW = H * W, CHW = C * HW;
  const int m0 = get_group_id(1) * CONV_TILE_M, n0 = get_group_id(0) * CONV_TILE_N;
  const __global float* wg = w + g * Kred * Kg;
  const __global float* xg = x + g * Cg * HW;
  // This split's part of the reduction: whole steps of CONV_TILE_K.
  const int split_steps = ((Kred + CONV_TILE_K - 1) / CONV_TILE_K + k_split - 1) / k_split;
  const int k_begin = split * split_steps * CONV_TILE_K, k_end = min(Kred, k_begin + split_steps * CONV_TILE_K);

  // The pixels this work-item loads: image offset and the top-left input position.
  const int b_col = tid % CONV_TILE_N, b_row = tid / CONV_TILE_N;
  int b_base[CONV_B_COLS], b_ih[CONV_B_COLS], b_iw[CONV_B_COLS];
#if STOWAGE_IN_AFFINE
  int b_scale[CONV_B_COLS];  // where the pixel's image's scales start (channel 0 of group g)
#endif
#pragma unroll
  for (int j = 0; j < CONV_B_COLS; ++j) {
    const int n = n0 + b_col + j * CONV_THREADS;
    const int img = n / PQ, pq = n - img * PQ, p = pq / Q, q = pq - p * Q;
    const bool inside = n < NPQ;
    b_base[j] = inside ? img * CHW : 0;
#if STOWAGE_IN_AFFINE
    b_scale[j] = (inside ? img * in_batch : 0) + g * Cg;
#endif
    b_ih[j] = inside ? p * stride_h - pad_top : -(1 << 30);  // outside: every row test fails
    b_iw[j] = q * stride_w - pad_left;
  }
  // (channel, kernel row, kernel column) of this work-item's next row of the input tile.
  int kc, kr, ks;
  {
    const int k = k_begin + b_row, rs = k % RS;
    kc = k / RS;
    kr = rs / S;
    ks = rs - kr * S;
  }

  float acc[CONV_WPT_M][CONV_WPT_N];
#pragma unroll
  for (int i = 0; i < CONV_WPT_M; ++i)
#pragma unroll
    for (int j = 0; j < CONV_WPT_N; ++j) acc[i][j] = 0.0f;

  // Each step's values go through registers into local memory. With CONV_AHEAD 1,
  // iteration i loads step i and multiplies step i - 1 from the other of two local
  // buffers, so the loads are on their way during the products, one barrier a step
  // (the buffer a step stores into was last read two steps before, behind the
  // barrier of the step between). With CONV_AHEAD 0 each iteration loads, stores
  // and multiplies its own step between two barriers: nothing lives across a
  // barrier but the sums, which CPU devices that run work-items in loops want.
  float a_reg[CONV_A_LOADS], b_reg[CONV_B_ROWS][CONV_B_COLS];
  int buf = 0;
  for (int k_load = k_begin; k_load < k_end + CONV_AHEAD * CONV_TILE_K; k_load += CONV_TILE_K) {
#if CONV_AHEAD
    const bool multiply = k_load > k_begin;  // step k_load - CONV_TILE_K (uniform over the work-group)
    if (multiply) {
      stowage_conv_store(a_tile[buf], b_tile[buf], a_reg, b_reg, tid);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    if (!CONV_AHEAD || k_load < k_end) {
#pragma unroll
      for (int l = 0; l < CONV_A_LOADS; ++l) {
        const int e = tid + l * CONV_THREADS;
        const int kk = e / CONV_TILE_M, mm = e % CONV_TILE_M;
        const int k = k_load + kk, m = m0 + mm;
        a_reg[l] = (k < k_end && m < Kg) ? wg[k * Kg + m] : 0.0f;
      }
#pragma unroll
      for (int l = 0; l < CONV_B_ROWS; ++l) {
        const int kk = b_row + l * CONV_B_ROW_STEP;
        const bool k_inside = k_load + kk < k_end;
        const int dy = kr * dil_h, dx = ks * dil_w, c_off = kc * HW;
#pragma unroll
        for (int j = 0; j < CONV_B_COLS; ++j) {
          const int ih = b_ih[j] + dy, iw = b_iw[j] + dx;
          const bool inside = k_inside && ih >= 0 && ih < H && iw >= 0 && iw < W;
          b_reg[l][j] = inside ? CONV_IN(xg[b_base[j] + c_off + ih * W + iw], j, kc) : 0.0f;
        }
        ks += CONV_B_ROW_STEP;
        while (ks >= S) {
          ks -= S;
          if (++kr == R) {
            kr = 0;
            ++kc;
          }
        }
      }
    }
#if CONV_AHEAD
    if (!multiply) continue;
#else
    stowage_conv_store(a_tile[buf], b_tile[buf], a_reg, b_reg, tid);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
#pragma unroll
    for (int kk = 0; kk < CONV_TILE_K; ++kk) {
      float a[CONV_WPT_M], b[CONV_WPT_N];
#pragma unroll
      for (int i = 0; i < CONV_WPT_M; ++i) a[i] = a_tile[buf][kk][ty + i * CONV_THREADS_M];
#pragma unroll
      for (int j = 0; j < CONV_WPT_N; ++j) b[j] = b_tile[buf][kk][tx + j * CONV_THREADS_N];
#pragma unroll
      for (int i = 0; i < CONV_WPT_M; ++i)
#pragma unroll
        for (int j = 0; j < CONV_WPT_N; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
#if CONV_AHEAD
    buf ^= 1;
#else
    barrier(CLK_LOCAL_MEM_FENCE);  // the tiles are stored over next
#endif
  }

  if (k_split > 1) {  // partial sums: y is the [k_split, K, N * P * Q] workspace
#pragma unroll
    for (int i = 0; i < CONV_WPT_M; ++i) {
      const int m = m0 + ty + i * CONV_THREADS_M;
      if (m >= Kg) continue;
      __global float* row = y + (split * K + g * Kg + m) * NPQ;
#pragma unroll
      for (int j = 0; j < CONV_WPT_N; ++j) {
        const int n = n0 + tx + j * CONV_THREADS_N;
        if (n < NPQ) row[n] = acc[i][j];
      }
    }
    return;
  }
  int out_base[CONV_WPT_N];
#pragma unroll
  for (int j = 0; j < CONV_WPT_N; ++j) {
    const int n = n0 + tx + j * CONV_THREADS_N;
    const int img = n / PQ;
    out_base[j] = n < NPQ ? img * K * PQ + (n - img * PQ) : -1;
  }
#pragma unroll
  for (int i = 0; i < CONV_WPT_M; ++i) {
    const int m = m0 + ty + i * CONV_THREADS_M;
    if (m >= Kg) continue;
    const int k = g * Kg + m;
    const float bv = (flags & STOWAGE_EPI_BIAS) ? bias[k] : 0.0f;
#pragma unroll
    for (int j = 0; j < CONV_WPT_N; ++j) {
      if (out_base[j] < 0) continue;
      const int idx = out_base[j] + k * PQ;
      float v = acc[i][j] + bv;
      if (flags & STOWAGE_EPI_RESIDUAL) v += res[idx];
      y[idx] = stowage_activate(v, act, act_a, act_b);
    }
  }
}

// One kernel row of a depthwise window at unit stride: acc[i] += w[s] * v[i + s] over
// its S taps (S <= DW_ROW_TAPS), v the row's DW_PX + S - 1 inputs; unrolled, so that
// v and acc stay in registers. Both depthwise kernels take their rows through it.
inline void stowage_dw_row_taps(float* acc, const float* v, const __global float* w, int S) {
#pragma unroll
  for (int s = 0; s < DW_ROW_TAPS; ++s) {
    if (s >= S) break;
    const float wv = w[s];
#pragma unroll
    for (int i = 0; i < DW_PX; ++i) acc[i] = fma(wv, v[i + s], acc[i]);
  }
}

__kernel void stowage_conv2d_depthwise(__global const float* x, __global const float* w, __global const float* bias,
                                       __global const float* res, __global float* y, int N, int C, int H, int W, int K,
                                       int P, int Q, int R, int S, int stride_h, int stride_w, int pad_top,
                                       int pad_left, int dil_h, int dil_w, int flags, int act, float act_a,
                                       float act_b DW_SUMS_PARAMS) {
  const int q0 = get_global_id(0) * DW_PX, p = get_global_id(1), nk = get_global_id(2);
#if DW_SUMS
  __local float partial[DW_MAX_GROUP];
  const int t = get_local_id(1) * get_local_size(0) + get_local_id(0), items = get_local_size(0) * get_local_size(1);
  float sum = 0.0f;
  if (q0 < Q && p < P) {
#else
  if (q0 >= Q || p >= P) return;
#endif
  const int img = nk / K, k = nk - img * K, c = k / (K / C);
  const __global float* xc = x + (img * C + c) * H * W;
  const __global float* wk = w + k * R * S;
  float acc[DW_PX];
#pragma unroll
  for (int i = 0; i < DW_PX; ++i) acc[i] = 0.0f;
  const int iw0 = q0 * stride_w - pad_left;
  // Rows of at most DW_ROW_TAPS taps at unit stride and dilation (3x3, 5x5 and 7x7
  // depthwise layers of stride 1): the DW_PX + S - 1 inputs of a row read once into
  // registers (the loops unrolled, so every index is a constant), not S DW_PX times.
  const bool row_in_registers = stride_w == 1 && dil_w == 1 && S <= DW_ROW_TAPS;
#if DW_R
#pragma unroll
  for (int r = 0; r < DW_R; ++r) {
#else
  for (int r = 0; r < R; ++r) {
#endif
    const int ih = p * stride_h - pad_top + r * dil_h;
    const bool row_inside = ih >= 0 && ih < H;
    if (!row_inside && !(DW_R && row_in_registers)) continue;
    const __global float* row = xc + (row_inside ? ih : 0) * W;
    if (row_in_registers) {
      float v[DW_PX + DW_ROW_TAPS - 1];
#pragma unroll
      for (int j = 0; j < DW_PX + DW_ROW_TAPS - 1; ++j) {
        const int iw = iw0 + j;
        v[j] = (row_inside && j < DW_PX + S - 1 && iw >= 0 && iw < W) ? row[iw] : 0.0f;
      }
      stowage_dw_row_taps(acc, v, wk + r * S, S);
      continue;
    }
    for (int s = 0; s < S; ++s) {
      const float wv = wk[r * S + s];
#pragma unroll
      for (int i = 0; i < DW_PX; ++i) {
        const int iw = iw0 + i * stride_w + s * dil_w;
        if (iw >= 0 && iw < W) acc[i] = fma(wv, row[iw], acc[i]);
      }
    }
  }
  const __global float* biases = (flags & STOWAGE_EPI_BIAS_AFTER_WEIGHTS) ? w + K * R * S : bias;
  const float bv = (flags & STOWAGE_EPI_BIAS) ? biases[k] : 0.0f;
  const int base = (img * K + k) * P * Q + p * Q;
#pragma unroll
  for (int i = 0; i < DW_PX; ++i) {
    if (q0 + i >= Q) break;
    float v = acc[i] + bv;
    if (flags & STOWAGE_EPI_RESIDUAL) v += res[base + q0 + i];
    v = stowage_activate(v, act, act_a, act_b);
    y[base + q0 + i] = v;
#if DW_SUMS
    sum += v;
#endif
  }
#if DW_SUMS
  }
  const int groups = get_num_groups(0) * get_num_groups(1);
  __global float* at = sums + nk * groups + get_group_id(1) * get_num_groups(0) + get_group_id(0);
  if (items > DW_MAX_GROUP) {  // a launch this kernel was not written for: NaN shows it
    if (t == 0) *at = NAN;
    return;
  }
  partial[t] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t == 0) {
    float total = 0.0f;
    for (int i = 0; i < items; ++i) total += partial[i];
    *at = total;
  }
#endif
}

// The most inputs a work-group adds up: (ly + R - 1)(lx DW_PX + S - 1) is at most
// 1834 for the host's work-groups of up to 64 work-items, R, S <= 7 and DW_PX 4; a
// tuning's wider DW_PX may need more, and then the host sums the parts apart.
#define DW_SPLIT_TILE 2048
#ifndef DW_SPLIT_RUN
#define DW_SPLIT_RUN 8
#endif
__kernel void stowage_conv2d_depthwise_split(__global const float* x, __global const float* w,
                                             __global const float* bias, __global float* y, int N, int C, int H,
                                             int W, int K, int R, int S, int pad_top, int pad_left, int flags,
                                             int act, float act_a, float act_b, int in_parts, int in_flags,
                                             __global const float* in_bias, __global const float* in_res,
                                             __global float* x_sum) {
  __local float tile[DW_SPLIT_TILE];
  const int lx = get_local_size(0), ly = get_local_size(1);
  const int lid = get_local_id(1) * lx + get_local_id(0);
  const int nk = get_global_id(2), img = nk / K, k = nk - img * K, c = k / (K / C);
  const int q_first = get_group_id(0) * lx * DW_PX, p_first = get_group_id(1) * ly;
  const int tw = lx * DW_PX + S - 1, th = ly + R - 1;
  const int plane = N * C * H * W, base = (img * C + c) * H * W;
  const float in_bias_c = (in_flags & STOWAGE_EPI_BIAS) ? in_bias[c] : 0.0f;
  const bool writes_sums = k == c * (K / C);
  // The tile in runs of DW_SPLIT_RUN values of a row, a run a work-item: each part's
  // loads of a run are issued together (the loops unrolled), not one value at a time.
  const int runs = (tw + DW_SPLIT_RUN - 1) / DW_SPLIT_RUN;
  if (tw * th <= DW_SPLIT_TILE) {  // else a launch this kernel was not written for: nothing written
    for (int t = lid; t < runs * th; t += lx * ly) {
      const int tr = t / runs, tc0 = (t - tr * runs) * DW_SPLIT_RUN;
      const int ih = p_first - pad_top + tr, iw0 = q_first - pad_left + tc0;
      const bool row_inside = ih >= 0 && ih < H;
      const int at = base + (row_inside ? ih : 0) * W + iw0;
      float v[DW_SPLIT_RUN];
#pragma unroll
      for (int j = 0; j < DW_SPLIT_RUN; ++j) v[j] = 0.0f;
      for (int part = 0; part < in_parts; ++part) {
#pragma unroll
        for (int j = 0; j < DW_SPLIT_RUN; ++j)
          if (row_inside && iw0 + j >= 0 && iw0 + j < W) v[j] += x[part * plane + at + j];
      }
#pragma unroll
      for (int j = 0; j < DW_SPLIT_RUN; ++j) {
        const int tc = tc0 + j;
        if (tc >= tw) break;
        if (row_inside && iw0 + j >= 0 && iw0 + j < W) {
          if (in_flags & STOWAGE_EPI_BIAS) v[j] += in_bias_c;
          if (in_flags & STOWAGE_EPI_RESIDUAL) v[j] += in_res[at + j];
          if (writes_sums && tr >= pad_top && tr < pad_top + ly && tc >= pad_left && tc < pad_left + lx * DW_PX)
            x_sum[at + j] = v[j];
        } else {
          v[j] = 0.0f;
        }
        tile[tr * tw + tc] = v[j];
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int q0 = get_global_id(0) * DW_PX, p = get_global_id(1);
  if (q0 >= W || p >= H || tw * th > DW_SPLIT_TILE) return;
  const __global float* wk = w + k * R * S;
  float acc[DW_PX];
#pragma unroll
  for (int i = 0; i < DW_PX; ++i) acc[i] = 0.0f;
  // Each row's DW_PX + S - 1 values in registers (S <= DW_ROW_TAPS, the host checks).
  const __local float* row0 = tile + get_local_id(1) * tw + get_local_id(0) * DW_PX;
  for (int r = 0; r < R; ++r) {
    const __local float* row = row0 + r * tw;
    float v[DW_PX + DW_ROW_TAPS - 1];
#pragma unroll
    for (int j = 0; j < DW_PX + DW_ROW_TAPS - 1; ++j) v[j] = j < DW_PX + S - 1 ? row[j] : 0.0f;
    stowage_dw_row_taps(acc, v, wk + r * S, S);
  }
  const __global float* biases = (flags & STOWAGE_EPI_BIAS_AFTER_WEIGHTS) ? w + K * R * S : bias;
  const float bv = (flags & STOWAGE_EPI_BIAS) ? biases[k] : 0.0f;
  const int out = (img * K + k) * H * W + p * W;
#pragma unroll
  for (int i = 0; i < DW_PX; ++i) {
    if (q0 + i >= W) break;
    y[out + q0 + i] = stowage_activate(acc[i] + bv, act, act_a, act_b);
  }
}

__kernel void stowage_conv2d_split_sum(__global const float* partial, __global const float* bias,
                                       __global const float* res, __global float* y, int k_split, int K, int NPQ,
                                       int PQ, int flags, int act, float act_a, float act_b) {
  const int n = get_global_id(0), k = get_global_id(1);
  if (n >= NPQ || k >= K) return;
  float v = 0.0f;
  for (int s = 0; s < k_split; ++s) v += partial[(s * K + k) * NPQ + n];
  const int img = n / PQ, idx = (img * K + k) * PQ + (n - img * PQ);
  if (flags & STOWAGE_EPI_BIAS) v += bias[k];
  if (flags & STOWAGE_EPI_RESIDUAL) v += res[idx];
  y[idx] = stowage_activate(v, act, act_a, act_b);
}
