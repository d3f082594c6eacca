// conv2d 3x3, stride 1, pad 1, float32, batch 1, on buffers (NCHW4c / OIHW4o).
//
// Layouts (float4 elements, row-major):
//   x [Cin/4, H, W]        4 input channels of one position per float4 (NCHW4c)
//   w [Cout/4, Cin, 3, 3]  4 output channels of one (ci, ky, kx) per float4 (OIHW4o)
//   y [Cout/4, H, W]
// These are the tensors [C/4, H, W, 4] and [Cout/4, Cin, 3, 3, 4] of float32, the
// same bytes as the textures of conv2d_texture.cl, so the two kernels are
// interchangeable and give the same results.
//
// Launch: local = [LX, LY, S] with LX*LY*S <= 128 and S <= 8;
//   grid = [ceil(W/4) rounded up to LX, H rounded up to LY, Cout/8 * S].
// Cin is a multiple of 4, Cout of 8. A launch breaking the local-size limits
// writes NaN, so the mistake shows.
//
// Design (the same as conv2d_texture.cl, which explains it at length):
// - a work-item computes 4 neighbouring pixels x 8 output channels (32
//   accumulators); for each input plane and kernel row it reads 6 input float4s
//   once and reuses them for 3 taps x 2 blocks, each weight float4 for 4 pixels;
//   the 3x3 window and the blocks are unrolled;
// - the S slices of a work-group split the input planes between them and add
//   their partial sums through local memory, so small C still fills the GPU;
// - the weights of one input plane and output pair are 72 consecutive float4s
//   (2 x 36), read by the slice with coalesced loads into local memory
//   (double-buffered) and read back as broadcasts;
// - dimension 0 runs along a row, so a warp's input loads cover neighbouring
//   pixels of one or two rows and hit the same cache lines;
// - padding is explicit: positions outside the plane read as zeros.
#define CONV_PX 4
#define CONV_OB 2
#define CONV_MAX_GROUP 128
#define CONV_MAX_SLICES 8
#define CONV_W_PLANE (CONV_OB * 36)
#define CONV_SCRATCH 1152  // float4s: max(2 * CONV_MAX_SLICES * CONV_W_PLANE, CONV_MAX_GROUP * CONV_OB * CONV_PX)

__kernel void conv2d_nchw4c(__global const float4* x, __global const float4* w, __global float4* y,
                            int C, int H, int W) {
  __local float4 scratch[CONV_SCRATCH];
  const int nx = get_local_size(0), ny = get_local_size(1), slices = get_local_size(2);
  const int slice = get_local_id(2);
  const int t = get_local_id(1) * nx + get_local_id(0);
  const int slice_items = nx * ny;
  const int x0 = get_global_id(0) * CONV_PX;
  const int row = get_global_id(1);
  const int ob = get_group_id(2) * CONV_OB;
  const bool active = row < H;
  __global float4* out = y + ((size_t)ob * H + row) * W + x0;  // block ob, this row, pixel x0
  const size_t block_stride = (size_t)H * W;

  if (slice_items * slices > CONV_MAX_GROUP || slices > CONV_MAX_SLICES) {
    if (slice == 0 && active)
      for (int o = 0; o < CONV_OB; ++o)
        for (int p = 0; p < CONV_PX; ++p)
          if (x0 + p < W) out[o * block_stride + p] = (float4)(NAN);
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
        wl[i] = w[((size_t)(ob + i / 36) * C + ci4 * 4) * 9 + i % 36];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (ci4 < planes && active) {
      __global const float4* plane = x + (size_t)ci4 * H * W;
#pragma unroll
      for (int ky = 0; ky < 3; ++ky) {
        const int iy = row + ky - 1;
        if (iy < 0 || iy >= H) continue;
        __global const float4* in_row = plane + (size_t)iy * W;
        float4 in[CONV_PX + 2];
#pragma unroll
        for (int i = 0; i < CONV_PX + 2; ++i) {
          const int ix = x0 + i - 1;
          in[i] = (ix >= 0 && ix < W) ? in_row[ix] : (float4)(0.0f);
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
        if (x0 + p < W) out[o * block_stride + p] = acc[o][p];
    return;
  }
  for (int j = slice; j < CONV_OB * CONV_PX; j += slices) {
    float4 sum = scratch[j * slice_items + t];
    for (int s = 1; s < slices; ++s) sum += scratch[(s * CONV_OB * CONV_PX + j) * slice_items + t];
    const int o = j / CONV_PX, p = j % CONV_PX;
    if (x0 + p < W) out[o * block_stride + p] = sum;
  }
}
