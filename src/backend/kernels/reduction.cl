// Reductions on float32 buffers (docs/operators.md).
//
// stowage_softmax: x viewed as [outer, n, inner]; for each (o, i) the softmax over
//   the n values x[(o * n + j) * inner + i]: exp(v - max) / sum of them. One
//   work-group of SOFTMAX_LOCAL work-items per row, reduced in a fixed order.
//   Launch: local = [SOFTMAX_LOCAL, 1], grid = [SOFTMAX_LOCAL, outer * inner].
#ifndef SOFTMAX_LOCAL
#define SOFTMAX_LOCAL 64
#endif
#if SOFTMAX_LOCAL & (SOFTMAX_LOCAL - 1)
#error "SOFTMAX_LOCAL must be a power of two"
#endif

__kernel __attribute__((reqd_work_group_size(SOFTMAX_LOCAL, 1, 1))) void stowage_softmax(__global const float* x,
                                                                                         __global float* y, int n,
                                                                                         int inner) {
  __local float partial[SOFTMAX_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  const int o = row / inner, i = row - o * inner;
  const int base = o * n * inner + i;

  float best = -INFINITY;
  for (int j = t; j < n; j += SOFTMAX_LOCAL) best = fmax(best, x[base + j * inner]);
  partial[t] = best;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = SOFTMAX_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step) partial[t] = fmax(partial[t], partial[t + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  best = partial[0];
  barrier(CLK_LOCAL_MEM_FENCE);

  float sum = 0.0f;
  for (int j = t; j < n; j += SOFTMAX_LOCAL) sum += exp(x[base + j * inner] - best);
  partial[t] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = SOFTMAX_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step) partial[t] += partial[t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float scale = 1.0f / partial[0];
  for (int j = t; j < n; j += SOFTMAX_LOCAL) y[base + j * inner] = exp(x[base + j * inner] - best) * scale;
}
