// conv2d 3x3, stride 1, pad 1, float32, batch 1, NCHW4c activations and OIHW4o
// weights, one source for two storage layouts: on textures (image2d RGBA float)
// when the unit defines CONV2D_TEXTURE in front of this text, else on buffers. The
// programs of examples/textures/conv2d_program.h put that line in.
//
// Layouts (tensors of float32; a float4 is a pixel or a buffer element):
//   x [Cin/4, H, W, 4]        texture: global.texture         image height Cin/4*H,  width W
//   w [Cout/4, Cin, 3, 3, 4]  texture: global.texture-weight  image height Cout/4,   width Cin*9
//   y [Cout/4, H, W, 4]       texture: global.texture         image height Cout/4*H, width W
// A float4 of x or y holds 4 channels of one position (NCHW4c). A float4 of w holds
// 4 output channels for one (input channel, ky, kx) (OIHW4o): the pixel at row
// co4, column ci*9 + ky*3 + kx is w[4*co4 .. 4*co4+3][ci][ky][kx]. On buffers the
// same tensors are row-major, the same bytes, so both kernels run the same
// arithmetic in the same order and give the same results to the bit.
//
// Launch: local = [LX, LY, S] with LX*LY*S <= 128 and S <= 8;
//   grid = [ceil(W/4) rounded up to LX, H rounded up to LY, Cout/8 * S].
// Cin is a multiple of 4, Cout of 8. A launch breaking the local-size limits
// writes NaN, so the mistake shows.
//
// Design, for a big GPU at small spatial sizes (64x64, C = 64..256):
// - Register blocking: a work-item computes 4 neighbouring pixels of one row for
//   8 output channels (two float4 blocks), 32 accumulators. For each input plane
//   (4 channels) and kernel row it reads 6 input pixels once and uses each for 3
//   taps x 2 blocks; each weight pixel serves 4 output pixels. 384 FMAs per 6
//   texture reads; the 3x3 window and the blocks are unrolled at compile time.
// - Split over input channels inside a work-group: the S slices of a group take
//   every S-th input plane and add their partial sums through local memory at
//   the end. At 64x64 and C = 64 the blocking alone leaves 8192 work-items, about
//   two warps per SM of an H100, too few to hide texture latency; S = 4 gives
//   four times as many without shrinking the blocking.
// - Weights through local memory: the 72 weight pixels of one input plane and
//   output pair are the same for every work-item of a slice, so the slice reads
//   them once into local memory (double-buffered: one barrier per plane) and
//   every work-item reads them back as broadcasts, instead of 72 texture fetches
//   per work-item.
// - Dimension 0 runs along a row: a warp's input reads are neighbouring pixels
//   (the texture cache's 2D locality), its weight reads one address.
// - Padding: columns outside the plane read as zeros, tested explicitly (on
//   textures too: the pixels around a tensor may belong to other tensors); rows
//   above and below a plane are skipped (they belong to the neighbouring plane).
// - Textures: x and y may sit anywhere in their images: the stowage_image_offset
//   after each (<stowage/image_offset.cl.h>, set by the VM, not listed by
//   call_kernel) is added to their coordinates. w sits at its image's origin.
#define CONV_PX 4           // pixels of a row per work-item
#define CONV_OB 2           // float4 blocks of output channels per work-item
#define CONV_MAX_GROUP 128  // work-items per group (the reduction area's size)
#define CONV_MAX_SLICES 8
#define CONV_W_PLANE (CONV_OB * 36)  // weight float4s per input plane and output pair
#define CONV_SCRATCH 1152   // float4s: max(2 * CONV_MAX_SLICES * CONV_W_PLANE, CONV_MAX_GROUP * CONV_OB * CONV_PX)

// The layout's accesses, in the kernel's names: weight float4 i of plane ci4 for
// blocks ob.., the input at (ci4, iy, ix) or zero outside the row, output (o, p).
#ifdef CONV2D_TEXTURE
#include <stowage/image_offset.cl.h>
__constant sampler_t kConvSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;
#define CONV_LOAD_W(ci4, i) read_imagef(w, kConvSampler, (int2)((ci4) * 36 + (i) % 36, ob + (i) / 36))
#define CONV_LOAD_X(ci4, iy, ix) \
  ((ix) >= 0 && (ix) < W ? read_imagef(x, kConvSampler, (int2)((ix), (ci4) * H + (iy)) + x_off) : (float4)(0.0f))
#define CONV_STORE_Y(o, p, v) write_imagef(y, (int2)(x0 + (p), (ob + (o)) * H + row) + y_off, (v))

__kernel void conv2d_texture(read_only image2d_t x, stowage_image_offset x_off, read_only image2d_t w,
                             write_only image2d_t y, stowage_image_offset y_off, int C, int H, int W) {
#else
#define CONV_LOAD_W(ci4, i) w[((size_t)(ob + (i) / 36) * C + (ci4) * 4) * 9 + (i) % 36]
#define CONV_LOAD_X(ci4, iy, ix) \
  ((ix) >= 0 && (ix) < W ? x[((size_t)(ci4) * H + (iy)) * W + (ix)] : (float4)(0.0f))
#define CONV_STORE_Y(o, p, v) y[((size_t)(ob + (o)) * H + row) * W + x0 + (p)] = (v)

__kernel void conv2d_nchw4c(__global const float4* x, __global const float4* w, __global float4* y,
                            int C, int H, int W) {
#endif
  __local float4 scratch[CONV_SCRATCH];
  const int nx = get_local_size(0), ny = get_local_size(1), slices = get_local_size(2);
  const int slice = get_local_id(2);
  const int t = get_local_id(1) * nx + get_local_id(0);  // index within the slice
  const int slice_items = nx * ny;
  const int x0 = get_global_id(0) * CONV_PX;
  const int row = get_global_id(1);
  const int ob = get_group_id(2) * CONV_OB;
  const bool active = row < H;  // rows of the rounding-up compute nothing but join the barriers

  if (slice_items * slices > CONV_MAX_GROUP || slices > CONV_MAX_SLICES) {
    if (slice == 0 && active)
      for (int o = 0; o < CONV_OB; ++o)
        for (int p = 0; p < CONV_PX; ++p)
          if (x0 + p < W) CONV_STORE_Y(o, p, (float4)(NAN));
    return;
  }

  float4 acc[CONV_OB][CONV_PX];
#pragma unroll
  for (int o = 0; o < CONV_OB; ++o)
#pragma unroll
    for (int p = 0; p < CONV_PX; ++p) acc[o][p] = (float4)(0.0f);

  const int planes = C / 4;
  const int steps = (planes + slices - 1) / slices;
  for (int step = 0; step < steps; ++step) {
    const int ci4 = step * slices + slice;
    __local float4* wl = scratch + ((step & 1) * slices + slice) * CONV_W_PLANE;
    if (ci4 < planes)
      for (int i = t; i < CONV_W_PLANE; i += slice_items)
        wl[i] = CONV_LOAD_W(ci4, i);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (ci4 < planes && active) {
#pragma unroll
      for (int ky = 0; ky < 3; ++ky) {
        const int iy = row + ky - 1;
        if (iy < 0 || iy >= H) continue;
        float4 in[CONV_PX + 2];
#pragma unroll
        for (int i = 0; i < CONV_PX + 2; ++i) {
          const int ix = x0 + i - 1;
          in[i] = CONV_LOAD_X(ci4, iy, ix);
        }
#pragma unroll
        for (int kx = 0; kx < 3; ++kx) {
#pragma unroll
          for (int o = 0; o < CONV_OB; ++o) {
            const __local float4* wk = wl + o * 36 + ky * 3 + kx;
            const float4 w0 = wk[0], w1 = wk[9], w2 = wk[18], w3 = wk[27];
#pragma unroll
            for (int p = 0; p < CONV_PX; ++p) {
              const float4 v = in[p + kx];
              acc[o][p] = fma((float4)(v.x), w0, acc[o][p]);
              acc[o][p] = fma((float4)(v.y), w1, acc[o][p]);
              acc[o][p] = fma((float4)(v.z), w2, acc[o][p]);
              acc[o][p] = fma((float4)(v.w), w3, acc[o][p]);
            }
          }
        }
      }
    }
  }

  // With several slices, each writes its 8 partial float4s to local memory and
  // then adds up every slice's values for the outputs j = slice, slice + S, ...
  // (fixed order, so the result does not depend on timing).
  if (slices > 1) {
    barrier(CLK_LOCAL_MEM_FENCE);  // the weight buffers are no longer read
#pragma unroll
    for (int o = 0; o < CONV_OB; ++o)
#pragma unroll
      for (int p = 0; p < CONV_PX; ++p) scratch[((slice * CONV_OB + o) * CONV_PX + p) * slice_items + t] = acc[o][p];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!active) return;  // after the last barrier
  if (slices == 1) {
#pragma unroll
    for (int o = 0; o < CONV_OB; ++o)
#pragma unroll
      for (int p = 0; p < CONV_PX; ++p)
        if (x0 + p < W) CONV_STORE_Y(o, p, acc[o][p]);
    return;
  }
  for (int j = slice; j < CONV_OB * CONV_PX; j += slices) {
    float4 sum = scratch[j * slice_items + t];
    for (int s = 1; s < slices; ++s) sum += scratch[(s * CONV_OB * CONV_PX + j) * slice_items + t];
    const int o = j / CONV_PX, p = j % CONV_PX;
    if (x0 + p < W) CONV_STORE_Y(o, p, sum);
  }
}
