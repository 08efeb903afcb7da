// Loop helpers shared by the op families: broadcast iteration and the dtype switch for kernels.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/scratch.h"
#include "tapestry/core/tape.h"
#include "tapestry/core/tensor.h"
#include "tapestry/core/vector_loops.h"

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

// exp, tanh, sigmoid and dot one element or row at a time, compiled where they are used
// (core/vector_loops.h).
using loops::dot;
using loops::exp;
using loops::sigmoid;
using loops::tanh;

// sum_i term(i) for i < n over kLanes independent lanes of Acc, which vectorise where one running
// sum is a chain of dependent adds; the lanes are added in order, then the last n % kLanes terms,
// so the result is deterministic.
template <class Acc, int kLanes, class Term>
Acc lane_sum(int64_t n, Term term) {
  Acc lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int u = 0; u < kLanes; ++u) lane[u] += term(i + u);
  Acc sum = 0;
  for (int u = 0; u < kLanes; ++u) sum += lane[u];
  for (; i < n; ++i) sum += term(i);
  return sum;
}

// A row's maximum and softmax normaliser (core/vector_loops.h): in float through the kernels of
// the CPU in use (core/cpu_kernels.h), in double directly.
template <class T>
T max_value(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    return cpu::kernels().max_value(x, n);
  else
    return loops::max_value(x, n);
}
template <class T>
T softmax_rest(const T* x, int64_t n, T m) {
  if constexpr (std::is_same_v<T, float>)
    return cpu::kernels().softmax_rest(x, n, m);
  else
    return loops::softmax_rest(x, n, m);
}

// The fused rows of the ops (core/vector_loops.h), dispatched the same way.
template <class T>
void softmax_grad(const T* z, T* d, int64_t n, T m, T r, T g, T u) {
  if constexpr (std::is_same_v<T, float>)
    cpu::kernels().softmax_grad(z, d, n, m, r, g, u);
  else
    loops::softmax_grad(z, d, n, m, r, g, u);
}
template <class T>
void tanh_of_sum(const T* p, const T* q, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    cpu::kernels().tanh_of_sum(p, q, y, n);
  else
    loops::tanh_of_sum(p, q, y, n);
}
template <class T>
void tanh_dots(const T* p, const T* q, const T* v, int64_t n, int64_t rows, T* e) {
  if constexpr (std::is_same_v<T, float>)
    cpu::kernels().tanh_dots(p, q, v, n, rows, e);
  else
    loops::tanh_dots(p, q, v, n, rows, e);
}
template <class T>
void gru_row(const T* x, const T* w, const T* bias, const T* h, T* r, T* z, T* n, T* ghn, T* y,
             int64_t hs) {
  if constexpr (std::is_same_v<T, float>)
    cpu::kernels().gru_row(x, w, bias, h, r, z, n, ghn, y, hs);
  else
    loops::gru_row(x, w, bias, h, r, z, n, ghn, y, hs);
}
template <class T>
void lstm_row(const T* x, const T* w, const T* bias, const T* c, T* g, T* c2, T* h2, int64_t hs) {
  if constexpr (std::is_same_v<T, float>)
    cpu::kernels().lstm_row(x, w, bias, c, g, c2, h2, hs);
  else
    loops::lstm_row(x, w, bias, c, g, c2, h2, hs);
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

// dst[i] += src[i] over two same-shaped tensors; dst[i] = src[i] where `first` (a gradient's
// first share, Tape::input_grad_to_write).
template <class T>
void accumulate(Tensor& dst, const Tensor& src, bool first = false) {
  T* d = dst.data<T>();
  const T* s = src.data<T>();
  if (first)
    std::copy_n(s, dst.numel(), d);
  else
    for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += s[i];
}

inline void accumulate(Tensor& dst, const Tensor& src, bool first = false) {
  dispatch(dst.dtype(), [&](auto tag) { accumulate<decltype(tag)>(dst, src, first); });
}

// Calls f(std::true_type) for a gradient's first share (to be stored), else f(std::false_type)
// (to be added), so that the loop inside is compiled once for each without a test per element.
template <class F>
void first_or_added(bool first, F&& f) {
  if (first)
    f(std::true_type{});
  else
    f(std::false_type{});
}

}  // namespace tapestry::ops::detail
