// Softmax and log-softmax along any axis, as strided rows; masked positions are skipped exactly.
#include "tapestry/ops/softmax.h"

#include <cmath>
#include <limits>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace forward {
template <class T>
void softmax_row(const T* px, const T* pm, T* py, int64_t len, int64_t step, bool log) {
  const T inf = std::numeric_limits<T>::infinity();
  const int64_t end = len * step;
  T m = -inf;
  for (int64_t j = 0; j < end; j += step)
    if ((!pm || pm[j] != 0) && px[j] > m) m = px[j];
  if (m == -inf) {  // no real position: zeros (or -inf), never exp(-inf - -inf) = NaN
    for (int64_t j = 0; j < end; j += step) py[j] = log ? -inf : T(0);
    return;
  }
  T s = 0;
  for (int64_t j = 0; j < end; j += step) {
    if (pm && pm[j] == 0) {
      py[j] = log ? -inf : T(0);
      continue;
    }
    const T e = std::exp(px[j] - m);
    s += e;
    if (!log) py[j] = e;
  }
  if (log) {
    const T ls = std::log(s);  // (x - m) - ls, not x - (m + ls): exact when |m| is large
    for (int64_t j = 0; j < end; j += step)
      if (!pm || pm[j] != 0) py[j] = (px[j] - m) - ls;
  } else {
    const T inv = T(1) / s;
    for (int64_t j = 0; j < end; j += step)
      if (!pm || pm[j] != 0) py[j] *= inv;
  }
}
template void softmax_row(const float*, const float*, float*, int64_t, int64_t, bool);
template void softmax_row(const double*, const double*, double*, int64_t, int64_t, bool);
}  // namespace forward

namespace backward {
template <class T>
void softmax_row(const T* y, const T* dy, T* d, int64_t len, int64_t step, bool store) {
  const int64_t end = len * step;
  T dot = 0;
  for (int64_t j = 0; j < end; j += step) dot += dy[j] * y[j];
  if (store)
    for (int64_t j = 0; j < end; j += step) d[j] = y[j] * (dy[j] - dot);
  else
    for (int64_t j = 0; j < end; j += step) d[j] = d[j] + y[j] * (dy[j] - dot);
}
template void softmax_row(const float*, const float*, float*, int64_t, int64_t, bool);
template void softmax_row(const double*, const double*, double*, int64_t, int64_t, bool);
}  // namespace backward

namespace {

// Calls f(base) for every row of `shape` along `axis`: base is the flat index of the row's first
// element, and its `shape[axis]` elements lie `shape.inner(axis)` apart.
template <class F>
void for_each_row(const Shape& shape, int axis, F&& f) {
  const int64_t outer = shape.outer(axis), len = shape[axis], inner = shape.inner(axis);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) f(o * len * inner + i);
}

// True if a tensor of shape `from` broadcasts to exactly `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.ndim() > to.ndim()) return false;
  for (int i = 1; i <= from.ndim(); ++i) {
    const int64_t d = from[from.ndim() - i];
    if (d != 1 && d != to[to.ndim() - i]) return false;
  }
  return true;
}

// The mask `valid` checked against x and broadcast to x's shape; undefined if there is none.
Tensor broadcast_mask(const char* op, const Var& x, const Tensor& valid) {
  if (!valid.defined()) return Tensor();
  check_same_dtype(op, {&x.value(), &valid});
  if (!broadcasts_to(valid.shape(), x.shape()))
    throw ShapeError(
        fmt::format("{}: x {} and mask {}: the mask must have x's shape or broadcast to it", op,
                    x.shape().str(), valid.shape().str()));
  return valid.broadcast_to(x.shape(), op);
}

// Softmax (or, with `log`, log-softmax) of every row of x along `axis`. `mask` has x's shape or is
// undefined (every position real).
Tensor softmax_forward(const Tensor& x, int axis, const Tensor& mask, bool log) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const int64_t len = x.shape()[axis], step = x.shape().inner(axis);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* pm = mask.defined() ? mask.data<T>() : nullptr;
    T* py = y.data<T>();
    for_each_row(x.shape(), axis, [&](int64_t base) {
      forward::softmax_row<T>(px + base, pm ? pm + base : nullptr, py + base, len, step, log);
    });
  });
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// softmax
// y = exp(x - max) / sum(exp(x - max));  dx += y * (dy - sum(dy * y))   (sums along the axis)
// Masked positions hold y = 0, so they neither take gradient nor add to the sum: only y is read.
void softmax_backward(Tape& tape, const Node& n) {
  bool first;
  Tensor* dx = tape.input_grad_to_write(n, 0, &first);
  if (!dx) return;
  const Shape& shape = n.value.shape();
  const int axis = static_cast<int>(n.scalar[0]);
  const int64_t len = shape[axis], step = shape.inner(axis);
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* y = n.value.data<T>();
    const T* dy = n.grad.data<T>();
    T* d = dx->data<T>();
    for_each_row(shape, axis, [&](int64_t base) {
      backward::softmax_row<T>(y + base, dy + base, d + base, len, step, first);
    });
  });
}
TAPESTRY_OP(
    kSoftmax, "softmax", softmax_backward,
    "y = exp(x - max) / sum(exp(x - max));  dx += y * (dy - sum(dy * y))  (along the axis)");

Var softmax(const Var& x, int axis, const Tensor& valid) {
  const int a = x.shape().axis(axis, "softmax");
  Tensor y = softmax_forward(x.value(), a, broadcast_mask("softmax", x, valid), false);
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kSoftmax, std::move(y), {&x});
  tape->set_scalars(id, a);
  return tape->output(id);
}

// ---------------------------------------------------------------------------------------------
// log_softmax
// y = x - max - log(sum(exp(x - max)));  dx += dy - exp(y) * sum(dy)   (sums over real positions)
// exp(y) at a masked position is 0, not enough to stop its dy, so the mask (saved as given, the
// smaller tensor) is broadcast again here; without a mask every position is real. A row with no
// real position (all -inf) passes back nothing.
void log_softmax_backward(Tape& tape, const Node& n) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  const Shape& shape = n.value.shape();
  const int axis = static_cast<int>(n.scalar[0]);
  const int64_t len = shape[axis], step = shape.inner(axis);
  Tensor mask = n.saved_count > 0 ? tape.saved(n, 0).broadcast_to(shape, "log_softmax") : Tensor();
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* y = n.value.data<T>();
    const T* dy = n.grad.data<T>();
    const T* pm = mask.defined() ? mask.data<T>() : nullptr;
    T* d = dx->data<T>();
    for_each_row(shape, axis, [&](int64_t base) {
      const int64_t end = base + len * step;
      T sum = 0;
      bool live = false;  // false for a row with no real position, which is all -inf
      for (int64_t j = base; j < end; j += step) {
        if (pm && pm[j] == 0) continue;
        sum += dy[j];
        live = live || y[j] != -std::numeric_limits<T>::infinity();
      }
      if (!live) return;
      for (int64_t j = base; j < end; j += step)
        if (!pm || pm[j] != 0) d[j] += dy[j] - std::exp(y[j]) * sum;
    });
  });
}
// -infinity at masked positions: infinite by design.
TAPESTRY_OP(kLogSoftmax, "log_softmax", log_softmax_backward,
            "y = x - log(sum(exp(x)));  dx += dy - exp(y) * sum(dy)  (along the axis)", true);

Var log_softmax(const Var& x, int axis, const Tensor& valid) {
  const int a = x.shape().axis(axis, "log_softmax");
  Tensor y = softmax_forward(x.value(), a, broadcast_mask("log_softmax", x, valid), true);
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kLogSoftmax, std::move(y), {&x});
  if (valid.defined()) tape->save(id, valid);
  tape->set_scalars(id, a);
  return tape->output(id);
}

}  // namespace tapestry::ops
