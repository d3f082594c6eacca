// conv2d 3x3, stride 1, pad 1, on textures (batch 1):
//   x: global.texture (activation layout): tensor [C/4, H, W, 4] -> image height C/4*H, width W
//   w: global.texture-weight: tensor [Cout/4, Cin, 3, 3, 4] -> image height Cout/4, width Cin*9
//   y: like x, with Cout/4 planes
// The same blocking as conv2d_nchw4c.cl (4 pixels x 8 output channels per
// work-item); reads go through the texture cache, and CLK_ADDRESS_CLAMP returns
// zero left and right of the image, which is the horizontal padding. Rows
// outside a channel plane are skipped (they belong to the neighbouring plane).
__constant sampler_t kNearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;

__kernel void conv2d_texture(read_only image2d_t x, read_only image2d_t w, write_only image2d_t y,
                             int C, int H, int W) {
  const int x0 = get_global_id(0) * 4;
  const int row = get_global_id(1);
  const int ob = get_global_id(2) * 2;
  const int C4 = C / 4;
  float4 acc[2][4];
  for (int o = 0; o < 2; ++o)
    for (int p = 0; p < 4; ++p) acc[o][p] = (float4)(0.0f);
  for (int ci4 = 0; ci4 < C4; ++ci4) {
    for (int ky = 0; ky < 3; ++ky) {
      const int iy = row + ky - 1;
      if (iy < 0 || iy >= H) continue;
      float4 in[6];
      for (int i = 0; i < 6; ++i) in[i] = read_imagef(x, kNearest, (int2)(x0 + i - 1, ci4 * H + iy));
      for (int kx = 0; kx < 3; ++kx) {
        for (int o = 0; o < 2; ++o) {
          const int wx = ci4 * 4 * 9 + ky * 3 + kx;
          const float4 w0 = read_imagef(w, kNearest, (int2)(wx, ob + o));
          const float4 w1 = read_imagef(w, kNearest, (int2)(wx + 9, ob + o));
          const float4 w2 = read_imagef(w, kNearest, (int2)(wx + 18, ob + o));
          const float4 w3 = read_imagef(w, kNearest, (int2)(wx + 27, ob + o));
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
      if (x0 + p < W) write_imagef(y, (int2)(x0 + p, (ob + o) * H + row), acc[o][p]);
}
