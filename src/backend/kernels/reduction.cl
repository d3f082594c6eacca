// Reductions, the softmax family and normalizations on buffers (docs/operators.md).
//
// The row kernels see x as [outer, n, inner]: row r = o * inner + i holds the n
// values x[(o * n + j) * inner + i]. One work-group of SOFTMAX_LOCAL work-items
// works on a row; partial results are combined in a fixed tree order, so a result
// does not depend on timing. Launch: local = [SOFTMAX_LOCAL, 1],
// grid = [SOFTMAX_LOCAL, outer * inner].
//
// stowage_softmax: mode 0 softmax exp(v - max) / sum, 1 log-softmax
//   v - max - log(sum), 2 hardmax (1 at the first maximum, else 0). float32.
// stowage_reduce: y[row] = post(combine over j of pre(v)), typed by STOWAGE_T.
//   combine: 0 sum, 1 max, 2 min, 3 product. pre: 0 v, 1 |v|, 2 v * v, 3 exp(v - m)
//   with m the row's maximum (float). post: 0 none, 1 divide by n, 2 sqrt (float),
//   3 log (float), 4 log(s) + m (with pre 3: log-sum-exp).
// stowage_softmax_rows, stowage_reduce_rows, stowage_arg_reduce_rows,
//   stowage_normalize_rows: the same for rows of few values, or of
//   values far apart (a large inner): one work-item per row walking its values in
//   order, neighbouring work-items on neighbouring rows (neighbouring addresses).
//   Launch: grid = [rows rounded up to local0], local any.
// stowage_arg_reduce: y[row] (int64) = the index j of the row's maximum (op 0) or
//   minimum (op 1), the first of equal ones, or the last with select_last.
// stowage_normalize: y = (v - mean) * inv * scale + bias over each row (float32).
//   mode 0: mean and inv = 1 / sqrt(variance + eps) (two passes: the variance is the
//   mean of squared differences); 1: mean 0, inv = 1 / sqrt(mean(v * v) + eps)
//   (RMS); 2: mean 0, inv = 1 / sum |v| (L1); 3: mean 0, inv = 1 / sqrt(sum v * v)
//   (L2), inv 0 for a zero norm; 4: mean and inv = 1 / (sqrt(variance) + eps)
//   (MeanVarianceNormalization). flags: 1 scale, 2 bias, 4 write mean and inv to
//   mean_out[row], inv_out[row]. Value j of row r takes scale[((r % period) * n + j) / div] (and
//   bias alike): period 1, div 1 is per element of the row (LayerNorm); period C,
//   div n per channel (InstanceNorm).
//
// Elementwise (launch: grid = [count rounded up to local0], any local):
// stowage_lrn: y = x / (bias + alpha / size * sum of x^2 over the channels
//   c - (size - 1) / 2 .. c + size / 2)^beta, x [N, C, inner].
// stowage_batch_norm: y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c],
//   x [N, C, inner], the four per-channel tensors computed at run time.
#include <stowage/dtype.cl.h>

#ifndef SOFTMAX_LOCAL
#define SOFTMAX_LOCAL 64
#endif
#if SOFTMAX_LOCAL & (SOFTMAX_LOCAL - 1)
#error "SOFTMAX_LOCAL must be a power of two"
#endif
#define ROW_LOCAL SOFTMAX_LOCAL

#if STOWAGE_T_IS_FLOAT
#define T_LOWEST (-INFINITY)
#define T_HIGHEST INFINITY
#elif STOWAGE_T == 1
#define T_LOWEST INT_MIN
#define T_HIGHEST INT_MAX
#elif STOWAGE_T == 2
#define T_LOWEST LONG_MIN
#define T_HIGHEST LONG_MAX
#else
#define T_LOWEST 0
#define T_HIGHEST 255
#endif

#define COMBINE_SUM 0
#define COMBINE_MAX 1
#define COMBINE_MIN 2
#define COMBINE_PROD 3

// Where row r = o * inner + i of [outer, n, inner] starts: x[(o * n + j) * inner + i] is its value j.
static int row_start(int row, int n, int inner) {
  const int o = row / inner, i = row - o * inner;
  return o * n * inner + i;
}

// ---- fixed-order tree reductions over a work-group's partial values ----------

// The sum, or with take_max the maximum (fmax: NaN skipped), of p[0 .. ROW_LOCAL);
// every work-item of the work-group calls it.
static float row_tree(__local float* p, int t, int take_max) {
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = ROW_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step) p[t] = take_max ? fmax(p[t], p[t + step]) : p[t] + p[t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = p[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // p is reused next
  return r;
}

static float row_sum(__local float* p, int t) { return row_tree(p, t, 0); }

static float row_max(__local float* p, int t) { return row_tree(p, t, 1); }

static int row_min_int(__local int* p, int t) {
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = ROW_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step) p[t] = min(p[t], p[t + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const int r = p[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// The largest value of a float row (NaN-free rows; fmax skips NaN).
static float row_maximum(__global const float* x, int base, int n, int inner, __local float* p, int t) {
  float best = -INFINITY;
  for (int j = t; j < n; j += ROW_LOCAL) best = fmax(best, x[base + j * inner]);
  p[t] = best;
  return row_max(p, t);
}

// ---- softmax, log-softmax, hardmax ------------------------------------------

__kernel __attribute__((reqd_work_group_size(ROW_LOCAL, 1, 1))) void stowage_softmax(__global const float* x,
                                                                                     __global float* y, int n,
                                                                                     int inner, int mode) {
  __local float partial[ROW_LOCAL];
  __local int first[ROW_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  const int base = row_start(row, n, inner);
  const float best = row_maximum(x, base, n, inner, partial, t);
  // Every barrier is reached by the whole work-group whatever the mode (PoCL needs
  // them outside of branches); only the loops depend on it.
  int at = n;
  if (mode == 2)
    for (int j = t; j < n && at == n; j += ROW_LOCAL)
      if (x[base + j * inner] == best) at = j;
  first[t] = at;
  const int arg = row_min_int(first, t);
  float sum = 0.0f;
  if (mode != 2)
    for (int j = t; j < n; j += ROW_LOCAL) sum += exp(x[base + j * inner] - best);
  partial[t] = sum;
  sum = row_sum(partial, t);
  if (mode == 2) {
    for (int j = t; j < n; j += ROW_LOCAL) y[base + j * inner] = j == arg ? 1.0f : 0.0f;
  } else if (mode == 1) {
    const float shift = best + log(sum);
    for (int j = t; j < n; j += ROW_LOCAL) y[base + j * inner] = x[base + j * inner] - shift;
  } else {
    const float scale = 1.0f / sum;
    for (int j = t; j < n; j += ROW_LOCAL) y[base + j * inner] = exp(x[base + j * inner] - best) * scale;
  }
}

__kernel void stowage_softmax_rows(__global const float* x, __global float* y, int rows, int n, int inner,
                                   int mode) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const int base = row_start(row, n, inner);
  float best = -INFINITY;
  int arg = 0;
  for (int j = 0; j < n; ++j) {
    const float v = x[base + j * inner];
    if (v > best) best = v, arg = j;
  }
  if (mode == 2) {
    for (int j = 0; j < n; ++j) y[base + j * inner] = j == arg ? 1.0f : 0.0f;
    return;
  }
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) sum += exp(x[base + j * inner] - best);
  if (mode == 1) {
    const float shift = best + log(sum);
    for (int j = 0; j < n; ++j) y[base + j * inner] = x[base + j * inner] - shift;
    return;
  }
  const float scale = 1.0f / sum;
  for (int j = 0; j < n; ++j) y[base + j * inner] = exp(x[base + j * inner] - best) * scale;
}

// ---- general reductions -------------------------------------------------------

static stowage_t combine(int op, stowage_t a, stowage_t b) {
  switch (op) {
    // A NaN wins (a != a only for NaN), as numpy's max and min propagate it.
    case COMBINE_MAX:
      return (a > b || a != a) ? a : b;
    case COMBINE_MIN:
      return (a < b || a != a) ? a : b;
    case COMBINE_PROD:
      return a * b;
    default:
      return a + b;
  }
}

static stowage_t identity(int op) {
  switch (op) {
    case COMBINE_MAX:
      return T_LOWEST;
    case COMBINE_MIN:
      return T_HIGHEST;
    case COMBINE_PROD:
      return (stowage_t)1;
    default:
      return (stowage_t)0;
  }
}

static stowage_t row_combine(__local stowage_t* p, int t, int op) {
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = ROW_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step) p[t] = combine(op, p[t], p[t + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const stowage_t r = p[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

static stowage_t reduce_pre(stowage_t v, int pre, float shift) {
  if (pre == 1) v = v < (stowage_t)0 ? -v : v;
  if (pre == 2) v = v * v;
#if STOWAGE_T_IS_FLOAT
  if (pre == 3) v = exp(v - shift);
#endif
  return v;
}

static stowage_t reduce_post(stowage_t acc, int n, int post, float shift) {
  if (post == 1) acc = n > 0 ? acc / (stowage_t)n : acc;
#if STOWAGE_T_IS_FLOAT
  if (post == 1 && n == 0) acc = NAN;
  if (post == 2) acc = sqrt(acc);
  if (post == 3) acc = log(acc);
  if (post == 4) acc = log(acc) + shift;
#endif
  return acc;
}

// A row of -inf (or an empty one) has a log-sum-exp of -inf: exp(v - m) would be NaN.
static float safe_shift(float m) { return isinf(m) ? 0.0f : m; }

__kernel __attribute__((reqd_work_group_size(ROW_LOCAL, 1, 1))) void stowage_reduce(__global const stowage_t* x,
                                                                                    __global stowage_t* y, int n,
                                                                                    int inner, int op, int pre,
                                                                                    int post) {
  __local stowage_t partial[ROW_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  const int base = row_start(row, n, inner);
  float shift = 0.0f;
#if STOWAGE_T_IS_FLOAT
  // The maximum for log-sum-exp; the barriers run whatever pre is (see stowage_softmax).
  float best = -INFINITY;
  if (pre == 3)
    for (int j = t; j < n; j += ROW_LOCAL) best = fmax(best, x[base + j * inner]);
  partial[t] = best;
  shift = safe_shift(row_max(partial, t));
#endif
  stowage_t acc = identity(op);
  for (int j = t; j < n; j += ROW_LOCAL) acc = combine(op, acc, reduce_pre(x[base + j * inner], pre, shift));
  partial[t] = acc;
  acc = row_combine(partial, t, op);
  if (t == 0) y[row] = reduce_post(acc, n, post, shift);
}

__kernel void stowage_reduce_rows(__global const stowage_t* x, __global stowage_t* y, int rows, int n, int inner,
                                  int op, int pre, int post) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const int base = row_start(row, n, inner);
  float shift = 0.0f;
#if STOWAGE_T_IS_FLOAT
  if (pre == 3) {
    float best = -INFINITY;
    for (int j = 0; j < n; ++j) best = fmax(best, x[base + j * inner]);
    shift = safe_shift(best);
  }
#endif
  stowage_t acc = identity(op);
  for (int j = 0; j < n; ++j) acc = combine(op, acc, reduce_pre(x[base + j * inner], pre, shift));
  y[row] = reduce_post(acc, n, post, shift);
}

// ---- ArgMax, ArgMin -------------------------------------------------------------

// Whether (va, ja) comes before (vb, jb): the better value, or on a tie the first
// (or, with select_last, the last) index. Indices of n stand for "none yet".
static bool arg_better(stowage_t va, int ja, stowage_t vb, int jb, int n, int op, int select_last) {
  if (jb == n) return ja != n;
  if (ja == n) return false;
  if (va != vb) return op == 0 ? va > vb : va < vb;
  return select_last ? ja > jb : ja < jb;
}

__kernel __attribute__((reqd_work_group_size(ROW_LOCAL, 1, 1))) void stowage_arg_reduce(__global const stowage_t* x,
                                                                                        __global long* y, int n,
                                                                                        int inner, int op,
                                                                                        int select_last) {
  __local stowage_t value[ROW_LOCAL];
  __local int index[ROW_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  const int base = row_start(row, n, inner);
  stowage_t best = (stowage_t)0;
  int at = n;
  for (int j = t; j < n; j += ROW_LOCAL) {
    const stowage_t v = x[base + j * inner];
    if (arg_better(v, j, best, at, n, op, select_last)) best = v, at = j;
  }
  value[t] = best;
  index[t] = at;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = ROW_LOCAL / 2; step > 0; step >>= 1) {
    if (t < step && arg_better(value[t + step], index[t + step], value[t], index[t], n, op, select_last)) {
      value[t] = value[t + step];
      index[t] = index[t + step];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) y[row] = index[0] == n ? 0 : index[0];
}

__kernel void stowage_arg_reduce_rows(__global const stowage_t* x, __global long* y, int rows, int n, int inner,
                                      int op, int select_last) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const int base = row_start(row, n, inner);
  stowage_t best = (stowage_t)0;
  int at = n;
  for (int j = 0; j < n; ++j) {
    const stowage_t v = x[base + j * inner];
    if (arg_better(v, j, best, at, n, op, select_last)) best = v, at = j;
  }
  y[row] = at == n ? 0 : at;
}

// ---- normalizations ---------------------------------------------------------------

// The factor of a row from its sum of |d| or d * d (d: a value less the mean).
static float norm_inv(float acc, int n, float eps, int mode) {
  if (mode == 0 || mode == 1) return 1.0f / sqrt(acc / (float)n + eps);
  if (mode == 4) return 1.0f / (sqrt(acc / (float)n) + eps);
  if (mode == 2) return acc > 0.0f ? 1.0f / acc : 0.0f;  // a zero norm gives 0, as ONNX's reference does
  return acc > 0.0f ? 1.0f / sqrt(acc) : 0.0f;
}

static float norm_value(float v, float mean, float inv, __global const float* scale, __global const float* bias,
                        int k, int flags) {
  v = (v - mean) * inv;
  if (flags & 1) v *= scale[k];
  if (flags & 2) v += bias[k];
  return v;
}

__kernel __attribute__((reqd_work_group_size(ROW_LOCAL, 1, 1))) void stowage_normalize(
    __global const float* x, __global const float* scale, __global const float* bias, __global float* y,
    __global float* mean_out, __global float* inv_out, int n, int inner, int period, int div, float eps, int mode,
    int flags) {
  __local float partial[ROW_LOCAL];
  const int t = get_local_id(0), row = get_group_id(1);
  const int base = row_start(row, n, inner);
  float mean = 0.0f, inv;
  float sum = 0.0f;
  if (mode == 0 || mode == 4)  // the barriers run in every mode (see stowage_softmax)
    for (int j = t; j < n; j += ROW_LOCAL) sum += x[base + j * inner];
  partial[t] = sum;
  sum = row_sum(partial, t);
  if (mode == 0 || mode == 4) mean = sum / (float)n;
  float acc = 0.0f;
  for (int j = t; j < n; j += ROW_LOCAL) {
    const float d = x[base + j * inner] - mean;
    acc += mode == 2 ? fabs(d) : d * d;
  }
  partial[t] = acc;
  acc = row_sum(partial, t);
  inv = norm_inv(acc, n, eps, mode);
  const int first = (row % period) * n;
  for (int j = t; j < n; j += ROW_LOCAL)
    y[base + j * inner] = norm_value(x[base + j * inner], mean, inv, scale, bias, (first + j) / div, flags);
  if ((flags & 4) && t == 0) {
    mean_out[row] = mean;
    inv_out[row] = inv;
  }
}

__kernel void stowage_normalize_rows(__global const float* x, __global const float* scale,
                                     __global const float* bias, __global float* y, __global float* mean_out,
                                     __global float* inv_out, int rows, int n, int inner, int period, int div,
                                     float eps, int mode, int flags) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const int base = row_start(row, n, inner);
  float mean = 0.0f;
  if (mode == 0 || mode == 4) {
    for (int j = 0; j < n; ++j) mean += x[base + j * inner];
    mean /= (float)n;
  }
  float acc = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float d = x[base + j * inner] - mean;
    acc += mode == 2 ? fabs(d) : d * d;
  }
  const float inv = norm_inv(acc, n, eps, mode);
  const int first = (row % period) * n;
  for (int j = 0; j < n; ++j)
    y[base + j * inner] = norm_value(x[base + j * inner], mean, inv, scale, bias, (first + j) / div, flags);
  if (flags & 4) {
    mean_out[row] = mean;
    inv_out[row] = inv;
  }
}

// stowage_normalize_strided: stowage_normalize for rows whose values lie far apart
// (inner > 1: a LayerNormalization over the channels of an NCHW tensor). A
// work-group of [lx, ly] work-items (lx * ly <= STRIDED_MAX_GROUP, ly a power of two)
// takes lx neighbouring rows of one outer index, ly work-items a row: work-item
// (i, s) reads values s, s + ly, ... of row o * inner + g * lx + i, so that
// neighbouring work-items read neighbouring addresses, and the ly partial sums of a
// row are combined in a fixed tree order. Where a work-item per row (the _rows
// kernel) walks a row of n values alone, ly work-items share it: n / ly loads each
// instead of n, and as many more work-items in flight.
// Launch: local = [lx, ly, 1], grid = [ceil(inner / lx) * lx, ly, outer].
#define STRIDED_MAX_GROUP 256

// The sum over s of p[s * lx + i] (ly values, a power of two), for every i at once;
// every work-item of the work-group calls it, and p may be written again after it.
static float strided_sum(__local float* p, float v, int i, int s, int lx, int ly) {
  p[s * lx + i] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = ly / 2; step > 0; step >>= 1) {
    if (s < step) p[s * lx + i] += p[(s + step) * lx + i];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = p[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

__kernel void stowage_normalize_strided(__global const float* x, __global const float* scale,
                                        __global const float* bias, __global float* y, __global float* mean_out,
                                        __global float* inv_out, int n, int inner, int period, int div, float eps,
                                        int mode, int flags) {
  __local float partial[STRIDED_MAX_GROUP];
  const int i = get_local_id(0), s = get_local_id(1), lx = get_local_size(0), ly = get_local_size(1);
  if (lx * ly > STRIDED_MAX_GROUP) return;  // a launch too large (the whole work-group) writes nothing
  const int col = get_group_id(0) * lx + i, o = get_group_id(2);
  // No values for the work-items past the last row: a bound, not a branch around the
  // loops (with the branch, PoCL 3.1 wrote out of bounds where inner % lx != 0).
  const int live_n = col < inner ? n : 0;
  const int base = o * n * inner + col, row = o * inner + col;
  float sum = 0.0f;
  if (mode == 0 || mode == 4)  // the barriers run in every mode and work-item
    for (int j = s; j < live_n; j += ly) sum += x[base + j * inner];
  sum = strided_sum(partial, sum, i, s, lx, ly);
  const float mean = (mode == 0 || mode == 4) ? sum / (float)n : 0.0f;
  float acc = 0.0f;
  for (int j = s; j < live_n; j += ly) {
    const float d = x[base + j * inner] - mean;
    acc += mode == 2 ? fabs(d) : d * d;
  }
  const float inv = norm_inv(strided_sum(partial, acc, i, s, lx, ly), n, eps, mode);
  const int first = (row % period) * n;
  for (int j = s; j < live_n; j += ly)
    y[base + j * inner] = norm_value(x[base + j * inner], mean, inv, scale, bias, (first + j) / div, flags);
  if (live_n > 0 && (flags & 4) && s == 0) {
    mean_out[row] = mean;
    inv_out[row] = inv;
  }
}

__kernel void stowage_lrn(__global const float* x, __global float* y, int count, int C, int inner, int size,
                          float alpha, float beta, float bias) {
  const int e = get_global_id(0);
  if (e >= count) return;
  const int c = (e / inner) % C;
  const int lo = max(c - (size - 1) / 2, 0), hi = min(c + size / 2, C - 1);
  const int first = e - c * inner;
  float sum = 0.0f;
  for (int k = lo; k <= hi; ++k) {
    const float v = x[first + k * inner];
    sum += v * v;
  }
  y[e] = x[e] / pow(bias + alpha / (float)size * sum, beta);
}

__kernel void stowage_batch_norm(__global const float* x, __global const float* scale, __global const float* bias,
                                 __global const float* mean, __global const float* var, __global float* y, int count,
                                 int C, int inner, float eps) {
  const int e = get_global_id(0);
  if (e >= count) return;
  const int c = (e / inner) % C;
  y[e] = (x[e] - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c];
}
