// The elementwise loops of the ops, written once for float and double so that they vectorise:
// the float ones run through the table of core/cpu_kernels.h (compiled once per capability), the
// double ones (gradient checks) directly from the ops.
//
// Every function here is always inlined (TAPESTRY_LOOP): core/cpu_kernels_body.inc compiles them
// with AVX-512 in one file and without in another, and a copy emitted out of line would be one
// the linker could keep for every caller (see that file). For the same reason float code calls the
// compiler's builtins, not std::sqrt or std::numeric_limits.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tapestry/core/fastmath.h"

namespace tapestry::loops {

// Infinity without std::numeric_limits, whose functions are not always inlined.
template <class T>
constexpr T kInf = static_cast<T>(__builtin_inf());

// exp, tanh and sigmoid: the vectorisable fast versions in float32, the C library's in float64
// (where gradient checks need every digit).
template <class T>
TAPESTRY_LOOP T exp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::exp(x);
  else
    return std::exp(x);
}
template <class T>
TAPESTRY_LOOP T tanh(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::tanh(x);
  else
    return std::tanh(x);
}
template <class T>
TAPESTRY_LOOP T sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return fastmath::sigmoid(x);
  } else {  // exp of a non-positive number only, so large |x| neither overflows nor loses digits
    if (x >= 0) return T(1) / (T(1) + std::exp(-x));
    const T e = std::exp(x);
    return e / (T(1) + e);
  }
}
template <class T>
TAPESTRY_LOOP T sqrt(T x) {
  if constexpr (std::is_same_v<T, float>)
    return __builtin_sqrtf(x);
  else
    return __builtin_sqrt(x);
}

// y[i] = f(x[i]) for f = exp, tanh, sigmoid; y may be x.
template <class T>
TAPESTRY_LOOP void exp_array(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp(x[i]);
}
template <class T>
TAPESTRY_LOOP void tanh_array(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh(x[i]);
}
template <class T>
TAPESTRY_LOOP void sigmoid_array(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid(x[i]);
}

// sum_i a[i] b[i] over independent lanes, which vectorise (a plain running sum is one dependent
// chain the compiler may not reorder); the lanes are added in a fixed order, so the result is
// deterministic.
template <class T>
TAPESTRY_LOOP T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  constexpr int kLanes = 64 / sizeof(T);
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int u = 0; u < kLanes; ++u) acc[u] += a[i + u] * b[i + u];
  T sum = 0;
  for (int u = 0; u < kLanes; ++u) sum += acc[u];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// c (M,N) = alpha op(a) op(b) + beta c for a product too small for BLAS to pay its call (an
// attention head's scores, 10 x 10 x 16): each element one sum over k in order; beta = 0 never
// reads c. The reference the vector kernels of core/cpu_kernels_small.inc are tested against; they
// copy a transposed b into K x N floats of room.
inline constexpr int64_t kSmallGemmCols = 64;
template <class T>
TAPESTRY_LOOP void small_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                              const T* __restrict a, int64_t lda, const T* __restrict b,
                              int64_t ldb, T beta, T* __restrict c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      T& cij = c[i * ldc + j];
      cij = beta == T(0) ? alpha * sum : alpha * sum + beta * cij;
    }
}

// max_i x[i] over independent lanes, which vectorise (-inf for n = 0; NaNs are skipped here and
// caught by softmax_rest).
template <class T>
TAPESTRY_LOOP T max_value(const T* __restrict x, int64_t n) {
  constexpr int kLanes = 64 / sizeof(T);
  const int64_t full = n / kLanes * kLanes;
  T lane[kLanes];
  for (int u = 0; u < kLanes; ++u) lane[u] = -kInf<T>;
  for (int64_t i = 0; i < full; i += kLanes)
    for (int u = 0; u < kLanes; ++u) lane[u] = x[i + u] > lane[u] ? x[i + u] : lane[u];
  T m = -kInf<T>;
  for (int u = 0; u < kLanes; ++u) m = lane[u] > m ? lane[u] : m;
  for (int64_t i = full; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// A softmax's normaliser around its maximum m = max_value(x, n), as rest = sum_i e^(x_i - m) - 1:
// the terms below m are summed in lanes (added in a fixed order), the ones equal to m counted
// apart, each exactly 1. logsumexp(x) = m + log1p(rest) then keeps a confident row's digits (a
// loss of 1e-13 beside logits of 30) that m + log(1 + rest) would round away.
template <class T>
TAPESTRY_LOOP T softmax_rest(const T* __restrict x, int64_t n, T m) {
  constexpr int kLanes = 64 / sizeof(T);
  // With m finite, x_i = m exactly where x_i - m = 0 (no flush-to-zero, no -ffinite-math-only),
  // and e^0 = 1 exactly (float's fast exp too), so subtracting `one` drops a maximum's term
  // without a branch and with the same result. GCC does not vectorise the loop when exp sits
  // under a select on x_i == m (it kept the exp's clamps as jumps, about 9x slower). An infinite
  // m (a row of -inf, or a +inf logit) takes the plain loop below.
  const int64_t full = __builtin_isfinite(m) ? n / kLanes * kLanes : 0;
  T lane[kLanes] = {}, count[kLanes] = {};
  // A NaN (never equal to m) reaches exp and makes the result NaN, as it should.
  for (int64_t i = 0; i < full; i += kLanes)
    for (int u = 0; u < kLanes; ++u) {
      const T d = x[i + u] - m;
      const T one = d == T(0) ? T(1) : T(0);
      lane[u] += exp(d) - one;
      count[u] += one;
    }
  T rest = 0, maxima = 0;
  for (int u = 0; u < kLanes; ++u) rest += lane[u], maxima += count[u];
  for (int64_t i = full; i < n; ++i) {
    rest += x[i] == m ? T(0) : exp(x[i] - m);
    maxima += x[i] == m ? T(1) : T(0);
  }
  return rest + (maxima - 1);
}

// d[j] += g (e^((z[j] - m) - r) - u) for j in [0, n): a cross-entropy row's gradient away from
// its target, the probabilities recomputed from the row's maximum m and r = log1p(rest).
template <class T>
TAPESTRY_LOOP void softmax_grad(const T* __restrict z, T* __restrict d, int64_t n, T m, T r, T g,
                                T u) {
  for (int64_t j = 0; j < n; ++j) d[j] += g * (exp((z[j] - m) - r) - u);
}

// y[k] = tanh(p[k] + q[k]): additive attention's hidden layer, as its backward recomputes it.
template <class T>
TAPESTRY_LOOP void tanh_of_sum(const T* __restrict p, const T* __restrict q, T* __restrict y,
                               int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = tanh(p[k] + q[k]);
}

// sum_k v[k] tanh(p[k] + q[k]) in one pass, in the lanes of dot (the same order, so the same
// result as tanh_of_sum then dot): an additive attention score.
template <class T>
TAPESTRY_LOOP T tanh_dot(const T* __restrict p, const T* __restrict q, const T* __restrict v,
                         int64_t n) {
  constexpr int kLanes = 64 / sizeof(T);
  const int64_t full = n / kLanes * kLanes;
  T acc[kLanes] = {};
  for (int64_t k = 0; k < full; k += kLanes)
    for (int u = 0; u < kLanes; ++u) acc[u] += v[k + u] * tanh(p[k + u] + q[k + u]);
  T sum = 0;
  for (int u = 0; u < kLanes; ++u) sum += acc[u];
  for (int64_t k = full; k < n; ++k) sum += v[k] * tanh(p[k] + q[k]);
  return sum;
}

// e[j] = tanh_dot(p + j n, q, v, n) for each of `rows` rows of p (rows,n): one query's additive
// scores against every key.
template <class T>
TAPESTRY_LOOP void tanh_dots(const T* p, const T* q, const T* v, int64_t n, int64_t rows, T* e) {
  for (int64_t j = 0; j < rows; ++j) e[j] = tanh_dot(p + j * n, q, v, n);
}

// One row of a GRU step: x, w (3H) the input and hidden projections, bias (3H) the hidden bias,
// h (H) the state; out r, z, n, ghn = w_n + b_n, and y = h' = n + z (h - n). Loops over distinct
// arrays (restrict), so each vectorises.
template <class T>
TAPESTRY_LOOP void gru_row(const T* __restrict x, const T* __restrict w, const T* __restrict bias,
                           const T* __restrict h, T* __restrict r, T* __restrict z, T* __restrict n,
                           T* __restrict ghn, T* __restrict y, int64_t hs) {
  for (int64_t j = 0; j < hs; ++j) r[j] = sigmoid(x[j] + w[j] + bias[j]);
  for (int64_t j = 0; j < hs; ++j) z[j] = sigmoid(x[hs + j] + w[hs + j] + bias[hs + j]);
  for (int64_t j = 0; j < hs; ++j) ghn[j] = w[2 * hs + j] + bias[2 * hs + j];
  for (int64_t j = 0; j < hs; ++j) n[j] = tanh(x[2 * hs + j] + r[j] * ghn[j]);
  for (int64_t j = 0; j < hs; ++j) y[j] = n[j] + z[j] * (h[j] - n[j]);
}

// One row of an LSTM step: x, w (4H) the projections, bias (4H), c (H) the cell; out the gates
// g (4H) = [i, f, u, o] = [s, s, tanh, s](x + w + bias), c2 = f c + i u and h2 = o tanh(c2).
template <class T>
TAPESTRY_LOOP void lstm_row(const T* __restrict x, const T* __restrict w, const T* __restrict bias,
                            const T* __restrict c, T* __restrict g, T* __restrict c2,
                            T* __restrict h2, int64_t hs) {
  const int64_t g4 = 4 * hs;
  for (int64_t j = 0; j < g4; ++j) g[j] = x[j] + w[j] + bias[j];
  for (int64_t j = 0; j < 2 * hs; ++j) g[j] = sigmoid(g[j]);    // i, f
  for (int64_t j = 2 * hs; j < 3 * hs; ++j) g[j] = tanh(g[j]);  // u
  for (int64_t j = 3 * hs; j < g4; ++j) g[j] = sigmoid(g[j]);   // o
  for (int64_t j = 0; j < hs; ++j) c2[j] = g[hs + j] * c[j] + g[j] * g[2 * hs + j];
  for (int64_t j = 0; j < hs; ++j) h2[j] = g[3 * hs + j] * tanh(c2[j]);
}

// Adam's constants for one step (nn/optim.cpp): the moments' decays b1, b2 and weights c1 = 1-b1,
// c2 = 1-b2, the L2 weight decay wd and AdamW's shrink keep, and the bias corrections folded
// into two constants: step = lr sqrt(bc2) / bc1 and eps_hat = eps sqrt(bc2). The gradient read is
// scale * dx: a clipping factor applied here saves a pass that scales every gradient; with
// zero_grad, dx is zeroed once read, which saves the pass that zeroes it before the next backward.
template <class T>
struct AdamScalars {
  T b1, b2, c1, c2, wd, keep, step, eps_hat;
  T scale = 1;
  bool zero_grad = false;
};

// Adam's update on n elements: x -= lr (m / bc1) / (sqrt(v / bc2) + eps), written as the Adam
// paper writes its efficient form (the end of its section 2), x -= step m / (sqrt(v) + eps_hat):
// the same value, with one division and one square root an element where PyTorch's
// sqrt(v) / sqrt(bc2) + eps takes two divisions (the divider is the loop's slowest unit). Restrict
// pointers and no branch in the common loop, so it vectorises.
// kZero: dx is zeroed as it is read, while its line is in L1 (a second loop zeroing it, which GCC
// makes a memset, read the gradients again from L2 or memory: 2% of a `tiny` Transformer step).
template <class T, bool kZero>
TAPESTRY_LOOP void adam_pass(T* __restrict x, T* __restrict dx, T* __restrict m, T* __restrict v,
                             int64_t n, const AdamScalars<T>& k) {
  if (k.keep == T(1) && k.wd == T(0)) {
    for (int64_t j = 0; j < n; ++j) {
      const T g = k.scale * dx[j];
      if constexpr (kZero) dx[j] = T(0);
      m[j] = k.b1 * m[j] + k.c1 * g;
      v[j] = k.b2 * v[j] + k.c2 * g * g;
      x[j] -= k.step * (m[j] / (sqrt(v[j]) + k.eps_hat));
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      x[j] *= k.keep;
      const T g = k.scale * dx[j] + k.wd * x[j];
      if constexpr (kZero) dx[j] = T(0);
      m[j] = k.b1 * m[j] + k.c1 * g;
      v[j] = k.b2 * v[j] + k.c2 * g * g;
      x[j] -= k.step * (m[j] / (sqrt(v[j]) + k.eps_hat));
    }
  }
}
// adam_pass with the gradient zeroed or kept, as k.zero_grad says.
template <class T>
TAPESTRY_LOOP void adam_update(T* __restrict x, T* __restrict dx, T* __restrict m, T* __restrict v,
                               int64_t n, const AdamScalars<T>& k) {
  if (k.zero_grad)
    adam_pass<T, true>(x, dx, m, v, n, k);
  else
    adam_pass<T, false>(x, dx, m, v, n, k);
}

}  // namespace tapestry::loops
