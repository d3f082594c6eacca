// The middle of ONNX's Attention on float32 buffers (docs/operators.md): from the
// scores QK^T to the probabilities that multiply V; the two products run as GEMMs.
//
// stowage_attention_probs: for each row (b, h, i) of qk [B, H, S, L], with
//   s = qk * scale, softcapped to softcap tanh(s / softcap) when softcap > 0, and
//   the bias of key j: the mask's (float: added; bool (STOWAGE_T 3): 0 where true,
//   -inf where false; -inf past the mask's last extent mask_len), -inf where is_causal
//   forbids it (j > i + offset) or outside the window [i + offset - left,
//   i + offset + right] (a bound < 0: none), probs = softmax over j of s + bias; a
//   row whose bias is -inf everywhere gets zeros. The mask (mask & 1 in flags) is
//   read at b * mask_b + h * mask_h + i * mask_s + j (strides 0: broadcast). With
//   flags & 8, keys j >= kv_lengths[b] (int64, ONNX's nonpad_kv_seqlen) are masked and
//   the causal frontier and window sit at kv_lengths[b] - S instead of offset.
//   With flags & 4, qk_out takes the scores at qk_mode: 0 and 1 s (softcapped), 2
//   s + bias, 3 the probabilities. One work-item per row (for short rows).
//   Launch: grid = [B H S rounded up to local0].
// stowage_attention_probs_wide: the same with one work-group of ATTN_LOCAL
//   work-items per row (for long rows: neighbouring work-items read neighbouring
//   scores), the row's maximum and sum combined in a fixed tree order.
//   Launch: local = [ATTN_LOCAL], grid = [ATTN_LOCAL B H S] (rows along dimension 0,
//   whose extent GPUs bound least).
#include <stowage/dtype.cl.h>

#ifndef ATTN_LOCAL
#define ATTN_LOCAL 64
#endif
#if ATTN_LOCAL & (ATTN_LOCAL - 1)
#error "ATTN_LOCAL must be a power of two"
#endif

#define ATTN_MASK 1
#define ATTN_CAUSAL 2
#define ATTN_QK_OUT 4
#define ATTN_KV_LENGTHS 8

// What query row (b, h, i) needs to bias its keys: where it reads the mask, how many
// keys it sees (those past kv_lengths[b] are padding) and where its causal frontier
// and window sit.
typedef struct {
  long mask_row;
  int valid, pos;
} stowage_attention_row_t;

inline stowage_attention_row_t stowage_attention_row(__global const long* kv_lengths, int b, int h, int i, int S,
                                                     int L, int mask_b, int mask_h, int mask_s, int offset,
                                                     int flags) {
  stowage_attention_row_t r;
  r.mask_row = (long)b * mask_b + (long)h * mask_h + (long)i * mask_s;
  r.valid = (flags & ATTN_KV_LENGTHS) ? (int)kv_lengths[b] : L;
  r.pos = i + ((flags & ATTN_KV_LENGTHS) ? r.valid - S : offset);
  return r;
}

inline float stowage_attention_bias(__global const stowage_t* mask, stowage_attention_row_t r, int j, int mask_len,
                                    int left, int right, int flags) {
  float bias = 0.0f;
  if (j >= r.valid) return -INFINITY;
  if (flags & ATTN_MASK) {
    if (j >= mask_len) return -INFINITY;
#if STOWAGE_T == STOWAGE_DT_BOOL
    if (!mask[r.mask_row + j]) return -INFINITY;
#else
    bias = (float)mask[r.mask_row + j];
#endif
  }
  if ((flags & ATTN_CAUSAL) && j > r.pos) return -INFINITY;
  if (left >= 0 && r.pos - j > left) return -INFINITY;
  if (right >= 0 && j - r.pos > right) return -INFINITY;
  return bias;
}

// A raw score q . k scaled, then softcapped when softcap > 0.
inline float stowage_attention_scaled(float s, float scale, float softcap) {
  s *= scale;
  return softcap > 0.0f ? softcap * tanh(s / softcap) : s;
}

// The three passes over a probs row's keys first, first + step, ... < L (one
// work-item's share of the row). Scores: probs = s + bias (qk_out takes s or s + bias
// at qk_mode 0 to 2); *top and *top_bias rise to the largest value and bias seen.
inline void stowage_attention_scores(__global const float* qk, __global const stowage_t* mask, __global float* probs,
                                     __global float* qk_out, long base, int first, int step, int L,
                                     stowage_attention_row_t r, int mask_len, int left, int right, float scale,
                                     float softcap, int qk_mode, int flags, float* top, float* top_bias) {
  for (int j = first; j < L; j += step) {
    const float s = stowage_attention_scaled(qk[base + j], scale, softcap);
    const float bias = stowage_attention_bias(mask, r, j, mask_len, left, right, flags);
    const float v = s + bias;
    if ((flags & ATTN_QK_OUT) && qk_mode < 2) qk_out[base + j] = s;
    if ((flags & ATTN_QK_OUT) && qk_mode == 2) qk_out[base + j] = v;
    probs[base + j] = v;
    *top = fmax(*top, v);
    *top_bias = fmax(*top_bias, bias);
  }
}

// Exponentials: probs = exp(v - shift), 0 in a row masked everywhere; returns their sum
// in key order. Each work-item rereads only what it wrote.
inline float stowage_attention_exps(__global float* probs, long base, int first, int step, int L, int masked,
                                    float shift) {
  float sum = 0.0f;
  for (int j = first; j < L; j += step) {
    const float e = masked ? 0.0f : exp(probs[base + j] - shift);
    probs[base + j] = e;
    sum += e;
  }
  return sum;
}

// Normalization: probs *= inv (qk_out takes them at qk_mode 3).
inline void stowage_attention_normalize(__global float* probs, __global float* qk_out, long base, int first, int step,
                                        int L, float inv, int qk_mode, int flags) {
  for (int j = first; j < L; j += step) {
    const float p = probs[base + j] * inv;
    probs[base + j] = p;
    if ((flags & ATTN_QK_OUT) && qk_mode == 3) qk_out[base + j] = p;
  }
}

__kernel void stowage_attention_probs(__global const float* qk, __global const stowage_t* mask,
                                      __global const long* kv_lengths, __global float* probs,
                                      __global float* qk_out, int B, int H, int S, int L, int mask_b, int mask_h,
                                      int mask_s, int mask_len, int offset, int left, int right, float scale,
                                      float softcap, int qk_mode, int flags) {
  const int row = get_global_id(0);
  if (row >= B * H * S) return;
  const int i = row % S, h = (row / S) % H, b = row / (S * H);
  const long base = (long)row * L;
  const stowage_attention_row_t r =
      stowage_attention_row(kv_lengths, b, h, i, S, L, mask_b, mask_h, mask_s, offset, flags);
  float top = -INFINITY, top_bias = -INFINITY;
  stowage_attention_scores(qk, mask, probs, qk_out, base, 0, 1, L, r, mask_len, left, right, scale, softcap, qk_mode,
                           flags, &top, &top_bias);
  const int masked = top_bias == -INFINITY;
  const float shift = top == -INFINITY ? 0.0f : top;
  const float sum = stowage_attention_exps(probs, base, 0, 1, L, masked, shift);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  stowage_attention_normalize(probs, qk_out, base, 0, 1, L, inv, qk_mode, flags);
}

/* Combines partial[0 .. ATTN_LOCAL) into partial[0] (maximum or sum) in a fixed
 * order and returns it; every work-item of the work-group calls it. */
inline float stowage_attention_combine(__local float* partial, int t, int take_max) {
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = ATTN_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step) partial[t] = take_max ? fmax(partial[t], partial[t + step]) : partial[t] + partial[t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float result = partial[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // partial is reused next
  return result;
}

__kernel __attribute__((reqd_work_group_size(ATTN_LOCAL, 1, 1))) void stowage_attention_probs_wide(
    __global const float* qk, __global const stowage_t* mask, __global const long* kv_lengths, __global float* probs,
    __global float* qk_out, int B,
    int H, int S, int L, int mask_b, int mask_h, int mask_s, int mask_len, int offset, int left, int right,
    float scale, float softcap, int qk_mode, int flags) {
  __local float partial[ATTN_LOCAL];
  const int t = get_local_id(0), row = get_group_id(0);
  const int i = row % S, h = (row / S) % H, b = row / (S * H);
  const long base = (long)row * L;
  const stowage_attention_row_t r =
      stowage_attention_row(kv_lengths, b, h, i, S, L, mask_b, mask_h, mask_s, offset, flags);
  float top = -INFINITY, top_bias = -INFINITY;
  stowage_attention_scores(qk, mask, probs, qk_out, base, t, ATTN_LOCAL, L, r, mask_len, left, right, scale, softcap,
                           qk_mode, flags, &top, &top_bias);
  partial[t] = top;
  top = stowage_attention_combine(partial, t, 1);
  partial[t] = top_bias;
  const int masked = stowage_attention_combine(partial, t, 1) == -INFINITY;
  const float shift = top == -INFINITY ? 0.0f : top;
  partial[t] = stowage_attention_exps(probs, base, t, ATTN_LOCAL, L, masked, shift);
  const float sum = stowage_attention_combine(partial, t, 0);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  stowage_attention_normalize(probs, qk_out, base, t, ATTN_LOCAL, L, inv, qk_mode, flags);
}

// stowage_attention_fused: the whole of Attention for one query row (b, h, i) per
//   work-group of ATTN_LOCAL work-items, without the scores in memory (for long
//   sequences, whose [B, H, S, L] scores would not fit): keys are taken ATTN_LOCAL at
//   a time (work-item t scores key j0 + t against the row of q, kept in local
//   memory; the block's keys pass through local memory ATTN_KD dimensions at a
//   time, so neighbouring work-items load neighbouring elements), the softmax runs
//   online (the running maximum rescales the running sum and the output), and
//   work-item t accumulates output elements t, t + ATTN_LOCAL,
//   ... (at most ATTN_DV_ITEMS of them). q [B, H, S, D]; k [B, H / group, L, D];
//   v [B, H / group, L, Dv]; y [B, H, S, Dv]; mask, flags (no qk output), scale,
//   softcap, offset and window as stowage_attention_probs. A row whose bias is -inf
//   everywhere gets zeros.
//   Launch: local = [ATTN_LOCAL], grid = [ATTN_LOCAL B H S]; D <= ATTN_MAX_D,
//   Dv <= ATTN_LOCAL ATTN_DV_ITEMS.
#ifndef ATTN_MAX_D
#define ATTN_MAX_D 256
#endif
#ifndef ATTN_DV_ITEMS
#define ATTN_DV_ITEMS 4
#endif
#ifndef ATTN_KD
#define ATTN_KD 16  // dimensions of K staged in local memory at a time
#endif

__kernel __attribute__((reqd_work_group_size(ATTN_LOCAL, 1, 1))) void stowage_attention_fused(
    __global const float* q, __global const float* k, __global const float* v, __global const stowage_t* mask,
    __global const long* kv_lengths, __global float* y, int B, int H, int S, int L, int D, int Dv, int group,
    int mask_b, int mask_h, int mask_s, int mask_len, int offset, int left, int right, float scale, float softcap,
    int flags) {
  __local float qs[ATTN_MAX_D];
  __local float keys[ATTN_LOCAL][ATTN_KD + 1];  // + 1: a row's stride off the local memory banks
  __local float probs[ATTN_LOCAL];
  __local float partial[ATTN_LOCAL];
  const int t = get_local_id(0), row = get_group_id(0);
  const int i = row % S, h = (row / S) % H, b = row / (S * H);
  const long kv = (long)b * (H / group) + h / group;  // the kv head this q head reads
  const __global float* kr = k + kv * L * D;
  const __global float* vr = v + kv * L * Dv;
  const stowage_attention_row_t r =
      stowage_attention_row(kv_lengths, b, h, i, S, L, mask_b, mask_h, mask_s, offset, flags);
  for (int d = t; d < D; d += ATTN_LOCAL) qs[d] = q[(long)row * D + d];
  barrier(CLK_LOCAL_MEM_FENCE);
  float acc[ATTN_DV_ITEMS];
  for (int e = 0; e < ATTN_DV_ITEMS; ++e) acc[e] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f, top_bias = -INFINITY;
  for (int j0 = 0; j0 < L; j0 += ATTN_LOCAL) {
    const int j = j0 + t;
    float s = 0.0f;  // q . k_j, ATTN_KD dimensions of the block's keys at a time
    for (int dc = 0; dc < D; dc += ATTN_KD) {
      barrier(CLK_LOCAL_MEM_FENCE);  // the previous chunk is consumed
      for (int e = t; e < ATTN_LOCAL * ATTN_KD; e += ATTN_LOCAL) {
        const int key = e / ATTN_KD, dim = e % ATTN_KD;
        keys[key][dim] = (j0 + key < L && dc + dim < D) ? kr[(long)(j0 + key) * D + dc + dim] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      const int dims = min(ATTN_KD, D - dc);
      for (int dim = 0; dim < dims; ++dim) s += qs[dc + dim] * keys[t][dim];
    }
    float value = -INFINITY;
    if (j < L) {
      const float bias = stowage_attention_bias(mask, r, j, mask_len, left, right, flags);
      top_bias = fmax(top_bias, bias);
      value = stowage_attention_scaled(s, scale, softcap) + bias;
    }
    partial[t] = value;
    const float block_max = stowage_attention_combine(partial, t, 1);
    const float new_max = fmax(running_max, block_max);
    const float p = (new_max == -INFINITY || value == -INFINITY) ? 0.0f : exp(value - new_max);
    const float rescale = running_max == -INFINITY ? 0.0f : exp(running_max - new_max);
    probs[t] = p;
    partial[t] = p;
    running_sum = running_sum * rescale + stowage_attention_combine(partial, t, 0);  // its barriers publish probs
    running_max = new_max;
    const int count = min(ATTN_LOCAL, L - j0);
    for (int e = 0; e < ATTN_DV_ITEMS; ++e) {
      const int d = t + e * ATTN_LOCAL;
      if (d >= Dv) break;
      float sum = acc[e] * rescale;
      for (int jj = 0; jj < count; ++jj) sum += probs[jj] * vr[(long)(j0 + jj) * Dv + d];
      acc[e] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // probs is rewritten next
  }
  partial[t] = top_bias;
  const int masked = stowage_attention_combine(partial, t, 1) == -INFINITY;
  const float inv = (masked || running_sum <= 0.0f) ? 0.0f : 1.0f / running_sum;
  for (int e = 0; e < ATTN_DV_ITEMS; ++e) {
    const int d = t + e * ATTN_LOCAL;
    if (d < Dv) y[(long)row * Dv + d] = acc[e] * inv;
  }
}

// stowage_attention_tiled: the whole of Attention for ATTN_TILE_Q query rows of one
//   head per work-group (flash attention), for heads of at most ATTN_HEAD elements:
//   the rows' q stay in local memory; keys come ATTN_TILE_KEYS at a time, K's block
//   into local memory, then V's block into the same place. Work-item (tx, ty) scores
//   rows ty + ATTN_ROWS_Y r against keys tx + 16 c (r < ATTN_RPI, c < ATTN_KEYS_X: float4s
//   of local memory), the rows' maxima meet in local memory, the softmax runs online
//   (a rising maximum rescales the running sums and outputs), the probabilities pass
//   through local memory, and the work-item accumulates output elements 4 tx .. 4 tx + 3
//   of its rows. The row sums are added across the 16 work-items at the end, in a
//   fixed order. Operands are strided views, each element at
//   q[b q_b + h q_h + i q_s + d q_d], k[b k_b + (h / group) k_h + j k_l + d k_d],
//   v[b v_b + (h / group) v_h + j v_l + e v_d], y[b y_b + h y_h + i y_s + e y_d]
//   (y may be a transpose: attention's heads merged back into rows); a block is read
//   as float4s where its rows are contiguous and 16-byte aligned. Mask, flags (no qk
//   output), scale, softcap, offset and window as stowage_attention_probs; a row whose
//   bias is -inf everywhere gets zeros.
//   Launch: local = [16, ATTN_TILE_Q / ATTN_RPI], grid = [16, ATTN_TILE_Q / ATTN_RPI ceil(S / ATTN_TILE_Q),
//   B H]; D, Dv <= ATTN_HEAD.
#ifndef ATTN_TILE_Q
#define ATTN_TILE_Q 32
#endif
#ifndef ATTN_TILE_KEYS
#define ATTN_TILE_KEYS 64
#endif
#ifndef ATTN_RPI
#define ATTN_RPI 2  // query rows per work-item
#endif
#if ATTN_TILE_Q % ATTN_RPI || ATTN_TILE_Q < ATTN_RPI || (ATTN_TILE_KEYS != 32 && ATTN_TILE_KEYS != 64)
#error "ATTN_TILE_Q must be a positive multiple of ATTN_RPI, ATTN_TILE_KEYS 32 or 64"
#endif
#define ATTN_HEAD 64
#define ATTN_ROWS_Y (ATTN_TILE_Q / ATTN_RPI)  // work-items along the rows
#define ATTN_KEYS_X (ATTN_TILE_KEYS / 16)     // keys a work-item scores per row
#define ATTN_PITCH (ATTN_HEAD / 4 + 1)        // float4s per local row: + 1 keeps rows off one bank
#define ATTN_P_PITCH (ATTN_TILE_KEYS / 4 + 1)

#define ATTN_THREADS (16 * ATTN_ROWS_Y)
#define ATTN_FETCH ((ATTN_TILE_KEYS * ATTN_HEAD / 4 + ATTN_THREADS - 1) / ATTN_THREADS)  // float4s per work-item

// Loads a work-item's share of a [rows, ATTN_HEAD] block of a strided operand into
// registers (zeros past `valid` rows and `width` columns): float4 e = t + ATTN_THREADS n
// of the block, row e / (ATTN_HEAD / 4). Neighbouring work-items read neighbouring
// float4s, as float4s where the rows are contiguous and 16-byte aligned (`vec`). The
// loads are in flight while the work-group computes; stowage_attention_put stores them.
inline void stowage_attention_fetch(float4* regs, int rows, const __global float* src, int row_stride,
                                    int col_stride, int valid, int width, int t, int vec) {
  for (int n = 0; n < ATTN_FETCH; ++n) {
    const int e = t + ATTN_THREADS * n, row = e / (ATTN_HEAD / 4), col = 4 * (e % (ATTN_HEAD / 4));
    float4 value = (float4)(0.0f);
    if (row < rows && row < valid) {
      const __global float* at = src + (long)row * row_stride;
      if (vec) {
        if (col < width) value = vload4(0, at + col);
      } else {
        value.x = col < width ? at[(long)col * col_stride] : 0.0f;
        value.y = col + 1 < width ? at[(long)(col + 1) * col_stride] : 0.0f;
        value.z = col + 2 < width ? at[(long)(col + 2) * col_stride] : 0.0f;
        value.w = col + 3 < width ? at[(long)(col + 3) * col_stride] : 0.0f;
      }
    }
    regs[n] = value;
  }
}

inline void stowage_attention_put(__local float4 (*tile)[ATTN_PITCH], int rows, const float4* regs, int t) {
  for (int n = 0; n < ATTN_FETCH; ++n) {
    const int e = t + ATTN_THREADS * n, row = e / (ATTN_HEAD / 4);
    if (row < rows) tile[row][e % (ATTN_HEAD / 4)] = regs[n];
  }
}

// Whether a block's rows can be read as float4s: contiguous, 16-byte aligned.
inline int stowage_attention_vec(const __global float* base, int row_stride, int col_stride, int width) {
  return col_stride == 1 && row_stride % 4 == 0 && width % 4 == 0 && ((ulong)base & 15) == 0;
}

__kernel __attribute__((reqd_work_group_size(16, ATTN_ROWS_Y, 1))) void stowage_attention_tiled(
    __global const float* q, __global const float* k, __global const float* v, __global const stowage_t* mask,
    __global const long* kv_lengths, __global float* y, int H, int S, int L, int D, int Dv, int group, int q_b,
    int q_h, int q_s, int q_d, int k_b, int k_h, int k_l, int k_d, int v_b, int v_h, int v_l, int v_d, int y_b,
    int y_h, int y_s, int y_d, int mask_b, int mask_h, int mask_s, int mask_len, int offset, int left, int right,
    float scale, float softcap, int flags) {
  __local float4 q_tile[ATTN_TILE_Q][ATTN_PITCH];
  __local float4 kv_tile[ATTN_TILE_KEYS][ATTN_PITCH];  // the block's keys, then its values
  __local float4 p_tile[ATTN_TILE_Q][ATTN_P_PITCH];
  __local float partial[ATTN_TILE_Q][17];
  __local float* p_flat = (__local float*)p_tile;
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int t = ty * 16 + tx;
  const int i0 = get_group_id(1) * ATTN_TILE_Q, bh = get_group_id(2);
  const int b = bh / H, h = bh % H, kv_head = h / group;
  const __global float* kp = k + (long)b * k_b + (long)kv_head * k_h;
  const __global float* vp = v + (long)b * v_b + (long)kv_head * v_h;
  const __global float* qp = q + (long)b * q_b + (long)h * q_h + (long)i0 * q_s;
  const int k_vec = stowage_attention_vec(kp, k_l, k_d, D), v_vec = stowage_attention_vec(vp, v_l, v_d, Dv);
  float4 regs[ATTN_FETCH];  // the next block of K or V on its way to local memory
  for (int part = 0; part < ATTN_TILE_Q; part += ATTN_TILE_KEYS) {  // q's tile, a block of rows at a time
    stowage_attention_fetch(regs, ATTN_TILE_Q - part, qp + (long)part * q_s, q_s, q_d, S - i0 - part, D, t,
                            stowage_attention_vec(qp, q_s, q_d, D));
    stowage_attention_put(q_tile + part, ATTN_TILE_Q - part, regs, t);
  }
  stowage_attention_fetch(regs, ATTN_TILE_KEYS, kp, k_l, k_d, L, D, t, k_vec);
  stowage_attention_row_t rows[ATTN_RPI];
  float top[ATTN_RPI], sum[ATTN_RPI];
  float4 acc[ATTN_RPI];
  for (int r = 0; r < ATTN_RPI; ++r) {
    const int i = min(i0 + ty + ATTN_ROWS_Y * r, S - 1);
    rows[r] = stowage_attention_row(kv_lengths, b, h, i, S, L, mask_b, mask_h, mask_s, offset, flags);
    top[r] = -INFINITY;
    sum[r] = 0.0f;
    acc[r] = (float4)(0.0f);
  }
  for (int j0 = 0; j0 < L; j0 += ATTN_TILE_KEYS) {
    barrier(CLK_LOCAL_MEM_FENCE);  // the last block's values and probabilities are consumed
    stowage_attention_put(kv_tile, ATTN_TILE_KEYS, regs, t);
    stowage_attention_fetch(regs, ATTN_TILE_KEYS, vp + (long)j0 * v_l, v_l, v_d, L - j0, Dv, t, v_vec);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[ATTN_RPI][ATTN_KEYS_X];
    for (int r = 0; r < ATTN_RPI; ++r)
      for (int c = 0; c < ATTN_KEYS_X; ++c) s[r][c] = 0.0f;
    // The block's keys past L score nothing (-inf below) and weigh nothing: a short
    // last block (L = 197: 5 of 64 keys) skips their products, the same for the
    // whole work-group, and adds nothing it would not have added as zeros.
    const int keys_here = min(ATTN_TILE_KEYS, L - j0);
#pragma unroll 4
    for (int d4 = 0; d4 < ATTN_HEAD / 4; ++d4) {
      float4 qv[ATTN_RPI], kv[ATTN_KEYS_X];
      for (int r = 0; r < ATTN_RPI; ++r) qv[r] = q_tile[ty + ATTN_ROWS_Y * r][d4];
      for (int c = 0; c < ATTN_KEYS_X; ++c) kv[c] = kv_tile[tx + 16 * c][d4];
      for (int r = 0; r < ATTN_RPI; ++r)
        for (int c = 0; c < ATTN_KEYS_X; ++c)
          if (16 * c < keys_here)
            s[r][c] =
                fma(qv[r].w, kv[c].w, fma(qv[r].z, kv[c].z, fma(qv[r].y, kv[c].y, fma(qv[r].x, kv[c].x, s[r][c]))));
    }
    for (int r = 0; r < ATTN_RPI; ++r) {
      const int i = i0 + ty + ATTN_ROWS_Y * r;
      float block_top = -INFINITY;
      for (int c = 0; c < ATTN_KEYS_X; ++c) {
        const int j = j0 + tx + 16 * c;
        float value = -INFINITY;
        if (i < S && j < L)
          value = stowage_attention_scaled(s[r][c], scale, softcap) +
                  stowage_attention_bias(mask, rows[r], j, mask_len, left, right, flags);
        s[r][c] = value;
        block_top = fmax(block_top, value);
      }
      partial[ty + ATTN_ROWS_Y * r][tx] = block_top;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the maxima are in; K's block is consumed
    stowage_attention_put(kv_tile, ATTN_TILE_KEYS, regs, t);
    if (j0 + ATTN_TILE_KEYS < L)
      stowage_attention_fetch(regs, ATTN_TILE_KEYS, kp + (long)(j0 + ATTN_TILE_KEYS) * k_l, k_l, k_d,
                              L - j0 - ATTN_TILE_KEYS, D, t, k_vec);
    for (int r = 0; r < ATTN_RPI; ++r) {
      const int row = ty + ATTN_ROWS_Y * r;
      float new_top = top[r];
      for (int x = 0; x < 16; ++x) new_top = fmax(new_top, partial[row][x]);
      const float rescale = top[r] == -INFINITY ? 0.0f : exp(top[r] - new_top);
      top[r] = new_top;
      sum[r] *= rescale;
      acc[r] *= rescale;
      for (int c = 0; c < ATTN_KEYS_X; ++c) {
        const float p = s[r][c] == -INFINITY ? 0.0f : exp(s[r][c] - new_top);
        sum[r] += p;
        p_flat[row * ATTN_P_PITCH * 4 + tx + 16 * c] = p;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the values and probabilities are in
#pragma unroll 4
    for (int j4 = 0; j4 < (keys_here + 3) / 4; ++j4) {
      const float4 v0 = kv_tile[4 * j4][tx], v1 = kv_tile[4 * j4 + 1][tx];
      const float4 v2 = kv_tile[4 * j4 + 2][tx], v3 = kv_tile[4 * j4 + 3][tx];
      for (int r = 0; r < ATTN_RPI; ++r) {
        const float4 p = p_tile[ty + ATTN_ROWS_Y * r][j4];
        acc[r] = fma((float4)(p.w), v3, fma((float4)(p.z), v2, fma((float4)(p.y), v1, fma((float4)(p.x), v0, acc[r]))));
      }
    }
  }
  for (int r = 0; r < ATTN_RPI; ++r) partial[ty + ATTN_ROWS_Y * r][tx] = sum[r];  // read before the last barrier
  barrier(CLK_LOCAL_MEM_FENCE);
  __global float* yp = y + (long)b * y_b + (long)h * y_h;
  for (int r = 0; r < ATTN_RPI; ++r) {
    const int row = ty + ATTN_ROWS_Y * r, i = i0 + row;
    float total = 0.0f;
    for (int x = 0; x < 16; ++x) total += partial[row][x];
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const float out[4] = {acc[r].x * inv, acc[r].y * inv, acc[r].z * inv, acc[r].w * inv};
    for (int c = 0; c < 4; ++c)
      if (i < S && 4 * tx + c < Dv) yp[(long)i * y_s + (long)(4 * tx + c) * y_d] = out[c];
  }
}

// stowage_rotary_embedding: ONNX's RotaryEmbedding. x holds [B, S, H, D] elements
//   at b * sb + s * ss + h * sh + d (the layout of a 4-D [B, H, S, D] or a 3-D
//   [B, S, H D] input); y has x's layout. The first `rot` elements of each head are
//   rotated by the angle of cache row r: with position ids (has_ids), r = ids[b S + s]
//   (kept inside [0, rows): an id outside the cache reads its nearest row, never
//   outside), else r = b S + s. cos and sin are [rows, rot / 2]. interleaved pairs
//   elements (2i, 2i + 1), else (i, i + rot / 2). The rest is copied.
//   Launch: grid = [D rounded up to local0, S H rounded up to local1, B].
__kernel void stowage_rotary_embedding(__global const float* x, __global const float* cos_cache,
                                       __global const float* sin_cache, __global const long* ids, __global float* y,
                                       int S, int H, int D, int sb, int ss, int sh, int rot, int rows, int has_ids,
                                       int interleaved) {
  const int d = get_global_id(0), sh_index = get_global_id(1), b = get_global_id(2);
  if (d >= D || sh_index >= S * H) return;
  const int s = sh_index / H, h = sh_index - s * H;
  const long at = (long)b * sb + (long)s * ss + (long)h * sh;
  if (d >= rot) {
    y[at + d] = x[at + d];
    return;
  }
  const int pairs = rot / 2;
  long row = has_ids ? ids[b * S + s] : (long)b * S + s;
  row = clamp(row, 0L, (long)rows - 1);
  int i, first, second;
  if (interleaved) {
    i = d / 2;
    first = 2 * i;
    second = first + 1;
  } else {
    i = d < pairs ? d : d - pairs;
    first = i;
    second = i + pairs;
  }
  const float c = cos_cache[row * pairs + i], sn = sin_cache[row * pairs + i];
  const float x1 = x[at + first], x2 = x[at + second];
  y[at + d] = d == first ? c * x1 - sn * x2 : sn * x1 + c * x2;
}
