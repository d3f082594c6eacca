// conv2d 3x3, stride 1, pad 1, on buffers in NCHW4c (batch 1):
//   x: [C/4, H, W] float4 (4 input channels per element)
//   w: [Cout/4, Cin, 3, 3] float4 (OIHW4o: 4 output channels per element)
//   y: [Cout/4, H, W] float4
// Grid: (ceil(W/4), H, Cout/8). Each work-item computes 4 neighbouring pixels of
// one row for 8 output channels (two float4 blocks): 32 accumulators in
// registers, each input float4 read once per 3x3 row and reused by 3 taps x 2
// blocks, each weight float4 reused by 4 pixels. Neighbouring work-items in
// dimension 0 share their output channels, so their weight reads are the same
// address (broadcast) and their input reads are contiguous.
__kernel void conv2d_nchw4c(__global const float4* x, __global const float4* w, __global float4* y,
                            int C, int H, int W) {
  const int x0 = get_global_id(0) * 4;
  const int row = get_global_id(1);
  const int ob = get_global_id(2) * 2;
  const int C4 = C / 4;
  float4 acc[2][4];
  for (int o = 0; o < 2; ++o)
    for (int p = 0; p < 4; ++p) acc[o][p] = (float4)(0.0f);
  for (int ci4 = 0; ci4 < C4; ++ci4) {
    __global const float4* plane = x + (size_t)ci4 * H * W;
    for (int ky = 0; ky < 3; ++ky) {
      const int iy = row + ky - 1;
      if (iy < 0 || iy >= H) continue;
      float4 in[6];
      for (int i = 0; i < 6; ++i) {
        const int ix = x0 + i - 1;
        in[i] = (ix >= 0 && ix < W) ? plane[iy * W + ix] : (float4)(0.0f);
      }
      for (int kx = 0; kx < 3; ++kx) {
        for (int o = 0; o < 2; ++o) {
          __global const float4* wp = w + ((size_t)(ob + o) * C + ci4 * 4) * 9 + ky * 3 + kx;
          const float4 w0 = wp[0], w1 = wp[9], w2 = wp[18], w3 = wp[27];
          for (int p = 0; p < 4; ++p) {
            const float4 v = in[p + kx];
            acc[o][p] += v.x * w0 + v.y * w1 + v.z * w2 + v.w * w3;
          }
        }
      }
    }
  }
  for (int o = 0; o < 2; ++o)
    for (int p = 0; p < 4; ++p)
      if (x0 + p < W) y[((size_t)(ob + o) * H + row) * W + x0 + p] = acc[o][p];
}
