// Recurrent layers of ONNX (RNN, GRU, LSTM), float32 (docs/operators.md).
//
// The input projection X W^T of every step is one GEMM before these kernels
// (xw: a row per (t, b), the row of (t, b) at t * xt + b * xb, holding dirs * G * H
// values: direction d's gates at d * G * H, gate g's at g * H). Each kernel then
// walks the whole sequence: one work-group per (batch row b, direction d), its
// work-items sharing the hidden units j < H (j = lid, lid + local size, ...), with a
// barrier between steps, since a step reads every unit of the previous hidden state.
// Launch: grid = [L, batch, dirs], local = [L, 1, 1].
//
// The hidden state passes between steps through `scratch` (ping-pong halves of
// (dirs, batch, H) each; GRU's third part holds r (.) h_{t-1}); the cell state of
// LSTM is kept in yc. Direction d runs backward when `reverse` is set (direction
// "reverse") or d == 1 (bidirectional). Over a row of length len < steps (lens),
// steps len .. steps-1 are not computed and their outputs are 0; a backward
// direction starts at len - 1. Y is written at y[t * yt + d * yd + b * yb + j]
// when flags has RNN_WRITE_Y; states (h0, c0, yh, yc) at [d * sd + b * sb + j].
//
// rt: R transposed, (dirs, H, G * H); bias: (dirs, 2 * G * H) = Wb then Rb; peep: (dirs, 3 * H)
// (i, o, f); acts: (dirs, 3, 3) = per activation (f, g, h) its code (the epilogue's,
// or RNN_ACT_AFFINE, RNN_ACT_SCALED_TANH), alpha and beta. Inputs a kernel does not
// read (no bias...) are null with their flag clear.

#include <stowage/epilogue.cl.h>

#define RNN_BIAS 1
#define RNN_LENS 2
#define RNN_H0 4
#define RNN_C0 8
#define RNN_PEEPHOLES 16
#define RNN_WRITE_Y 32
#define RNN_CLIP 64
#define RNN_LINEAR_BEFORE_RESET 128
#define RNN_INPUT_FORGET 256

#define RNN_ACT_AFFINE 100
#define RNN_ACT_SCALED_TANH 101

inline float rnn_activate(__global const float* act, float v) {
  const int code = (int)act[0];
  if (code == RNN_ACT_AFFINE) return act[1] * v + act[2];
  if (code == RNN_ACT_SCALED_TANH) return act[1] * tanh(act[2] * v);
  return stowage_activate_code(v, code, act[1], act[2]);
}

// A gate's input after the cell clip (NaN stays NaN).
inline float rnn_clip(float v, int flags, float clip) {
  if (!(flags & RNN_CLIP)) return v;
  return v > clip ? clip : (v < -clip ? -clip : v);
}

// h . column u of R^T (rt: (H, G * H) of one direction): neighbouring units read
// neighbouring addresses.
inline float rnn_dot(__global const float* h, __global const float* rt, int u, int n, int gh) {
  float sum = 0.0f;
  for (int k = 0; k < n; ++k) sum = fma(h[k], rt[k * gh + u], sum);
  return sum;
}

// Wb + Rb of unit `u` of the gates (u = g * H + j), or 0 without a bias.
inline float rnn_bias(__global const float* bias, int flags, int d, int gh, int u) {
  if (!(flags & RNN_BIAS)) return 0.0f;
  __global const float* bd = bias + d * 2 * gh;
  return bd[u] + bd[gh + u];
}

// A gate's pre-activation for unit u: the input's projection, h R^T and both biases.
inline float rnn_gate(__global const float* xrow, __global const float* h, __global const float* rt,
                      __global const float* bias, int flags, int d, int gh, int hidden, int u) {
  return xrow[u] + rnn_dot(h, rt, u, hidden, gh) + rnn_bias(bias, flags, d, gh, u);
}

// The row length of the batch row b (steps without lens).
inline int rnn_length(__global const int* lens, int flags, int b, int steps) {
  return (flags & RNN_LENS) ? clamp(lens[b], 0, steps) : steps;
}

// Y's rows from len on are 0; the final state is 0 for a row of length 0.
inline void rnn_finish(__global float* y, __global float* yh, __global const float* h, int len, int steps, int hidden,
                       int d, int b, int yt, int yd, int yb, int so, int flags) {
  const int lid = get_local_id(0), nl = get_local_size(0);
  for (int j = lid; j < hidden; j += nl) {
    if (flags & RNN_WRITE_Y)
      for (int t = len; t < steps; ++t) y[t * yt + d * yd + b * yb + j] = 0.0f;
    yh[so + j] = len > 0 ? h[j] : 0.0f;
  }
}

__kernel void stowage_rnn_sequence(__global const float* xw, __global const float* rt, __global const float* bias,
                                   __global const int* lens, __global const float* h0, __global const float* acts,
                                   __global float* y, __global float* yh, __global float* scratch, int steps,
                                   int batch, int hidden, int dirs, int reverse, int xt, int xb, int yt, int yd, int yb,
                                   int sd, int sb, int flags, float clip) {
  const int b = get_global_id(1), d = get_global_id(2), lid = get_local_id(0), nl = get_local_size(0);
  const int gh = hidden, len = rnn_length(lens, flags, b, steps), backward = reverse || d == 1;
  const int so = d * sd + b * sb;
  __global float* hp = scratch + (d * batch + b) * hidden;
  __global float* hn = scratch + ((dirs + d) * batch + b) * hidden;
  __global const float* rd = rt + d * hidden * gh;
  __global const float* act = acts + d * 9;
  for (int j = lid; j < hidden; j += nl) hp[j] = (flags & RNN_H0) ? h0[so + j] : 0.0f;
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int s = 0; s < len; ++s) {
    const int t = backward ? len - 1 - s : s;
    __global const float* xrow = xw + (t * xt + b * xb) * dirs * gh + d * gh;
    for (int j = lid; j < hidden; j += nl) {
      const float v = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, j);
      const float h = rnn_activate(act, rnn_clip(v, flags, clip));
      hn[j] = h;
      if (flags & RNN_WRITE_Y) y[t * yt + d * yd + b * yb + j] = h;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global float* swap = hp;
    hp = hn;
    hn = swap;
  }
  rnn_finish(y, yh, hp, len, steps, hidden, d, b, yt, yd, yb, so, flags);
}

// GRU, gates z, r, h. Without linear_before_reset the candidate reads (r (.) h_{t-1})
// R_h^T, every unit's r: a first pass writes r (.) h_{t-1} to `scratch`'s third part.
__kernel void stowage_gru_sequence(__global const float* xw, __global const float* rt, __global const float* bias,
                                   __global const int* lens, __global const float* h0, __global const float* acts,
                                   __global float* y, __global float* yh, __global float* scratch, int steps,
                                   int batch, int hidden, int dirs, int reverse, int xt, int xb, int yt, int yd, int yb,
                                   int sd, int sb, int flags, float clip) {
  const int b = get_global_id(1), d = get_global_id(2), lid = get_local_id(0), nl = get_local_size(0);
  const int gh = 3 * hidden, len = rnn_length(lens, flags, b, steps), backward = reverse || d == 1;
  const int so = d * sd + b * sb, linear = flags & RNN_LINEAR_BEFORE_RESET;
  __global float* hp = scratch + (d * batch + b) * hidden;
  __global float* hn = scratch + ((dirs + d) * batch + b) * hidden;
  __global float* rh = scratch + ((2 * dirs + d) * batch + b) * hidden;
  __global const float* rd = rt + d * hidden * gh;
  __global const float* f = acts + d * 9;
  __global const float* g = f + 3;
  for (int j = lid; j < hidden; j += nl) hp[j] = (flags & RNN_H0) ? h0[so + j] : 0.0f;
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int s = 0; s < len; ++s) {
    const int t = backward ? len - 1 - s : s;
    __global const float* xrow = xw + (t * xt + b * xb) * dirs * gh + d * gh;
    if (!linear) {
      for (int j = lid; j < hidden; j += nl) {
        const int u = hidden + j;
        const float vr = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, u);
        rh[j] = rnn_activate(f, rnn_clip(vr, flags, clip)) * hp[j];
      }
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
    for (int j = lid; j < hidden; j += nl) {
      const int uz = j, ur = hidden + j, uh = 2 * hidden + j;
      const float vz = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, uz);
      const float z = rnn_activate(f, rnn_clip(vz, flags, clip));
      float vh;
      if (linear) {
        const float vr = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, ur);
        const float rg = rnn_activate(f, rnn_clip(vr, flags, clip));
        const float wb = (flags & RNN_BIAS) ? bias[d * 2 * gh + uh] : 0.0f;
        const float rb = (flags & RNN_BIAS) ? bias[d * 2 * gh + gh + uh] : 0.0f;
        vh = xrow[uh] + wb + rg * (rnn_dot(hp, rd, uh, hidden, gh) + rb);
      } else {
        vh = rnn_gate(xrow, rh, rd, bias, flags, d, gh, hidden, uh);
      }
      const float candidate = rnn_activate(g, rnn_clip(vh, flags, clip));
      const float h = (1.0f - z) * candidate + z * hp[j];
      hn[j] = h;
      if (flags & RNN_WRITE_Y) y[t * yt + d * yd + b * yb + j] = h;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global float* swap = hp;
    hp = hn;
    hn = swap;
  }
  rnn_finish(y, yh, hp, len, steps, hidden, d, b, yt, yd, yb, so, flags);
}

// LSTM, gates i, o, f, c; the cell state stays in yc (unit j only ever reads its own).
__kernel void stowage_lstm_sequence(__global const float* xw, __global const float* rt, __global const float* bias,
                                    __global const int* lens, __global const float* h0, __global const float* c0,
                                    __global const float* peep, __global const float* acts, __global float* y,
                                    __global float* yh, __global float* yc, __global float* scratch, int steps,
                                    int batch, int hidden, int dirs, int reverse, int xt, int xb, int yt, int yd,
                                    int yb, int sd, int sb, int flags, float clip) {
  const int b = get_global_id(1), d = get_global_id(2), lid = get_local_id(0), nl = get_local_size(0);
  const int gh = 4 * hidden, len = rnn_length(lens, flags, b, steps), backward = reverse || d == 1;
  const int so = d * sd + b * sb;
  __global float* hp = scratch + (d * batch + b) * hidden;
  __global float* hn = scratch + ((dirs + d) * batch + b) * hidden;
  __global float* cell = yc + so;
  __global const float* rd = rt + d * hidden * gh;
  __global const float* pd = peep + d * 3 * hidden;
  __global const float* f = acts + d * 9;
  __global const float* g = f + 3;
  __global const float* ha = f + 6;
  for (int j = lid; j < hidden; j += nl) {
    hp[j] = (flags & RNN_H0) ? h0[so + j] : 0.0f;
    cell[j] = (flags & RNN_C0) ? c0[so + j] : 0.0f;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int s = 0; s < len; ++s) {
    const int t = backward ? len - 1 - s : s;
    __global const float* xrow = xw + (t * xt + b * xb) * dirs * gh + d * gh;
    for (int j = lid; j < hidden; j += nl) {
      const int ui = j, uo = hidden + j, uf = 2 * hidden + j, uc = 3 * hidden + j;
      const float prev = cell[j];
      const int peeps = flags & RNN_PEEPHOLES;
      float vi = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, ui);
      if (peeps) vi += pd[j] * prev;
      const float ig = rnn_activate(f, rnn_clip(vi, flags, clip));
      float fg;
      if (flags & RNN_INPUT_FORGET) {
        fg = 1.0f - ig;
      } else {
        float vf = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, uf);
        if (peeps) vf += pd[2 * hidden + j] * prev;
        fg = rnn_activate(f, rnn_clip(vf, flags, clip));
      }
      const float vc = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, uc);
      const float c = fg * prev + ig * rnn_activate(g, rnn_clip(vc, flags, clip));
      float vo = rnn_gate(xrow, hp, rd, bias, flags, d, gh, hidden, uo);
      if (peeps) vo += pd[hidden + j] * c;
      const float h = rnn_activate(f, rnn_clip(vo, flags, clip)) * rnn_activate(ha, c);
      cell[j] = c;
      hn[j] = h;
      if (flags & RNN_WRITE_Y) y[t * yt + d * yd + b * yb + j] = h;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global float* swap = hp;
    hp = hn;
    hn = swap;
  }
  rnn_finish(y, yh, hp, len, steps, hidden, d, b, yt, yd, yb, so, flags);
  if (len == 0)
    for (int j = lid; j < hidden; j += nl) cell[j] = 0.0f;
}
