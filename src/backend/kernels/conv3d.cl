// Convolution over three spatial dimensions on NCDHW float32 buffers (ONNX Conv of
// a 5-D input), direct: one work-item per output, no tiling (docs/operators.md: 2D
// convolutions take the tuned kernels of conv.cl, conv_direct.cl, conv_texture.cl).
//
// stowage_conv3d: y [N, K, O0, O1, O2] = bias[k] + the sum over the input channels c
//   of k's group and the taps t of x[n, c, o * s - b + t * d] (inside the input) times
//   w[k, c', t], with w ONNX's weight [K, C / groups, k0, k1, k2] read as given (c':
//   c's index in its group), so a weight computed at run time needs no relayout.
//   has_bias 0: no bias (bias is not read).
//   Launch: grid = [O2 rounded up to local0, O1 rounded up to local1, N * K * O0].

__kernel void stowage_conv3d(__global const float* x, __global const float* w, __global const float* bias,
                             __global float* y, int N, int C, int D, int H, int W, int K, int O0, int O1, int O2,
                             int k0, int k1, int k2, int s0, int s1, int s2, int b0, int b1, int b2, int d0, int d1,
                             int d2, int groups, int has_bias) {
  const int o2 = get_global_id(0), o1 = get_global_id(1), z = get_global_id(2);
  if (o2 >= O2 || o1 >= O1) return;
  const int o0 = z % O0, nk = z / O0, k = nk % K, n = nk / K;
  const int cg = C / groups, g = k / (K / groups);
  const int taps = k0 * k1 * k2;
  float acc = has_bias ? bias[k] : 0.0f;
  for (int cc = 0; cc < cg; ++cc) {
    const __global float* xc = x + ((long)n * C + g * cg + cc) * D * H * W;
    const __global float* wc = w + ((long)k * cg + cc) * taps;
    for (int t0 = 0; t0 < k0; ++t0) {
      const int i0 = o0 * s0 - b0 + t0 * d0;
      if (i0 < 0 || i0 >= D) continue;
      for (int t1 = 0; t1 < k1; ++t1) {
        const int i1 = o1 * s1 - b1 + t1 * d1;
        if (i1 < 0 || i1 >= H) continue;
        for (int t2 = 0; t2 < k2; ++t2) {
          const int i2 = o2 * s2 - b2 + t2 * d2;
          if (i2 >= 0 && i2 < W) acc += xc[((long)i0 * H + i1) * W + i2] * wc[(t0 * k1 + t1) * k2 + t2];
        }
      }
    }
  }
  y[(((long)n * K + k) * O0 + o0) * O1 * O2 + o1 * O2 + o2] = acc;
}

// stowage_im2col3d: cols [N, C taps, O0 O1 O2] = x[n, c, o * s - b + t * d] for input
//   channel c and tap t (0 outside the input): the operand of the GEMM that runs a
//   3D convolution of many input channels a group (the weight [K, C / groups taps]
//   times each group's rows of cols).
//   Launch: grid = [O1 O2 rounded up to local0, O0 rounded up to local1, N C taps].
__kernel void stowage_im2col3d(__global const float* x, __global float* cols, int D, int H, int W, int O0, int O1,
                               int O2, int k0, int k1, int k2, int s0, int s1, int s2, int b0, int b1, int b2, int d0,
                               int d1, int d2) {
  const int o12 = get_global_id(0), o0 = get_global_id(1), z = get_global_id(2);  // z = (n C + c) taps + t
  if (o12 >= O1 * O2 || o0 >= O0) return;
  const int o1 = o12 / O2, o2 = o12 - o1 * O2;
  const int taps = k0 * k1 * k2;
  const int t = z % taps, plane = z / taps;  // plane = n C + c
  const int t2 = t % k2, t1 = (t / k2) % k1, t0 = t / (k1 * k2);
  const int i0 = o0 * s0 - b0 + t0 * d0, i1 = o1 * s1 - b1 + t1 * d1, i2 = o2 * s2 - b2 + t2 * d2;
  const int inside = i0 >= 0 && i0 < D && i1 >= 0 && i1 < H && i2 >= 0 && i2 < W;
  cols[((long)z * O0 + o0) * O1 * O2 + o12] = inside ? x[(long)plane * D * H * W + ((long)i0 * H + i1) * W + i2] : 0.0f;
}
