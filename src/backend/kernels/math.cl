// Typed elementwise math (docs/operators.md): unary functions, binary arithmetic,
// comparisons and logic with numpy broadcasting, Where, Cast.
//
// A unit is specialised by STOWAGE_T (the operands' element type) and STOWAGE_U (the
// result's) of <stowage/dtype.cl.h>: float32, int32, int64, bool (uchar 0 or 1).
//
// stowage_math_unary: y[i] = f(x[i]), i < n; f by op code (STOWAGE_UN_*), with the
//   parameters a and b (Shrink's lambd and bias, Swish's alpha, IsInf's
//   detect_negative and detect_positive). Float to float: every function; float to
//   bool: IsNaN, IsInf; int to int: Abs, Neg, Sign; bool to bool: Not.
//   Launch: grid = [n rounded up to local0].
// stowage_math_binary: y = a op b (STOWAGE_BIN_*) with numpy broadcasting over up to 6
//   dimensions, strides and launch as stowage_binary of elementwise.cl. U is T for
//   arithmetic and logic, bool for comparisons. Integer division and remainder by 0
//   give 0 (ONNX leaves them undefined; this keeps the device from trapping).
// stowage_math_where: y = c ? x : y over 6 broadcast dimensions, c bool, x, y, out T.
// stowage_cast: y[i] = (U) x[i], i < n: float to int truncates toward zero, to bool
//   is x != 0.  Launch as stowage_math_unary.
#include <stowage/dtype.cl.h>
#include <stowage/grid6.cl.h>

#define STOWAGE_UN_ABS 0
#define STOWAGE_UN_NEG 1
#define STOWAGE_UN_SIGN 2
#define STOWAGE_UN_CEIL 3
#define STOWAGE_UN_FLOOR 4
#define STOWAGE_UN_ROUND 5
#define STOWAGE_UN_SQRT 6
#define STOWAGE_UN_RECIPROCAL 7
#define STOWAGE_UN_EXP 8
#define STOWAGE_UN_LOG 9
#define STOWAGE_UN_ERF 10
#define STOWAGE_UN_SIN 11
#define STOWAGE_UN_COS 12
#define STOWAGE_UN_TAN 13
#define STOWAGE_UN_ASIN 14
#define STOWAGE_UN_ACOS 15
#define STOWAGE_UN_ATAN 16
#define STOWAGE_UN_SINH 17
#define STOWAGE_UN_COSH 18
#define STOWAGE_UN_ASINH 19
#define STOWAGE_UN_ACOSH 20
#define STOWAGE_UN_ATANH 21
#define STOWAGE_UN_SHRINK 22
#define STOWAGE_UN_SWISH 23
#define STOWAGE_UN_ISNAN 24
#define STOWAGE_UN_ISINF 25
#define STOWAGE_UN_NOT 26

#define STOWAGE_BIN_ADD 0
#define STOWAGE_BIN_SUB 1
#define STOWAGE_BIN_MUL 2
#define STOWAGE_BIN_DIV 3
#define STOWAGE_BIN_POW 4
#define STOWAGE_BIN_MOD 5
#define STOWAGE_BIN_FMOD 6
#define STOWAGE_BIN_MIN 7
#define STOWAGE_BIN_MAX 8
#define STOWAGE_BIN_PRELU 9
#define STOWAGE_BIN_EQUAL 10
#define STOWAGE_BIN_LESS 11
#define STOWAGE_BIN_LESS_EQUAL 12
#define STOWAGE_BIN_GREATER 13
#define STOWAGE_BIN_GREATER_EQUAL 14
#define STOWAGE_BIN_AND 15
#define STOWAGE_BIN_OR 16
#define STOWAGE_BIN_XOR 17
#define STOWAGE_BIN_SHIFT_LEFT 18
#define STOWAGE_BIN_SHIFT_RIGHT 19

// ---- unary ------------------------------------------------------------------------

#if STOWAGE_T == 0 && STOWAGE_U == 0
inline float stowage_math_unary_op(float v, int op, float a, float b) {
  switch (op) {
    case STOWAGE_UN_ABS: return fabs(v);
    case STOWAGE_UN_NEG: return -v;
    case STOWAGE_UN_SIGN: return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v);  // keeps 0 and NaN
    case STOWAGE_UN_CEIL: return ceil(v);
    case STOWAGE_UN_FLOOR: return floor(v);
    case STOWAGE_UN_ROUND: return rint(v);  // halves to even
    case STOWAGE_UN_SQRT: return sqrt(v);
    case STOWAGE_UN_RECIPROCAL: return 1.0f / v;
    case STOWAGE_UN_EXP: return exp(v);
    case STOWAGE_UN_LOG: return log(v);
    case STOWAGE_UN_ERF: return erf(v);
    case STOWAGE_UN_SIN: return sin(v);
    case STOWAGE_UN_COS: return cos(v);
    case STOWAGE_UN_TAN: return tan(v);
    case STOWAGE_UN_ASIN: return asin(v);
    case STOWAGE_UN_ACOS: return acos(v);
    case STOWAGE_UN_ATAN: return atan(v);
    case STOWAGE_UN_SINH: return sinh(v);
    case STOWAGE_UN_COSH: return cosh(v);
    case STOWAGE_UN_ASINH: return asinh(v);
    case STOWAGE_UN_ACOSH: return acosh(v);
    case STOWAGE_UN_ATANH: return atanh(v);
    case STOWAGE_UN_SHRINK: return v < -a ? v + b : (v > a ? v - b : 0.0f);
    case STOWAGE_UN_SWISH: return v / (1.0f + exp(-a * v));
    default: return v;
  }
}
#elif STOWAGE_T == 0 && STOWAGE_U == 3
inline uchar stowage_math_unary_op(float v, int op, float a, float b) {
  if (op == STOWAGE_UN_ISINF) return isinf(v) && ((v < 0.0f && a != 0.0f) || (v > 0.0f && b != 0.0f));
  return isnan(v) ? 1 : 0;
}
#elif STOWAGE_T == STOWAGE_U
inline stowage_t stowage_math_unary_op(stowage_t v, int op, float a, float b) {
  switch (op) {
    case STOWAGE_UN_ABS: return v < 0 ? -v : v;
    case STOWAGE_UN_NEG: return -v;
    case STOWAGE_UN_SIGN: return v > 0 ? 1 : (v < 0 ? -1 : 0);
    case STOWAGE_UN_NOT: return v == 0;
    default: return v;
  }
}
#endif

#if STOWAGE_T == STOWAGE_U || (STOWAGE_T == 0 && STOWAGE_U == 3)
__kernel void stowage_math_unary(__global const stowage_t* x, __global stowage_u* y, int n, int op, float a, float b) {
  const int i = get_global_id(0);
  if (i < n) y[i] = stowage_math_unary_op(x[i], op, a, b);
}
#endif

// ---- binary -----------------------------------------------------------------------

#if STOWAGE_T_IS_FLOAT
inline float stowage_math_div(float a, float b) { return a / b; }

inline float stowage_math_pow(float a, float b) { return pow(a, b); }

// Python's remainder: the sign of the divisor (a zero takes b's sign too).
inline float stowage_math_mod(float a, float b) {
  float r = fmod(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
  return r == 0.0f ? copysign(0.0f, b) : r;
}

inline float stowage_math_fmod(float a, float b) { return fmod(a, b); }

// numpy's minimum and maximum: a NaN operand gives NaN.
inline float stowage_math_min(float a, float b) { return isnan(a) || isnan(b) ? a + b : fmin(a, b); }

inline float stowage_math_max(float a, float b) { return isnan(a) || isnan(b) ? a + b : fmax(a, b); }
#else
// Truncating division; by 0 gives 0, and a signed type's division by -1 negates (the
// most negative value / -1 would trap on some devices). uchar is unsigned.
inline stowage_t stowage_math_div(stowage_t a, stowage_t b) {
  if (b == 0) return 0;
#if STOWAGE_T != STOWAGE_DT_BOOL
  if (b == (stowage_t)-1) return (stowage_t)(0 - a);
#endif
  return a / b;
}

inline stowage_t stowage_math_fmod(stowage_t a, stowage_t b) {
  if (b == 0) return 0;
#if STOWAGE_T != STOWAGE_DT_BOOL
  if (b == (stowage_t)-1) return 0;
#endif
  return a % b;
}

inline stowage_t stowage_math_mod(stowage_t a, stowage_t b) {
  stowage_t r = stowage_math_fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Integer power by squaring; a negative exponent gives the truncated 1 / a^-b.
inline stowage_t stowage_math_pow(stowage_t a, stowage_t b) {
  if (b < 0) return a == 1 ? 1 : (a == (stowage_t)-1 ? ((b & 1) ? a : 1) : 0);
  stowage_t result = 1;
  while (b > 0) {
    if (b & 1) result *= a;
    a *= a;
    b >>= 1;
  }
  return result;
}

inline stowage_t stowage_math_min(stowage_t a, stowage_t b) { return a < b ? a : b; }

inline stowage_t stowage_math_max(stowage_t a, stowage_t b) { return a > b ? a : b; }
#endif

inline stowage_u stowage_math_binary_op(stowage_t a, stowage_t b, int op) {
  switch (op) {
    case STOWAGE_BIN_ADD: return (stowage_u)(a + b);
    case STOWAGE_BIN_SUB: return (stowage_u)(a - b);
    case STOWAGE_BIN_MUL: return (stowage_u)(a * b);
    case STOWAGE_BIN_DIV: return (stowage_u)stowage_math_div(a, b);
    case STOWAGE_BIN_POW: return (stowage_u)stowage_math_pow(a, b);
    case STOWAGE_BIN_MOD: return (stowage_u)stowage_math_mod(a, b);
    case STOWAGE_BIN_FMOD: return (stowage_u)stowage_math_fmod(a, b);
    case STOWAGE_BIN_MIN: return (stowage_u)stowage_math_min(a, b);
    case STOWAGE_BIN_MAX: return (stowage_u)stowage_math_max(a, b);
    case STOWAGE_BIN_PRELU: return (stowage_u)(a < 0 ? a * b : a);
    case STOWAGE_BIN_EQUAL: return (stowage_u)(a == b);
    case STOWAGE_BIN_LESS: return (stowage_u)(a < b);
    case STOWAGE_BIN_LESS_EQUAL: return (stowage_u)(a <= b);
    case STOWAGE_BIN_GREATER: return (stowage_u)(a > b);
    case STOWAGE_BIN_GREATER_EQUAL: return (stowage_u)(a >= b);
    case STOWAGE_BIN_AND: return (stowage_u)(a != 0 && b != 0);
    case STOWAGE_BIN_OR: return (stowage_u)(a != 0 || b != 0);
    case STOWAGE_BIN_XOR: return (stowage_u)((a != 0) != (b != 0));
#if !STOWAGE_T_IS_FLOAT
    // ONNX leaves shifts by the width or more undefined; this gives 0.
    case STOWAGE_BIN_SHIFT_LEFT: return (stowage_u)(b < 0 || b >= 8 * (stowage_t)sizeof(stowage_t) ? 0 : a << b);
    case STOWAGE_BIN_SHIFT_RIGHT: return (stowage_u)(b < 0 || b >= 8 * (stowage_t)sizeof(stowage_t) ? 0 : a >> b);
#endif
    default: return (stowage_u)a;
  }
}

__kernel void stowage_math_binary(__global const stowage_t* a, __global const stowage_t* b, __global stowage_u* y,
                                  int op, int d0, int d1, int d2, int d3, int d4, int d5, int sa0, int sa1, int sa2,
                                  int sa3, int sa4, int sa5, int sb0, int sb1, int sb2, int sb3, int sb4, int sb5,
                                  int sy0, int sy1, int sy2, int sy3, int sy4, int sy5, int a_off, int b_off,
                                  int y_off) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int ia = stowage_offset6(at, a_off, sa0, sa1, sa2, sa3, sa4, sa5);
  const int ib = stowage_offset6(at, b_off, sb0, sb1, sb2, sb3, sb4, sb5);
  y[stowage_offset6(at, y_off, sy0, sy1, sy2, sy3, sy4, sy5)] = stowage_math_binary_op(a[ia], b[ib], op);
}

// ---- Where, Cast ------------------------------------------------------------------

__kernel void stowage_math_where(__global const uchar* c, __global const stowage_t* x, __global const stowage_t* y,
                                 __global stowage_t* out, int d0, int d1, int d2, int d3, int d4, int d5, int sc0,
                                 int sc1, int sc2, int sc3, int sc4, int sc5, int sx0, int sx1, int sx2, int sx3,
                                 int sx4, int sx5, int sy0, int sy1, int sy2, int sy3, int sy4, int sy5, int so0,
                                 int so1, int so2, int so3, int so4, int so5, int c_off, int x_off, int y_off,
                                 int o_off) {
  const stowage_index6 at = stowage_grid_index6(d1, d2, d3, d4, d5);
  if (!at.inside) return;
  const int ic = stowage_offset6(at, c_off, sc0, sc1, sc2, sc3, sc4, sc5);
  const int ix = stowage_offset6(at, x_off, sx0, sx1, sx2, sx3, sx4, sx5);
  const int iy = stowage_offset6(at, y_off, sy0, sy1, sy2, sy3, sy4, sy5);
  out[stowage_offset6(at, o_off, so0, so1, so2, so3, so4, so5)] = c[ic] ? x[ix] : y[iy];
}

__kernel void stowage_cast(__global const stowage_t* x, __global stowage_u* y, int n) {
  const int i = get_global_id(0);
#if STOWAGE_U == 3
  if (i < n) y[i] = x[i] != (stowage_t)0;
#else
  if (i < n) y[i] = (stowage_u)x[i];
#endif
}
