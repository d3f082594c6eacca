// Elementwise operators on float32 buffers (docs/operators.md).
//
// Binary op codes: STOWAGE_OP_ADD, _SUB, _MUL, _DIV. Every kernel ends in the
// activation of <stowage/epilogue.cl.h> (act, act_a, act_b; STOWAGE_ACT_NONE for none).
//
// stowage_binary_flat: y[i] = act(a[i] op b[i]), i < n (equal shapes).
//   Launch: grid = [n rounded up to local0].
// stowage_binary: numpy broadcasting over up to 6 dimensions: over the index space
//   [d0, .., d5], y[y_off + sum ik syk] = a[a_off + sum ik sak] op b[b_off + sum ik sbk]
//   (a stride of 0 broadcasts). The Python layer merges dimensions so that few
//   remain, and launches once per index of the dimensions beyond 6.
//   Launch: grid = [d5 rounded up to local0, d4 rounded up to local1, d0 d1 d2 d3].
// stowage_unary: y[i] = act(x[i]), i < n.  Launch as stowage_binary_flat.
// stowage_channel_affine: y = act(x * scale[c] + shift[c]) on [N, C, HW]
//   (BatchNormalization with its statistics folded into scale and shift).
//   Launch: grid = [HW rounded up to local0, C rounded up to local1, N].
// Kernels read and write element i in one work-item, so y may be a or x (in place).
#include <stowage/epilogue.cl.h>
#include <stowage/grid6.cl.h>

#define STOWAGE_OP_ADD 0
#define STOWAGE_OP_SUB 1
#define STOWAGE_OP_MUL 2
#define STOWAGE_OP_DIV 3

inline float stowage_binary_op(float a, float b, int op) {
  switch (op) {
    case STOWAGE_OP_SUB:
      return a - b;
    case STOWAGE_OP_MUL:
      return a * b;
    case STOWAGE_OP_DIV:
      return a / b;
    default:
      return a + b;
  }
}

__kernel void stowage_binary_flat(__global const float* a, __global const float* b, __global float* y, int n, int op,
                                  int act, float act_a, float act_b) {
  const int i = get_global_id(0);
  if (i < n) y[i] = stowage_activate(stowage_binary_op(a[i], b[i], op), act, act_a, act_b);
}

__kernel void stowage_binary(__global const float* a, __global const float* b, __global float* y, int op, int d0,
                             int d1, int d2, int d3, int d4, int d5, int sa0, int sa1, int sa2, int sa3, int sa4,
                             int sa5, int sb0, int sb1, int sb2, int sb3, int sb4, int sb5, int sy0, int sy1, int sy2,
                             int sy3, int sy4, int sy5, int a_off, int b_off, int y_off, int act, float act_a,
                             float act_b) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int ia = stowage_offset6(at, a_off, sa0, sa1, sa2, sa3, sa4, sa5);
  const int ib = stowage_offset6(at, b_off, sb0, sb1, sb2, sb3, sb4, sb5);
  y[stowage_offset6(at, y_off, sy0, sy1, sy2, sy3, sy4, sy5)] =
      stowage_activate(stowage_binary_op(a[ia], b[ib], op), act, act_a, act_b);
}

__kernel void stowage_unary(__global const float* x, __global float* y, int n, int act, float act_a, float act_b) {
  const int i = get_global_id(0);
  if (i < n) y[i] = stowage_activate(x[i], act, act_a, act_b);
}

__kernel void stowage_channel_affine(__global const float* x, __global const float* scale, __global const float* shift,
                                     __global float* y, int C, int HW, int act, float act_a, float act_b) {
  const int i = get_global_id(0), c = get_global_id(1), img = get_global_id(2);
  if (i >= HW || c >= C) return;
  const int idx = (img * C + c) * HW + i;
  y[idx] = stowage_activate(fma(x[idx], scale[c], shift[c]), act, act_a, act_b);
}
