// Direct convolution on NCHW float32 buffers, blocked over pixels and output
// channels (docs/operators.md). It is the buffer twin of stowage_conv2d_image: for
// layers whose output is small (late layers at batch 1, pointwise layers of a few
// hundred pixels) the implicit GEMM of conv.cl makes too few tiles to fill a GPU,
// while this kernel gives every work-item a small register block and spreads the
// reduction over slices of a work-group.
//
// stowage_conv2d_direct: any stride, padding, dilation and group count.
//   Weights: float4s [groups][Kg4][Cg][R][S] (Kg4 = ceil(Kg / 4), Kg = K / groups,
//   Cg = C / groups): element (g, kb, ci, r, s) holds w[g Kg + 4 kb .. + 3][ci][r][s],
//   zeros past Kg, and after them, in the same buffer, the K biases (zero-padded to
//   whole float4s; read only under STOWAGE_EPI_BIAS): one pointer argument fewer a
//   launch (docs/vm_overhead.md). A work-item computes DCONV_PX neighbouring pixels
//   of one output row for DCONV_OB blocks of 4 output channels of one group, over the input
//   channels of its slice: the local[2] slices of a work-group take every
//   local[2]-th input channel and add their partial sums through local memory at
//   the end, in a fixed order.
//   Launch: local = [l0, l1, slices] with l0 l1 slices <= DCONV_MAX_GROUP (else the
//   kernel writes NaN); grid = [ceil(Q / DCONV_PX) rounded up to l0, N * P rounded
//   up to l1, groups * ceil(Kg4 / DCONV_OB) * slices].
//
// stowage_conv2d_dwpw_direct: the buffer twin of conv_texture.cl's
//   stowage_conv2d_dwpw_image: a depthwise convolution (multiplier 1; weights float4s
//   [C4][R][S] holding 4 channels each, bias bd float4s [C4], activation dw_act,
//   C4 = ceil(C / 4), zeros past C) feeding a pointwise one (1x1, stride 1, no
//   padding, one group; weights float4s [K4][4 C4] of 4 output channels each, zeros
//   past K and C) in one launch. Per step a work-item computes the depthwise values
//   of its DDWPW_PX pixels for a block of 4 input channels (4 planes) and multiplies
//   them into its DDWPW_OB blocks of 4 pointwise outputs; DDWPW_SHARE work-items of
//   a work-group that differ only in their output blocks share each step's values
//   through local memory. Its constants come as one buffer of float4s, params: the
//   depthwise weights, bd, the pointwise weights, then K4 float4s of biases (read
//   only under STOWAGE_EPI_BIAS), one after another: each pointer argument costs
//   NVIDIA's host about 1 us a launch (docs/vm_overhead.md).
//   Launch: local = [l0, l1, slices * DDWPW_SHARE], grid = [ceil(Q / DDWPW_PX)
//   rounded up to l0, N * P rounded up to l1, ceil(K4 / (DDWPW_OB * DDWPW_SHARE)) *
//   slices * DDWPW_SHARE]; C, H, W are the depthwise input's, P, Q the output's.
//   A unit built with DDWPW_SHUFFLE 1 takes five more arguments after act_b (y_channels,
//   y_cs, y_c0, pass, pass_c0) and writes output channel k as channel k y_cs + y_c0 of
//   a y of y_channels channels (no residual), and, where pass_c0 >= 0, channel k of
//   pass (of the output's shape) as channel k y_cs + pass_c0: a channel shuffle of the
//   Concat of its output with the other parts (ShuffleNet's units), written where the
//   kernel writes its own values, with no kernel of its own.
//
// Both end in the epilogue of <stowage/epilogue.cl.h>: + bias[k], + res (the
// output's shape), activation. res may be y itself (a residual updated in place):
// each output is read and written by the same work-item. Indices are int: every
// tensor has fewer than 2^31 elements (the Python layer checks).
//
// A unit built with STOWAGE_IN_AFFINE 1 gives stowage_conv2d_direct six more
// arguments after act_b (in_scale, in_shift, in_batch, in_act, in_act_a, in_act_b)
// and reads input channel c of image n as in_act(x * in_scale[n in_batch + c] +
// in_shift[c]), as conv.cl's stowage_conv2d does. The padding stays zero.
//
// A unit built with DCONV_SE 1 computes that scale itself, for a batch of one image:
// the squeeze-and-excitation whose channel sums its input came with (the depthwise
// convolution's DW_SUMS), as pooling.cl's stowage_excite_sums does, in every
// work-group, before its products, so that the scale needs no launch of its own
// (each costs the host 5-13 us on NVIDIA's OpenCL, docs/vm_overhead.md). Eleven
// more arguments after act_b: se_sums [C, se_parts], se_params (w1t [C, R], b1 [R],
// w2t [R, C], b2 [C] one after another), R, se_parts, se_inv_hw and the two
// activations (code, a, b each); input channel c is read as x * s[c]. The scale, the
// hidden values and the hidden values' parts live in `partial` until the products
// are done: C + R + local size floats of it (the Python layer checks).
#include <stowage/epilogue.cl.h>
#include <stowage/pooling.cl.h>
#include <stowage/slices.cl.h>

#if STOWAGE_IN_AFFINE
#define DCONV_IN_PARAMS                                                                                     \
  , __global const float* in_scale, __global const float* in_shift, int in_batch, int in_act, float in_act_a, \
      float in_act_b
// A value read from the input, through the map (in_s, in_t: its channel's scale and shift).
#define DCONV_IN(v) stowage_activate_code(fma((v), in_s, in_t), STOWAGE_IN_ACT_CODE(in_act), in_act_a, in_act_b)
#elif DCONV_SE
#define DCONV_IN_PARAMS                                                                                            \
  , __global const float *se_sums, __global const float *se_params, int se_r, int se_parts, float se_inv_hw,     \
      int se_act1, float se_act1_a, float se_act1_b, int se_act2, float se_act2_a, float se_act2_b
#define DCONV_IN(v) ((v) * in_s)
#else
#define DCONV_IN_PARAMS
#define DCONV_IN(v) (v)
#endif

#ifndef DCONV_PX
#define DCONV_PX 4
#endif
#ifndef DCONV_OB
#define DCONV_OB 2
#endif
#define DCONV_OUTPUTS (DCONV_OB * DCONV_PX)  // outputs of a work-item's register block
#ifndef DDWPW_OB
#define DDWPW_OB 2
#endif
#ifndef DDWPW_SHARE
#define DDWPW_SHARE 1
#endif
#ifndef DDWPW_PX
#define DDWPW_PX DCONV_PX
#endif
#ifndef DDWPW_SHUFFLE
#define DDWPW_SHUFFLE 0
#endif
#if DDWPW_SHUFFLE
#define DDWPW_SHUFFLE_PARAMS , int y_channels, int y_cs, int y_c0, __global const float *pass, int pass_c0
#else
#define DDWPW_SHUFFLE_PARAMS
#endif
#define DDWPW_OUTPUTS (DDWPW_OB * DDWPW_PX)
#ifndef DCONV_MAX_GROUP
#define DCONV_MAX_GROUP 128  // work-items per work-group (sizes the partial sums in local memory)
#endif

// The epilogue of one block of 4 output channels k0 .. k0 + 3 (those below k_end) at
// one pixel: y[at + k PQ] = activation(v + bias[k] + res[at + k PQ]), `at` the
// pixel's offset in channel 0 of its image.
inline void stowage_direct_store4(__global float* y, __global const float* bias, __global const float* res, float4 v,
                                  int k0, int k_end, int at, int PQ, int flags, int act, float act_a, float act_b) {
  const float lanes[4] = {v.x, v.y, v.z, v.w};
  for (int l = 0; l < 4 && k0 + l < k_end; ++l) {
    const int k = k0 + l, idx = at + k * PQ;
    float u = lanes[l];
    if (flags & STOWAGE_EPI_BIAS) u += bias[k];
    if (flags & STOWAGE_EPI_RESIDUAL) u += res[idx];
    y[idx] = stowage_activate(u, act, act_a, act_b);
  }
}

__kernel void stowage_conv2d_direct(__global const float* x, __global const float4* w, __global const float* res,
                                    __global float* y, int N, int C, int H, int W, int K, int P, int Q, int R, int S,
                                    int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
                                    int groups, int flags, int act, float act_a, float act_b DCONV_IN_PARAMS) {
  __local float4 partial[DCONV_MAX_GROUP * DCONV_OUTPUTS];
  const int items = get_local_size(0) * get_local_size(1), slices = get_local_size(2);
  const int t = get_local_id(1) * get_local_size(0) + get_local_id(0), slice = get_local_id(2);
  const int q0 = get_global_id(0) * DCONV_PX, np = get_global_id(1), blk = get_group_id(2);
  const bool active = q0 < Q && np < N * P;  // the others only join the barrier
  const int Cg = C / groups, Kg = K / groups, Kg4 = (Kg + 3) / 4;
  const int steps = (Kg4 + DCONV_OB - 1) / DCONV_OB;
  // The K biases follow the weights in the same buffer (above).
  const __global float* bias = (const __global float*)(w + groups * Kg4 * Cg * R * S);
  const int g = blk / steps, ob0 = (blk - g * steps) * DCONV_OB;
  const int img = np / P, p = np - img * P;
  const int RS = R * S, HW = H * W, PQ = P * Q;
#if DCONV_SE
  // The scale of every input channel: se_scale[0, C), the hidden values after it, the
  // hidden values' parts after them (partial is free until the products are done).
  // Before the check below, whose early return PoCL's CPU device did not take well
  // before this barrier (memory corrupted on a 7 x 7 layer with work-items past the
  // last row); a launch that check refuses stays inside partial.
  __local float* se_scale = (__local float*)partial;
  {
    const __global float *w1t = se_params, *b1 = w1t + C * se_r, *w2t = b1 + se_r, *b2 = w2t + se_r * C;
    __local float* hidden = se_scale + C;
    const int threads = min(items * slices, DCONV_MAX_GROUP), tid = (slice * items + t) % threads;
    stowage_excite_hidden(se_sums, se_parts, se_inv_hw, w1t, b1, C, se_r, se_act1, se_act1_a, se_act1_b, se_scale,
                          hidden, hidden + se_r, tid, threads);
    // The scales in place of the means, which are no longer read: four channels a
    // work-item at a time (c, c + threads, ...), so that four loads of w2t a hidden
    // value are in flight where a work-item has several channels.
    for (int c0 = tid; c0 < C; c0 += 4 * threads) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int r = 0; r < se_r; ++r) {
        const float h = hidden[r];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (c0 + j * threads < C) acc[j] = fma(w2t[r * C + c0 + j * threads], h, acc[j]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = c0 + j * threads;
        if (c < C) se_scale[c] = stowage_activate_code(b2[c] + acc[j], se_act2, se_act2_a, se_act2_b);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  if (items * slices > DCONV_MAX_GROUP) {  // a launch this kernel was not written for: NaN shows it
    if (active && slice == 0)
      for (int o = 0; o < DCONV_OB * 4 && ob0 * 4 + o < Kg; ++o)
        for (int i = 0; i < DCONV_PX && q0 + i < Q; ++i) y[((img * K + g * Kg + ob0 * 4 + o) * P + p) * Q + q0 + i] = NAN;
    return;
  }

  float4 acc[DCONV_OB][DCONV_PX];
#pragma unroll
  for (int o = 0; o < DCONV_OB; ++o)
#pragma unroll
    for (int i = 0; i < DCONV_PX; ++i) acc[o][i] = (float4)(0.0f);

  const __global float* xg = x + (img * C + g * Cg) * HW;
  const __global float4* wg = w + (g * Kg4 + ob0) * Cg * RS;
  const int iw0 = q0 * stride_w - pad_left;
  // Slice `slice` of the work-group takes the input channels slice, slice + slices, ...
  for (int ci = slice; active && ci < Cg; ci += slices) {
    const __global float* plane = xg + ci * HW;
#if STOWAGE_IN_AFFINE
    const float in_s = in_scale[img * in_batch + g * Cg + ci], in_t = in_shift[g * Cg + ci];
#elif DCONV_SE
    const float in_s = se_scale[g * Cg + ci];
#endif
    for (int r = 0; r < R; ++r) {
      const int ih = p * stride_h - pad_top + r * dil_h;
      if (ih < 0 || ih >= H) continue;
      const __global float* row = plane + ih * W;
      for (int s = 0; s < S; ++s) {
        float in[DCONV_PX];
#pragma unroll
        for (int i = 0; i < DCONV_PX; ++i) {
          const int iw = iw0 + i * stride_w + s * dil_w;
          in[i] = (iw >= 0 && iw < W) ? DCONV_IN(row[iw]) : 0.0f;
        }
        const int tap = (ci * R + r) * S + s;
#pragma unroll
        for (int o = 0; o < DCONV_OB; ++o) {
          if (ob0 + o >= Kg4) break;
          const float4 wv = wg[o * Cg * RS + tap];
#pragma unroll
          for (int i = 0; i < DCONV_PX; ++i) acc[o][i] = fma((float4)(in[i]), wv, acc[o][i]);
        }
      }
    }
  }

  // Several slices: each keeps its partial sums in local memory, then the slice
  // that finishes an output adds up every slice's value of it (<stowage/slices.cl.h>).
  // Unrolled, so that acc is indexed by constants and stays in registers.
  if (slices > 1) {
#if DCONV_SE
    barrier(CLK_LOCAL_MEM_FENCE);  // every slice is done with the scale in partial
#endif
#pragma unroll
    for (int o = 0; o < DCONV_OB; ++o)
#pragma unroll
      for (int i = 0; i < DCONV_PX; ++i)
        stowage_slices_put(partial, acc[o][i], o * DCONV_PX + i, DCONV_OUTPUTS, slice, items, t);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!active) return;
#pragma unroll
  for (int o = 0; o < DCONV_OB; ++o) {
#pragma unroll
    for (int i = 0; i < DCONV_PX; ++i) {
      const int j = o * DCONV_PX + i, q = q0 + i;
      if (!stowage_slice_finishes(j, slice, slices) || ob0 + o >= Kg4 || q >= Q) continue;
      const float4 v = stowage_slices_sum(partial, acc[o][i], j, DCONV_OUTPUTS, slices, items, t);
      stowage_direct_store4(y, bias, res, v, g * Kg + (ob0 + o) * 4, (g + 1) * Kg, img * K * PQ + p * Q + q, PQ,
                            flags, act, act_a, act_b);
    }
  }
}

__kernel void stowage_conv2d_dwpw_direct(__global const float* x, __global const float4* params,
                                         __global const float* res, __global float* y, int N, int C, int H, int W,
                                         int K, int P, int Q, int R, int S, int stride_h, int stride_w, int pad_top,
                                         int pad_left, int dil_h, int dil_w, int dw_act, float dw_act_a,
                                         float dw_act_b, int flags, int act, float act_a,
                                         float act_b DDWPW_SHUFFLE_PARAMS) {
  __local float4 partial[DCONV_MAX_GROUP * DDWPW_OUTPUTS];
#if DDWPW_SHARE > 1
  __local float4 shared_mid[DCONV_MAX_GROUP * DDWPW_PX];
#endif
  const int items = get_local_size(0) * get_local_size(1), slices = get_local_size(2) / DDWPW_SHARE;
  const int zl = get_local_id(2), slice = zl / DDWPW_SHARE, share = zl - slice * DDWPW_SHARE;
  const int t = get_local_id(1) * get_local_size(0) + get_local_id(0);
  const int q0 = get_global_id(0) * DDWPW_PX, np = get_global_id(1), blk = get_group_id(2);
  const bool active = q0 < Q && np < N * P;  // the others only join the barriers
  const int C4 = (C + 3) / 4, K4 = (K + 3) / 4;
  // The launch's constants, one after another (params, above).
  const __global float4 *wd = params, *bd = wd + C4 * R * S, *w = bd + C4;
  const __global float* bias = (const __global float*)(w + K4 * 4 * C4);
  const int ob0 = (blk * DDWPW_SHARE + share) * DDWPW_OB;
  const int img = np / P, p = np - img * P;
  const int HW = H * W, PQ = P * Q, RS = R * S;
  const bool unit_stride_3 = S == 3 && stride_w == 1 && dil_w == 1;  // MobileNet's usual depthwise rows
  if (items * slices * DDWPW_SHARE > DCONV_MAX_GROUP || slices * DDWPW_SHARE != get_local_size(2)) {
    if (active && slice == 0)  // a launch this kernel was not written for: NaN shows it
      for (int o = 0; o < DDWPW_OB * 4 && ob0 * 4 + o < K; ++o)
        for (int i = 0; i < DDWPW_PX && q0 + i < Q; ++i) y[((img * K + ob0 * 4 + o) * P + p) * Q + q0 + i] = NAN;
    return;
  }

  float4 acc[DDWPW_OB][DDWPW_PX];
#pragma unroll
  for (int o = 0; o < DDWPW_OB; ++o)
#pragma unroll
    for (int i = 0; i < DDWPW_PX; ++i) acc[o][i] = (float4)(0.0f);

  const int iw0 = q0 * stride_w - pad_left;
  // Steps of slices * DDWPW_SHARE blocks of 4 input channels: each work-item computes
  // the depthwise values of one block (4 planes, lanes past C zero) at its pixels,
  // shared with the work-items of its slice that differ only in their output blocks.
  for (int base = 0; base < C4; base += slices * DDWPW_SHARE) {
    const int cb = base + slice * DDWPW_SHARE + share;
    float4 mid[DDWPW_PX];
#pragma unroll
    for (int i = 0; i < DDWPW_PX; ++i) mid[i] = (float4)(0.0f);
    if (active && cb < C4) {
      const int lanes = min(4, C - cb * 4);
      const __global float* plane = x + (img * C + cb * 4) * HW;
      const float4 bdv = bd[cb];
#pragma unroll
      for (int i = 0; i < DDWPW_PX; ++i) mid[i] = bdv;
      for (int r = 0; r < R; ++r) {
        const int ih = p * stride_h - pad_top + r * dil_h;
        if (ih < 0 || ih >= H) continue;
        const __global float* row = plane + ih * W;
        if (unit_stride_3) {  // the row's DDWPW_PX + 2 values of each plane read once
          float4 v[DDWPW_PX + 2];
#pragma unroll
          for (int j = 0; j < DDWPW_PX + 2; ++j) {
            const int iw = iw0 + j;
            const bool in = iw >= 0 && iw < W;
            v[j] = (float4)(in ? row[iw] : 0.0f, in && lanes > 1 ? row[HW + iw] : 0.0f,
                            in && lanes > 2 ? row[2 * HW + iw] : 0.0f, in && lanes > 3 ? row[3 * HW + iw] : 0.0f);
          }
          const float4 w0 = wd[cb * RS + r * 3], w1 = wd[cb * RS + r * 3 + 1], w2 = wd[cb * RS + r * 3 + 2];
#pragma unroll
          for (int i = 0; i < DDWPW_PX; ++i) mid[i] = fma(v[i + 2], w2, fma(v[i + 1], w1, fma(v[i], w0, mid[i])));
          continue;
        }
        for (int s = 0; s < S; ++s) {
          const float4 wv = wd[cb * RS + r * S + s];
#pragma unroll
          for (int i = 0; i < DDWPW_PX; ++i) {
            const int iw = iw0 + i * stride_w + s * dil_w;
            if (iw < 0 || iw >= W) continue;
            const float4 v = (float4)(row[iw], lanes > 1 ? row[HW + iw] : 0.0f, lanes > 2 ? row[2 * HW + iw] : 0.0f,
                                      lanes > 3 ? row[3 * HW + iw] : 0.0f);
            mid[i] = fma(v, wv, mid[i]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < DDWPW_PX; ++i) mid[i] = stowage_activate_code4(mid[i], dw_act, dw_act_a, dw_act_b);
    }
#if DDWPW_SHARE > 1
#pragma unroll
    for (int i = 0; i < DDWPW_PX; ++i) shared_mid[(zl * DDWPW_PX + i) * items + t] = mid[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int j = 0; j < DDWPW_SHARE; ++j) {
      const int cbj = base + slice * DDWPW_SHARE + j;
      if (!active || cbj >= C4) break;
      float4 m[DDWPW_PX];
#pragma unroll
      for (int i = 0; i < DDWPW_PX; ++i) {
#if DDWPW_SHARE > 1
        m[i] = shared_mid[((slice * DDWPW_SHARE + j) * DDWPW_PX + i) * items + t];
#else
        m[i] = mid[i];
#endif
      }
      // Into the pointwise outputs: lanes past C meet zero weights.
#pragma unroll
      for (int o = 0; o < DDWPW_OB; ++o) {
        if (ob0 + o >= K4) break;
        const __global float4* wo = w + (ob0 + o) * C4 * 4 + cbj * 4;
        const float4 w0 = wo[0], w1 = wo[1], w2 = wo[2], w3 = wo[3];
#pragma unroll
        for (int i = 0; i < DDWPW_PX; ++i) {
          float4 a = acc[o][i];
          a = fma((float4)(m[i].x), w0, a);
          a = fma((float4)(m[i].y), w1, a);
          a = fma((float4)(m[i].z), w2, a);
          acc[o][i] = fma((float4)(m[i].w), w3, a);
        }
      }
    }
#if DDWPW_SHARE > 1
    barrier(CLK_LOCAL_MEM_FENCE);  // before the next step overwrites shared_mid
#endif
  }

  const int slice_items = items * DDWPW_SHARE, ts = share * items + t;
  if (slices > 1) {
#pragma unroll
    for (int o = 0; o < DDWPW_OB; ++o)
#pragma unroll
      for (int i = 0; i < DDWPW_PX; ++i)
        stowage_slices_put(partial, acc[o][i], o * DDWPW_PX + i, DDWPW_OUTPUTS, slice, slice_items, ts);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!active) return;
#pragma unroll
  for (int o = 0; o < DDWPW_OB; ++o) {
#pragma unroll
    for (int i = 0; i < DDWPW_PX; ++i) {
      const int j = o * DDWPW_PX + i, q = q0 + i;
      if (!stowage_slice_finishes(j, slice, slices) || ob0 + o >= K4 || q >= Q) continue;
      const float4 v = stowage_slices_sum(partial, acc[o][i], j, DDWPW_OUTPUTS, slices, slice_items, ts);
#if DDWPW_SHUFFLE
      const int pix = p * Q + q;
      stowage_direct_store4(y, bias, res, v, (ob0 + o) * 4, K, (img * y_channels + y_c0) * PQ + pix, y_cs * PQ, flags,
                            act, act_a, act_b);
      for (int l = 0; l < 4 && pass_c0 >= 0 && (ob0 + o) * 4 + l < K; ++l) {
        const int k = (ob0 + o) * 4 + l;
        y[(img * y_channels + k * y_cs + pass_c0) * PQ + pix] = pass[(img * K + k) * PQ + pix];
      }
#else
      stowage_direct_store4(y, bias, res, v, (ob0 + o) * 4, K, img * K * PQ + p * Q + q, PQ, flags, act, act_a,
                            act_b);
#endif
    }
  }
}
