// Sequence-model ops (docs/operators.md): CausalConvWithState, LinearAttention,
// SwiGLU (ONNX opsets 27, 28), float32.
//
// stowage_causal_conv: y[b, c, t] = act(bias[c] + sum_j w[c, j] * p[b, c, t + j]) over
//   the padded sequence p = concat(past (or zeros), x) along t, k - 1 + length long;
//   act SiLU when silu != 0. Launch: grid = [length, channels, batch] rounded up.
// stowage_causal_state: present[b, c, i] = p[b, c, length + i], i < k - 1 (the
//   padded sequence's last k - 1 values). Launch: grid = [k - 1, channels, batch].
//   Without a past, `past` is null and has_past 0 (likewise an absent bias, decay or beta).
// stowage_linear_attention: the recurrence of ONNX's LinearAttention, walked over T
//   by one work-item per (j, kv head, batch), j < d_v: the work-item owns column j
//   of its head's state S (d_k x d_v, kept in `state`, which is the present_state
//   output) and updates it per token: decay S *= exp(g) (decay_width 0: none, 1: one
//   a head, else per key dimension), delta u = beta * (v - S^T k) (beta_width 0:
//   none, 1: one for all heads, else one a head) or u = v, then S += k u^T and
//   o = scale * q^T S for each query head of the group. q (B, T, Hq*dk), k, decay
//   (B, T, Hkv*dk), v (B, T, Hkv*dv), y (B, T, Hq*dv), state (B, Hkv, dk, dv).
//   Launch: grid = [d_v, kv_heads, batch] rounded up.
// stowage_swiglu: y[i] = a[i] * sigmoid(alpha * a[i]) * b[i], i < n.
//   Launch: grid = [n rounded up to local0].

inline float seq_padded(__global const float* x, __global const float* past, int has_past, int row, int length,
                        int pad, int p) {
  if (p >= pad) return x[row * length + p - pad];
  return has_past ? past[row * pad + p] : 0.0f;
}

__kernel void stowage_causal_conv(__global const float* x, __global const float* w, __global const float* bias,
                                  __global const float* past, __global float* y, int channels, int length, int k,
                                  int has_bias, int has_past, int silu) {
  const int t = get_global_id(0), c = get_global_id(1), b = get_global_id(2);
  if (t >= length || c >= channels) return;
  const int row = b * channels + c;
  float sum = has_bias ? bias[c] : 0.0f;
  for (int j = 0; j < k; ++j) sum += w[c * k + j] * seq_padded(x, past, has_past, row, length, k - 1, t + j);
  if (silu) sum = sum / (1.0f + exp(-sum));
  y[row * length + t] = sum;
}

__kernel void stowage_causal_state(__global const float* x, __global const float* past, __global float* present,
                                   int channels, int length, int k, int has_past) {
  const int i = get_global_id(0), c = get_global_id(1), b = get_global_id(2);
  if (i >= k - 1 || c >= channels) return;
  const int row = b * channels + c;
  present[row * (k - 1) + i] = seq_padded(x, past, has_past, row, length, k - 1, length + i);
}

__kernel void stowage_linear_attention(__global const float* q, __global const float* key,
                                       __global const float* value, __global const float* decay,
                                       __global const float* beta, __global const float* past, __global float* y,
                                       __global float* state, int steps, int q_heads, int kv_heads, int dk, int dv,
                                       int decay_width, int beta_width, int has_past, float scale) {
  const int j = get_global_id(0), h = get_global_id(1), b = get_global_id(2);
  if (j >= dv || h >= kv_heads) return;
  const int group = q_heads / kv_heads;
  __global float* s = state + (b * kv_heads + h) * dk * dv + j;  // column j: s[i * dv]
  __global const float* p = past + (b * kv_heads + h) * dk * dv + j;
  for (int i = 0; i < dk; ++i) s[i * dv] = has_past ? p[i * dv] : 0.0f;
  for (int t = 0; t < steps; ++t) {
    const int bt = b * steps + t;
    __global const float* kt = key + (bt * kv_heads + h) * dk;
    if (decay_width == 1) {
      const float factor = exp(decay[bt * kv_heads + h]);
      for (int i = 0; i < dk; ++i) s[i * dv] *= factor;
    } else if (decay_width > 1) {
      __global const float* g = decay + (bt * kv_heads + h) * dk;
      for (int i = 0; i < dk; ++i) s[i * dv] *= exp(g[i]);
    }
    float u = value[(bt * kv_heads + h) * dv + j];
    if (beta_width > 0) {
      float retrieved = 0.0f;
      for (int i = 0; i < dk; ++i) retrieved += s[i * dv] * kt[i];
      u = beta[bt * beta_width + (beta_width == 1 ? 0 : h)] * (u - retrieved);
    }
    for (int i = 0; i < dk; ++i) s[i * dv] += kt[i] * u;
    for (int r = 0; r < group; ++r) {
      const int hq = h * group + r;
      __global const float* qt = q + (bt * q_heads + hq) * dk;
      float o = 0.0f;
      for (int i = 0; i < dk; ++i) o += qt[i] * s[i * dv];
      y[(bt * q_heads + hq) * dv + j] = scale * o;
    }
  }
}

__kernel void stowage_swiglu(__global const float* a, __global const float* b, __global float* y, int n, float alpha) {
  const int i = get_global_id(0);
  if (i < n) {
    const float v = a[i];
    y[i] = v / (1.0f + exp(-alpha * v)) * b[i];
  }
}
