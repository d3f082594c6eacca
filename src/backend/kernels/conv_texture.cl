// Convolution on NCHW4c images (docs/operators.md, docs/textures.md).
//
// Activations live in `global.texture` images as [N, C4, H, W, 4] (C4 = ceil(C/4);
// the pixel at column w, row (n * C4 + c4) * H + h holds channels 4 c4 .. 4 c4 + 3,
// zeros past C). Results keep that convention: lanes of channels >= K are written 0.
// Each activation image is followed by its tensor's offset in the image (x_off, res_off,
// y_off; <stowage/image_offset.cl.h>), added to every coordinate; padding taps are
// tested against the tensor's extents, never read from the pixels around it (they may
// belong to other tensors). Weight images sit at their image's origin.
//
// stowage_conv2d_image: groups == 1, or groups whose input and output channel
//   counts (C / groups, K / groups) are multiples of 4. Weights in a
//   `global.texture-weight` image [K4, Cgp, R, S, 4] (height K4, width Cgp R S;
//   Cgp = C4 * 4 for one group, else C / groups): the pixel at row kb, column
//   (ci * R + r) * S + s holds w[4 kb .. 4 kb + 3][ci][r][s], zeros where the
//   channel does not exist. bias: K4 float4s (zero-padded; read only under
//   STOWAGE_EPI_BIAS, so null without one). A work-item computes
//   TCONV_PX neighbouring pixels of one output row for TCONV_OB blocks of 4
//   output channels of one group, over the input blocks of its slice: the
//   local[2] slices of a work-group take every local[2]-th input block and add
//   their partial sums through local memory at the end (more work-items for
//   layers with few outputs, without shrinking the register blocking).
//   Launch: local = [l0, l1, slices] with l0 l1 slices <= TCONV_MAX_GROUP (else
//   the kernel writes NaN); grid = [ceil(Q / TCONV_PX) rounded up to l0, N * P
//   rounded up to l1, groups * ceil(Kg4 / TCONV_OB) * slices] with Kg4 = K4 for
//   one group, else K / groups / 4.
// stowage_conv2d_depthwise_image: groups == C == K (one channel per group, multiplier
//   1). Weights in a `global.texture-weight` image [C4, 1, R, S, 4] (height C4,
//   width R S). A work-item computes TCONV_PX pixels of one row for one block.
//   Launch: grid = [ceil(Q / TCONV_PX) rounded up to local0, N * P rounded up to local1, C4].
//
// stowage_conv2d_dwpw_image: a depthwise convolution (as stowage_conv2d_depthwise_image,
//   its bias and activation `dw_act` applied) whose output feeds a pointwise one (1x1,
//   stride 1, no padding, groups 1, weights as stowage_conv2d_image's with R = S = 1)
//   in the same launch: the depthwise output never goes to memory. Each work-item
//   computes the depthwise values of its TCONV_PX pixels for the input blocks of its
//   slice and multiplies them into its TDWPW_OB blocks of 4 pointwise outputs, so the
//   depthwise work is repeated once per block of outputs, in exchange for one launch
//   and one image write and read fewer. dw_act is an activation code of
//   <stowage/epilogue.cl.h> (not fixed by STOWAGE_FIXED_ACT, which fixes `act`).
//   With TDWPW_SHARE = G > 1, G work-items of a work-group that differ only in their
//   output blocks share the depthwise values through local memory, each computing
//   1/G of them. Launch as stowage_conv2d_image with G * TDWPW_OB output blocks per
//   step, local[2] = slices * G (G work-items per slice) and TDWPW_MAX_GROUP in place
//   of TCONV_MAX_GROUP; C, H, W are the depthwise input's, P, Q the output's.
//
// TCONV_WEIGHT_BUFFER = 1 takes every weight as a buffer of float4s in the same
// order as its image (the pixel at row b, column c is element b * width + c): the
// same reads, one image argument fewer per weight. On NVIDIA's OpenCL each image
// argument adds about 2 us to a launch's host time (docs/vm_overhead.md).
//
// All end in the epilogue of <stowage/epilogue.cl.h> (res: an image of the output's
// shape; an image cannot be read and written by one launch, so a residual is never
// updated in place here). A unit built with TCONV_RESIDUAL 0 has no res and res_off
// parameters and adds no residual: an image cannot be null, and each image argument
// costs NVIDIA's host about 2 us a launch, so a launch without a residual passes none.
//
// A unit built with STOWAGE_IN_AFFINE 1 gives stowage_conv2d_image six more
// arguments after act_b (in_scale, in_shift: buffers of floats; in_batch, in_act,
// in_act_a, in_act_b) and reads input channel c of image n as in_act(x *
// in_scale[n in_batch + c] + in_shift[c]), as conv.cl's stowage_conv2d does (lanes
// past C meet zero weights). The padding stays zero.
#include <stowage/epilogue.cl.h>
#include <stowage/image.cl.h>
#include <stowage/image_offset.cl.h>
#include <stowage/slices.cl.h>

#if STOWAGE_IN_AFFINE
#define TCONV_IN_PARAMS                                                                                     \
  , __global const float* in_scale, __global const float* in_shift, int in_batch, int in_act, float in_act_a, \
      float in_act_b

/* Channels c0 .. c0 + 3 of v[base + c], zero from channel C on. */
inline float4 stowage_in_lanes(__global const float* v, int base, int c0, int C) {
  return (float4)(v[base + c0], c0 + 1 < C ? v[base + c0 + 1] : 0.0f, c0 + 2 < C ? v[base + c0 + 2] : 0.0f,
                  c0 + 3 < C ? v[base + c0 + 3] : 0.0f);
}
// A value read from the input, through the map (in_s, in_t: its block's scales and shifts).
#define TCONV_IN(v) stowage_activate_code4(fma((v), in_s, in_t), STOWAGE_IN_ACT_CODE(in_act), in_act_a, in_act_b)
#else
#define TCONV_IN_PARAMS
#define TCONV_IN(v) (v)
#endif

#ifndef TCONV_RESIDUAL
#define TCONV_RESIDUAL 1
#endif
#if TCONV_RESIDUAL
#define TCONV_RES_PARAMS read_only image2d_t res, stowage_image_offset res_off,
// v plus the residual at pixel (q, row) of the output, where the flags ask for it.
#define TCONV_ADD_RES(v, q, row) \
  if (flags & STOWAGE_EPI_RESIDUAL) v += read_imagef(res, kStowageSampler, (int2)(q, row) + res_off)
#else
#define TCONV_RES_PARAMS
#define TCONV_ADD_RES(v, q, row)
#endif

#ifndef TCONV_WEIGHT_BUFFER
#define TCONV_WEIGHT_BUFFER 0
#endif
#if TCONV_WEIGHT_BUFFER
#define STOWAGE_WEIGHTS __global const float4*
#define STOWAGE_WEIGHT(w, width, col, row) ((w)[(row) * (width) + (col)])
#else
#define STOWAGE_WEIGHTS read_only image2d_t
#define STOWAGE_WEIGHT(w, width, col, row) read_imagef(w, kStowageSampler, (int2)(col, row))
#endif

#ifndef TCONV_PX
#define TCONV_PX 4
#endif
#ifndef TCONV_OB
#define TCONV_OB 2
#endif
#define TCONV_OUTPUTS (TCONV_OB * TCONV_PX)  // outputs of a work-item's register block
#ifndef TDWPW_OB
#define TDWPW_OB 2
#endif
#define TDWPW_OUTPUTS (TDWPW_OB * TCONV_PX)
#ifndef TDWPW_SHARE
#define TDWPW_SHARE 1  // work-items of a work-group, apart in output blocks, sharing each depthwise value
#endif
#ifndef TCONV_MAX_GROUP
#define TCONV_MAX_GROUP 128  // work-items per work-group (sizes the partial sums in local memory)
#endif
#ifndef TDWPW_MAX_GROUP
#define TDWPW_MAX_GROUP 128  // the same for stowage_conv2d_dwpw_image, whose local memory is larger
#endif

__kernel void stowage_conv2d_image(read_only image2d_t x, stowage_image_offset x_off, STOWAGE_WEIGHTS w,
                                   __global const float4* bias, TCONV_RES_PARAMS write_only image2d_t y,
                                   stowage_image_offset y_off, int N, int C, int H, int W, int K, int P, int Q, int R,
                                   int S, int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
                                   int groups, int flags, int act, float act_a, float act_b TCONV_IN_PARAMS) {
  __local float4 partial[TCONV_MAX_GROUP * TCONV_OUTPUTS];
  const int items = get_local_size(0) * get_local_size(1), slices = get_local_size(2);
  const int t = get_local_id(1) * get_local_size(0) + get_local_id(0), slice = get_local_id(2);
  const int q0 = get_global_id(0) * TCONV_PX, np = get_global_id(1), blk = get_group_id(2);
  const bool active = q0 < Q && np < N * P;  // the others only join the barriers
  const int C4 = (C + 3) / 4, K4 = (K + 3) / 4;
  const int Kg4 = groups == 1 ? K4 : K / groups / 4;
  const int Cg4 = groups == 1 ? C4 : C / groups / 4;
  const int steps = (Kg4 + TCONV_OB - 1) / TCONV_OB;
  const int g = blk / steps;
  const int ob0 = g * Kg4 + (blk - g * steps) * TCONV_OB, ob_end = (g + 1) * Kg4;
  const int img = np / P, p = np - img * P;
  const int RS = R * S;
  const int w_width = (groups == 1 ? C4 * 4 : C / groups) * RS;  // the weights' image width
  if (items * slices > TCONV_MAX_GROUP) {  // a launch this kernel was not written for: NaN shows it
    if (active && slice == 0)
      for (int o = 0; o < TCONV_OB && ob0 + o < ob_end; ++o)
        for (int i = 0; i < TCONV_PX && q0 + i < Q; ++i)
          write_imagef(y, (int2)(q0 + i, (img * K4 + ob0 + o) * P + p) + y_off, (float4)(NAN));
    return;
  }

  float4 acc[TCONV_OB][TCONV_PX];
#pragma unroll
  for (int o = 0; o < TCONV_OB; ++o)
#pragma unroll
    for (int i = 0; i < TCONV_PX; ++i) acc[o][i] = (float4)(0.0f);

  // Slice `slice` of the work-group takes the input blocks slice, slice + slices, ...
  for (int cb = slice; active && cb < Cg4; cb += slices) {
    const int plane_row = (img * C4 + g * Cg4 + cb) * H + x_off.y;
#if STOWAGE_IN_AFFINE
    const int in_c0 = (g * Cg4 + cb) * 4;
    const float4 in_s = stowage_in_lanes(in_scale, img * in_batch, in_c0, C);
    const float4 in_t = stowage_in_lanes(in_shift, 0, in_c0, C);
#endif
    for (int r = 0; r < R; ++r) {
      const int ih = p * stride_h - pad_top + r * dil_h;
      if (ih < 0 || ih >= H) continue;
      for (int s = 0; s < S; ++s) {
        float4 in[TCONV_PX];
#pragma unroll
        for (int i = 0; i < TCONV_PX; ++i) {
          const int iw = (q0 + i) * stride_w - pad_left + s * dil_w;
          in[i] = (iw >= 0 && iw < W)
                      ? TCONV_IN(read_imagef(x, kStowageSampler, (int2)(iw + x_off.x, plane_row + ih)))
                      : (float4)(0.0f);
        }
        const int col = (cb * 4 * R + r) * S + s;
#pragma unroll
        for (int o = 0; o < TCONV_OB; ++o) {
          const int ob = ob0 + o;
          if (ob >= ob_end) break;
          const float4 w0 = STOWAGE_WEIGHT(w, w_width, col, ob);
          const float4 w1 = STOWAGE_WEIGHT(w, w_width, col + RS, ob);
          const float4 w2 = STOWAGE_WEIGHT(w, w_width, col + 2 * RS, ob);
          const float4 w3 = STOWAGE_WEIGHT(w, w_width, col + 3 * RS, ob);
#pragma unroll
          for (int i = 0; i < TCONV_PX; ++i) {
            float4 a = acc[o][i];
            a = fma((float4)(in[i].x), w0, a);
            a = fma((float4)(in[i].y), w1, a);
            a = fma((float4)(in[i].z), w2, a);
            acc[o][i] = fma((float4)(in[i].w), w3, a);
          }
        }
      }
    }
  }

  // Several slices: each keeps its partial sums in local memory, then the slice
  // that finishes an output adds up every slice's value of it (<stowage/slices.cl.h>).
  // Unrolled, so that acc is indexed by constants and stays in registers.
  if (slices > 1) {
#pragma unroll
    for (int o = 0; o < TCONV_OB; ++o)
#pragma unroll
      for (int i = 0; i < TCONV_PX; ++i)
        stowage_slices_put(partial, acc[o][i], o * TCONV_PX + i, TCONV_OUTPUTS, slice, items, t);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!active) return;
#pragma unroll
  for (int o = 0; o < TCONV_OB; ++o) {
#pragma unroll
    for (int i = 0; i < TCONV_PX; ++i) {
      const int j = o * TCONV_PX + i, ob = ob0 + o, q = q0 + i;
      if (!stowage_slice_finishes(j, slice, slices) || ob >= ob_end || q >= Q) continue;
      float4 v = stowage_slices_sum(partial, acc[o][i], j, TCONV_OUTPUTS, slices, items, t);
      if (flags & STOWAGE_EPI_BIAS) v += bias[ob];
      const int row = (img * K4 + ob) * P + p;
      TCONV_ADD_RES(v, q, row);
      write_imagef(y, (int2)(q, row) + y_off, stowage_mask_channels(stowage_activate4(v, act, act_a, act_b), ob, K));
    }
  }
}

__kernel void stowage_conv2d_depthwise_image(read_only image2d_t x, stowage_image_offset x_off, STOWAGE_WEIGHTS w,
                                             __global const float4* bias, TCONV_RES_PARAMS write_only image2d_t y,
                                             stowage_image_offset y_off, int N, int C, int H, int W, int P, int Q,
                                             int R, int S, int stride_h, int stride_w, int pad_top, int pad_left,
                                             int dil_h, int dil_w, int flags, int act, float act_a, float act_b) {
  const int q0 = get_global_id(0) * TCONV_PX, np = get_global_id(1), cb = get_global_id(2);
  if (q0 >= Q || np >= N * P) return;
  const int C4 = (C + 3) / 4;
  const int img = np / P, p = np - img * P;
  const int plane_row = (img * C4 + cb) * H + x_off.y;
  float4 acc[TCONV_PX];
#pragma unroll
  for (int i = 0; i < TCONV_PX; ++i) acc[i] = (float4)(0.0f);
  for (int r = 0; r < R; ++r) {
    const int ih = p * stride_h - pad_top + r * dil_h;
    if (ih < 0 || ih >= H) continue;
    for (int s = 0; s < S; ++s) {
      const float4 wv = STOWAGE_WEIGHT(w, R * S, r * S + s, cb);
#pragma unroll
      for (int i = 0; i < TCONV_PX; ++i) {
        const int iw = (q0 + i) * stride_w - pad_left + s * dil_w;
        if (iw >= 0 && iw < W)
          acc[i] = fma(read_imagef(x, kStowageSampler, (int2)(iw + x_off.x, plane_row + ih)), wv, acc[i]);
      }
    }
  }
  const float4 bv = (flags & STOWAGE_EPI_BIAS) ? bias[cb] : (float4)(0.0f);
  const int row = (img * C4 + cb) * P + p;
#pragma unroll
  for (int i = 0; i < TCONV_PX; ++i) {
    const int q = q0 + i;
    if (q >= Q) break;
    float4 v = acc[i] + bv;
    TCONV_ADD_RES(v, q, row);
    write_imagef(y, (int2)(q, row) + y_off, stowage_mask_channels(stowage_activate4(v, act, act_a, act_b), cb, C));
  }
}

__kernel void stowage_conv2d_dwpw_image(read_only image2d_t x, stowage_image_offset x_off, STOWAGE_WEIGHTS wd,
                                        __global const float4* bd, STOWAGE_WEIGHTS w, __global const float4* bias,
                                        TCONV_RES_PARAMS write_only image2d_t y, stowage_image_offset y_off, int N,
                                        int C, int H, int W, int K, int P, int Q, int R, int S, int stride_h,
                                        int stride_w, int pad_top, int pad_left, int dil_h, int dil_w, int dw_act,
                                        float dw_act_a, float dw_act_b, int flags, int act, float act_a, float act_b) {
  __local float4 partial[TDWPW_MAX_GROUP * TDWPW_OUTPUTS];
#if TDWPW_SHARE > 1
  __local float4 shared_mid[TDWPW_MAX_GROUP * TCONV_PX];
#endif
  const int items = get_local_size(0) * get_local_size(1), slices = get_local_size(2) / TDWPW_SHARE;
  const int zl = get_local_id(2), slice = zl / TDWPW_SHARE, share = zl - slice * TDWPW_SHARE;
  const int t = get_local_id(1) * get_local_size(0) + get_local_id(0);
  const int q0 = get_global_id(0) * TCONV_PX, np = get_global_id(1), blk = get_group_id(2);
  const bool active = q0 < Q && np < N * P;  // the others only join the barriers
  const int C4 = (C + 3) / 4, K4 = (K + 3) / 4;
  const int ob0 = (blk * TDWPW_SHARE + share) * TDWPW_OB;
  const int img = np / P, p = np - img * P;
  const bool unit_stride_3 = S == 3 && stride_w == 1 && dil_w == 1;  // MobileNet's usual depthwise rows
  if (items * slices * TDWPW_SHARE > TDWPW_MAX_GROUP || slices * TDWPW_SHARE != get_local_size(2)) {
    if (active && slice == 0)  // a launch this kernel was not written for: NaN shows it
      for (int o = 0; o < TDWPW_OB && ob0 + o < K4; ++o)
        for (int i = 0; i < TCONV_PX && q0 + i < Q; ++i)
          write_imagef(y, (int2)(q0 + i, (img * K4 + ob0 + o) * P + p) + y_off, (float4)(NAN));
    return;
  }

  float4 acc[TDWPW_OB][TCONV_PX];
#pragma unroll
  for (int o = 0; o < TDWPW_OB; ++o)
#pragma unroll
    for (int i = 0; i < TCONV_PX; ++i) acc[o][i] = (float4)(0.0f);

  // Steps of slices * TDWPW_SHARE input blocks: each work-item computes the depthwise
  // values of one block at its pixels; the TDWPW_SHARE work-items of a slice that
  // differ only in their output blocks exchange theirs through local memory.
  for (int base = 0; base < C4; base += slices * TDWPW_SHARE) {
    const int cb = base + slice * TDWPW_SHARE + share;
    float4 mid[TCONV_PX];
#pragma unroll
    for (int i = 0; i < TCONV_PX; ++i) mid[i] = (float4)(0.0f);
    if (active && cb < C4) {
      const int plane_row = (img * C4 + cb) * H + x_off.y;
      const float4 bdv = bd[cb];
#pragma unroll
      for (int i = 0; i < TCONV_PX; ++i) mid[i] = bdv;
      for (int r = 0; r < R; ++r) {
        const int ih = p * stride_h - pad_top + r * dil_h;
        if (ih < 0 || ih >= H) continue;
        if (unit_stride_3) {  // the row's TCONV_PX + 2 pixels read once, each serving up to 3 outputs
          const int iw0 = q0 - pad_left;
          float4 row[TCONV_PX + 2];
#pragma unroll
          for (int j = 0; j < TCONV_PX + 2; ++j) {
            const int iw = iw0 + j;
            row[j] = (iw >= 0 && iw < W) ? read_imagef(x, kStowageSampler, (int2)(iw + x_off.x, plane_row + ih))
                                         : (float4)(0.0f);
          }
          const float4 w0 = STOWAGE_WEIGHT(wd, R * 3, r * 3, cb);
          const float4 w1 = STOWAGE_WEIGHT(wd, R * 3, r * 3 + 1, cb);
          const float4 w2 = STOWAGE_WEIGHT(wd, R * 3, r * 3 + 2, cb);
#pragma unroll
          for (int i = 0; i < TCONV_PX; ++i) mid[i] = fma(row[i + 2], w2, fma(row[i + 1], w1, fma(row[i], w0, mid[i])));
          continue;
        }
        for (int s = 0; s < S; ++s) {
          const float4 wv = STOWAGE_WEIGHT(wd, R * S, r * S + s, cb);
#pragma unroll
          for (int i = 0; i < TCONV_PX; ++i) {
            const int iw = (q0 + i) * stride_w - pad_left + s * dil_w;
            if (iw >= 0 && iw < W)
              mid[i] = fma(read_imagef(x, kStowageSampler, (int2)(iw + x_off.x, plane_row + ih)), wv, mid[i]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < TCONV_PX; ++i) mid[i] = stowage_activate_code4(mid[i], dw_act, dw_act_a, dw_act_b);
    }
#if TDWPW_SHARE > 1
#pragma unroll
    for (int i = 0; i < TCONV_PX; ++i) shared_mid[(zl * TCONV_PX + i) * items + t] = mid[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int j = 0; j < TDWPW_SHARE; ++j) {
      const int cbj = base + slice * TDWPW_SHARE + j;
      if (!active || cbj >= C4) break;
      float4 m[TCONV_PX];
#pragma unroll
      for (int i = 0; i < TCONV_PX; ++i) {
#if TDWPW_SHARE > 1
        m[i] = shared_mid[((slice * TDWPW_SHARE + j) * TCONV_PX + i) * items + t];
#else
        m[i] = mid[i];
#endif
      }
      // Into the pointwise outputs: lanes past C meet zero weights.
      const int col = cbj * 4;
#pragma unroll
      for (int o = 0; o < TDWPW_OB; ++o) {
        const int ob = ob0 + o;
        if (ob >= K4) break;
        const float4 w0 = STOWAGE_WEIGHT(w, C4 * 4, col, ob);
        const float4 w1 = STOWAGE_WEIGHT(w, C4 * 4, col + 1, ob);
        const float4 w2 = STOWAGE_WEIGHT(w, C4 * 4, col + 2, ob);
        const float4 w3 = STOWAGE_WEIGHT(w, C4 * 4, col + 3, ob);
#pragma unroll
        for (int i = 0; i < TCONV_PX; ++i) {
          float4 a = acc[o][i];
          a = fma((float4)(m[i].x), w0, a);
          a = fma((float4)(m[i].y), w1, a);
          a = fma((float4)(m[i].z), w2, a);
          acc[o][i] = fma((float4)(m[i].w), w3, a);
        }
      }
    }
#if TDWPW_SHARE > 1
    barrier(CLK_LOCAL_MEM_FENCE);  // before the next step overwrites shared_mid
#endif
  }

  // The slices' partial sums, as stowage_conv2d_image adds them; the work-items of
  // one slice are (share, t), items * TDWPW_SHARE of them.
  const int slice_items = items * TDWPW_SHARE, ts = share * items + t;
  if (slices > 1) {
#pragma unroll
    for (int o = 0; o < TDWPW_OB; ++o)
#pragma unroll
      for (int i = 0; i < TCONV_PX; ++i)
        stowage_slices_put(partial, acc[o][i], o * TCONV_PX + i, TDWPW_OUTPUTS, slice, slice_items, ts);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!active) return;
#pragma unroll
  for (int o = 0; o < TDWPW_OB; ++o) {
#pragma unroll
    for (int i = 0; i < TCONV_PX; ++i) {
      const int j = o * TCONV_PX + i, ob = ob0 + o, q = q0 + i;
      if (!stowage_slice_finishes(j, slice, slices) || ob >= K4 || q >= Q) continue;
      float4 v = stowage_slices_sum(partial, acc[o][i], j, TDWPW_OUTPUTS, slices, slice_items, ts);
      if (flags & STOWAGE_EPI_BIAS) v += bias[ob];
      const int row = (img * K4 + ob) * P + p;
      TCONV_ADD_RES(v, q, row);
      write_imagef(y, (int2)(q, row) + y_off, stowage_mask_channels(stowage_activate4(v, act, act_a, act_b), ob, K));
    }
  }
}
