/* The fused epilogue of Stowage's operator kernels, and the naming of their
 * specialisations (docs/operators.md).
 *
 * A kernel that ends in an epilogue takes `int flags, int act, float act_a,
 * float act_b` and computes, per output value v (the accumulator):
 *   v += bias            when flags & STOWAGE_EPI_BIAS      (one value per output channel)
 *   v += residual        when flags & STOWAGE_EPI_RESIDUAL  (a tensor of the output's shape)
 * A kernel that says so also takes STOWAGE_EPI_BIAS_AFTER_WEIGHTS: its biases follow
 * its weights in the weights' buffer, and its bias argument may be null (a pointer
 * argument costs NVIDIA's host about 1 us a launch, docs/vm_overhead.md).
 *   v  = activation(v)   act: STOWAGE_ACT_NONE, _RELU, _CLIP (min a, max b),
 *                        _HARDSWISH (v * clamp(a v + b, 0, 1)), _SIGMOID,
 *                        _HARDSIGMOID (clamp(a v + b, 0, 1)), _LEAKY_RELU (slope a),
 *                        _TANH, _GELU (exact, with erf), _GELU_TANH (tanh approximation),
 *                        _ELU (alpha a), _SILU (v * sigmoid(v)), _SOFTPLUS, _MISH,
 *                        _SELU (alpha a, gamma b), _CELU (alpha a),
 *                        _THRESHOLDED_RELU (alpha a), _SOFTSIGN
 * The activation is a runtime argument, so one program serves every epilogue;
 * a unit compiled with `#define STOWAGE_FIXED_ACT <code>` in front ignores the
 * argument and keeps only that activation's code.
 *
 * A unit specialised by other `#define`s in front of the source gets kernel
 * names of its own (the Python layer renames its kernels, e.g. stowage_conv2d to
 * stowage_conv2d_m32_n32), so that it can share a module with the default unit.
 */
#ifndef STOWAGE_EPILOGUE_CL_H
#define STOWAGE_EPILOGUE_CL_H

#define STOWAGE_EPI_BIAS 1
#define STOWAGE_EPI_RESIDUAL 2
#define STOWAGE_EPI_BIAS_AFTER_WEIGHTS 4

#define STOWAGE_ACT_NONE 0
#define STOWAGE_ACT_RELU 1
#define STOWAGE_ACT_CLIP 2
#define STOWAGE_ACT_HARDSWISH 3
#define STOWAGE_ACT_SIGMOID 4
#define STOWAGE_ACT_HARDSIGMOID 5
#define STOWAGE_ACT_LEAKY_RELU 6
#define STOWAGE_ACT_TANH 7
#define STOWAGE_ACT_GELU 8
#define STOWAGE_ACT_GELU_TANH 9
#define STOWAGE_ACT_ELU 10
#define STOWAGE_ACT_SILU 11
#define STOWAGE_ACT_SOFTPLUS 12
#define STOWAGE_ACT_MISH 13
#define STOWAGE_ACT_SELU 14
#define STOWAGE_ACT_CELU 15
#define STOWAGE_ACT_THRESHOLDED_RELU 16
#define STOWAGE_ACT_SOFTSIGN 17

#ifdef STOWAGE_FIXED_ACT
#define STOWAGE_ACT_CODE(act) (STOWAGE_FIXED_ACT)
#else
#define STOWAGE_ACT_CODE(act) (act)
#endif

/* The input map of the convolution and GEMM kernels: a unit built with
 * STOWAGE_IN_AFFINE 1 reads its input through a per-channel affine map and an
 * activation (a BatchNormalization and ReLU before the conv, a squeeze-and-excitation
 * scale). STOWAGE_IN_ACT <code> fixes that activation when the unit is built (the
 * in_act argument is then not read), so that no switch runs per value read. */
#ifndef STOWAGE_IN_AFFINE
#define STOWAGE_IN_AFFINE 0
#endif
#ifdef STOWAGE_IN_ACT
#define STOWAGE_IN_ACT_CODE(act) (STOWAGE_IN_ACT)
#else
#define STOWAGE_IN_ACT_CODE(act) (act)
#endif

/* The activation `act` at run time, whatever STOWAGE_FIXED_ACT says (a fused kernel's
 * inner activation, e.g. the depthwise half of a depthwise + pointwise kernel). Not
 * forced inline: PoCL then ran EfficientNet-B0 8-10% faster but took 6x as long to
 * compile ResNet-18's units (44 s -> 4 min 38 s on two cores). */
inline float stowage_activate_code(float v, int act, float a, float b) {
  switch (act) {
    case STOWAGE_ACT_RELU: return fmax(v, 0.0f);
    case STOWAGE_ACT_CLIP: return fmin(fmax(v, a), b);
    case STOWAGE_ACT_HARDSWISH: return v * clamp(fma(a, v, b), 0.0f, 1.0f);
    case STOWAGE_ACT_SIGMOID: return 1.0f / (1.0f + exp(-v));
    case STOWAGE_ACT_HARDSIGMOID: return clamp(fma(a, v, b), 0.0f, 1.0f);
    case STOWAGE_ACT_LEAKY_RELU: return v >= 0.0f ? v : a * v;
    case STOWAGE_ACT_TANH: return tanh(v);
    case STOWAGE_ACT_GELU: return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
    case STOWAGE_ACT_GELU_TANH: return 0.5f * v * (1.0f + tanh(0.79788456080286536f * fma(0.044715f * v, v * v, v)));
    case STOWAGE_ACT_ELU: return v >= 0.0f ? v : a * (exp(v) - 1.0f);
    case STOWAGE_ACT_SILU: return v / (1.0f + exp(-v));
    case STOWAGE_ACT_SOFTPLUS: return v > 20.0f ? v : log1p(exp(v));
    case STOWAGE_ACT_MISH: return v * tanh(v > 20.0f ? v : log1p(exp(v)));
    case STOWAGE_ACT_SELU: return v > 0.0f ? b * v : b * a * (exp(v) - 1.0f);
    case STOWAGE_ACT_CELU: return fmax(0.0f, v) + fmin(0.0f, a * (exp(v / a) - 1.0f));
    case STOWAGE_ACT_THRESHOLDED_RELU: return v > a ? v : 0.0f;
    case STOWAGE_ACT_SOFTSIGN: return v / (1.0f + fabs(v));
    default: return v;
  }
}

inline float4 stowage_activate_code4(float4 v, int act, float a, float b) {
  switch (act) {
    case STOWAGE_ACT_RELU: return fmax(v, (float4)(0.0f));
    case STOWAGE_ACT_CLIP: return fmin(fmax(v, (float4)(a)), (float4)(b));
    case STOWAGE_ACT_HARDSWISH: return v * clamp(fma((float4)(a), v, (float4)(b)), 0.0f, 1.0f);
    case STOWAGE_ACT_SIGMOID: return 1.0f / (1.0f + exp(-v));
    case STOWAGE_ACT_HARDSIGMOID: return clamp(fma((float4)(a), v, (float4)(b)), 0.0f, 1.0f);
    case STOWAGE_ACT_NONE: return v;
    default:  /* the rarer activations, one lane at a time */
      return (float4)(stowage_activate_code(v.x, act, a, b), stowage_activate_code(v.y, act, a, b),
                      stowage_activate_code(v.z, act, a, b), stowage_activate_code(v.w, act, a, b));
  }
}

/* The epilogue's activation: fixed by STOWAGE_FIXED_ACT where a unit defines it. */
inline float stowage_activate(float v, int act, float a, float b) {
  return stowage_activate_code(v, STOWAGE_ACT_CODE(act), a, b);
}

inline float4 stowage_activate4(float4 v, int act, float a, float b) {
  return stowage_activate_code4(v, STOWAGE_ACT_CODE(act), a, b);
}

#endif
