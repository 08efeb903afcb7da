// Loop helpers shared by the op families: broadcast iteration and the dtype switch for kernels.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "tapestry/core/fastmath.h"
#include "tapestry/core/scratch.h"
#include "tapestry/core/tape.h"
#include "tapestry/core/tensor.h"

namespace tapestry::ops::detail {

// Calls f(i, ia, ib) for every flat index i of `out`, with the flat indices ia and ib at which
// tensors of shapes a and b are read when broadcast to `out`.
template <class F>
void for_each_broadcast(const Shape& out, const Shape& a, const Shape& b, F&& f) {
  const int64_t n = out.numel();
  if (a == out && b == out) {
    for (int64_t i = 0; i < n; ++i) f(i, i, i);
    return;
  }
  const int nd = out.ndim();
  if (nd == 0) {
    f(0, 0, 0);
    return;
  }
  auto sa = broadcast_strides(a, out), sb = broadcast_strides(b, out);
  const int64_t inner = out[nd - 1], ia_step = sa[nd - 1], ib_step = sb[nd - 1];
  int64_t idx[kMaxDims] = {};
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) f(i + j, ia + j * ia_step, ib + j * ib_step);
    for (int k = nd - 2; k >= 0; --k) {  // odometer over the outer axes
      ia += sa[k];
      ib += sb[k];
      if (++idx[k] < out[k]) break;
      ia -= sa[k] * out[k];
      ib -= sb[k] * out[k];
      idx[k] = 0;
    }
  }
}

// exp, tanh and sigmoid for the kernels: the vectorisable fast versions in float32, the C
// library's in float64 (where gradient checks need every digit).
template <class T>
T exp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::exp(x);
  else
    return std::exp(x);
}
template <class T>
T tanh(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::tanh(x);
  else
    return std::tanh(x);
}
template <class T>
T sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return fastmath::sigmoid(x);
  } else {  // exp of a non-positive number only, so large |x| neither overflows nor loses digits
    if (x >= 0) return T(1) / (T(1) + std::exp(-x));
    const T e = std::exp(x);
    return e / (T(1) + e);
  }
}

// sum_i a[i] b[i] over independent lanes, which vectorise (a plain running sum is one dependent
// chain the compiler may not reorder); the lanes are added in a fixed order, so the result is
// deterministic.
template <class T>
T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
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

// max_i x[i] over independent lanes, which vectorise (-inf for n = 0; NaNs are skipped here and
// caught by softmax_rest).
template <class T>
T max_value(const T* __restrict x, int64_t n) {
  constexpr int kLanes = 64 / sizeof(T);
  const int64_t full = n / kLanes * kLanes;
  T lane[kLanes];
  for (int u = 0; u < kLanes; ++u) lane[u] = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < full; i += kLanes)
    for (int u = 0; u < kLanes; ++u) lane[u] = x[i + u] > lane[u] ? x[i + u] : lane[u];
  T m = -std::numeric_limits<T>::infinity();
  for (int u = 0; u < kLanes; ++u) m = lane[u] > m ? lane[u] : m;
  for (int64_t i = full; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// A softmax's normaliser around its maximum m = max_value(x, n), as rest = sum_i e^(x_i - m) - 1:
// the terms below m are summed in lanes (added in a fixed order), the ones equal to m counted
// apart, each exactly 1. logsumexp(x) = m + log1p(rest) then keeps a confident row's digits (a
// loss of 1e-13 beside logits of 30) that m + log(1 + rest) would round away.
template <class T>
T softmax_rest(const T* __restrict x, int64_t n, T m) {
  constexpr int kLanes = 64 / sizeof(T);
  // With m finite, x_i = m exactly where x_i - m = 0 (no flush-to-zero, no -ffinite-math-only),
  // and e^0 = 1 exactly (float's fast exp too), so subtracting `one` drops a maximum's term
  // without a branch and with the same result. GCC does not vectorise the loop when exp sits
  // under a select on x_i == m (it kept the exp's clamps as jumps, about 9x slower). An infinite
  // m (a row of -inf, or a +inf logit) takes the plain loop below.
  const int64_t full = std::isfinite(m) ? n / kLanes * kLanes : 0;
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

// A per-thread buffer of at least n elements for a kernel's temporaries (core/scratch.h); `slot`
// tells apart buffers a kernel needs at the same time.
template <int slot>
struct KernelSlot;
template <class T, int slot = 0>
T* scratch(size_t n) {
  return scratch_buffer<T, KernelSlot<slot>>(n);
}

// Throws DTypeError naming `op` when the operands' dtypes differ.
inline void same_dtype(const char* op, const Var& a, const Var& b) {
  check_same_dtype(op, {&a.value(), &b.value()});
}

// dst[i] += src[i] over two same-shaped tensors.
template <class T>
void accumulate(Tensor& dst, const Tensor& src) {
  T* d = dst.data<T>();
  const T* s = src.data<T>();
  for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += s[i];
}

inline void accumulate(Tensor& dst, const Tensor& src) {
  dispatch(dst.dtype(), [&](auto tag) { accumulate<decltype(tag)>(dst, src); });
}

}  // namespace tapestry::ops::detail
