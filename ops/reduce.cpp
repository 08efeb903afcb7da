// Reductions: sum and mean walk x against its reduced shape; max keeps its argmax on the tape.
#include "tapestry/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tapestry/core/small_vec.h"
#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

using detail::for_each_broadcast;

namespace {

// The geometry of a reduction over a set of axes.
struct Reduction {
  SmallVec<int64_t, kMaxDims> axes;  // normalised, in the order given (inline: no heap)
  Shape kept;                        // x's shape with every reduced axis set to 1
  Shape out;          // the result's shape: kept, or x's shape without the reduced axes
  int64_t count = 1;  // number of elements reduced into each output element
};

Reduction resolve(const Shape& x, std::span<const int> axes, bool keepdim, const char* op) {
  Reduction r;
  bool reduced[kMaxDims] = {};
  for (int axis : axes) {
    const int a = x.axis(axis, op);
    if (reduced[a])
      throw IndexError(fmt::format("{}: axes ({}) name axis {} twice for shape {}", op,
                                   fmt::join(axes, ","), a, x.str()));
    reduced[a] = true;
    r.axes.push_back(a);
  }
  r.kept = x;
  for (int a = 0; a < x.ndim(); ++a) {
    if (reduced[a]) {
      r.count *= x[a];
      r.kept[a] = 1;
    } else if (!keepdim) {
      r.out.push_back(x[a]);
    }
  }
  if (keepdim) r.out = r.kept;
  return r;
}

std::vector<int> all_axes(const Var& x) {
  std::vector<int> axes(static_cast<size_t>(x.ndim()));
  for (int a = 0; a < x.ndim(); ++a) axes[a] = a;
  return axes;
}

// y[iy] = sum of x[i] over the reduced axes; y has shape `kept`.
Tensor sum_into_kept(const Tensor& x, const Shape& kept) {
  Tensor y = Tensor::zeros(kept, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_broadcast(x.shape(), kept, kept,
                       [&](int64_t i, int64_t iy, int64_t) { py[iy] += px[i]; });
  });
  return y;
}

// dx[i] += c * dy[iy]: dy spread back over the reduced axes (saved as attributes).
void spread_backward(Tape& tape, const Node& n, double c) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  Shape kept = dx->shape();
  for (int64_t a : tape.attrs(n)) kept[static_cast<int>(a)] = 1;
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    T* d = dx->data<T>();
    const T s = static_cast<T>(c);
    for_each_broadcast(dx->shape(), kept, kept,
                       [&](int64_t i, int64_t iy, int64_t) { d[i] += s * dy[iy]; });
  });
}

Var record_reduction(const OpDef& op, Tensor y, const Var& x, const Reduction& r) {
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(op, std::move(y), {&x});
  tape->save_attrs(id, std::span<const int64_t>(r.axes.data(), r.axes.size()));
  tape->set_scalars(id, static_cast<double>(r.count));
  return tape->output(id);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// sum
// y = sum_axes(x);  dx += dy  (spread over the reduced axes)
void sum_backward(Tape& tape, const Node& n) {
  spread_backward(tape, n, 1.0);
}
TAPESTRY_OP(kSum, "sum", sum_backward,
            "y = sum_axes(x);  dx += dy  (spread over the reduced axes)");

Var sum(const Var& x, std::span<const int> axes, bool keepdim) {
  const Reduction r = resolve(x.shape(), axes, keepdim, "sum");
  return record_reduction(kSum, sum_into_kept(x.value(), r.kept).reshape(r.out), x, r);
}

Var sum(const Var& x, std::initializer_list<int> axes, bool keepdim) {
  return sum(x, std::span<const int>(axes.begin(), axes.size()), keepdim);
}

Var sum(const Var& x) {
  return sum(x, all_axes(x), false);
}

// ---------------------------------------------------------------------------------------------
// mean
// y = sum_axes(x) / n;  dx += dy / n  (spread over the reduced axes; n elements per output)
void mean_backward(Tape& tape, const Node& n) {
  spread_backward(tape, n, 1.0 / n.scalar[0]);
}
TAPESTRY_OP(kMean, "mean", mean_backward,
            "y = sum_axes(x) / n;  dx += dy / n  (spread over the reduced axes)");

Var mean(const Var& x, std::span<const int> axes, bool keepdim) {
  const Reduction r = resolve(x.shape(), axes, keepdim, "mean");
  Tensor y = sum_into_kept(x.value(), r.kept);
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T count = static_cast<T>(r.count);
    for (int64_t i = 0, m = y.numel(); i < m; ++i) py[i] /= count;
  });
  return record_reduction(kMean, y.reshape(r.out), x, r);
}

Var mean(const Var& x, std::initializer_list<int> axes, bool keepdim) {
  return mean(x, std::span<const int>(axes.begin(), axes.size()), keepdim);
}

Var mean(const Var& x) {
  return mean(x, all_axes(x), false);
}

// ---------------------------------------------------------------------------------------------
// max
// y = max_k x[..., k, ...];  dx[..., argmax, ...] += dy
void max_backward(Tape& tape, const Node& n) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  const int axis = static_cast<int>(n.scalar[0]);
  const int64_t outer = dx->shape().outer(axis), len = dx->dim(axis),
                inner = dx->shape().inner(axis);
  const int64_t* arg = tape.attrs(n).data();
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    T* d = dx->data<T>();
    for (int64_t o = 0; o < outer; ++o) {  // x viewed as (O,K,I), y as (O,I)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t j = o * inner + i;
        d[(o * len + arg[j]) * inner + i] += dy[j];
      }
    }
  });
}
TAPESTRY_OP(kMax, "max", max_backward, "y = max_k x[..., k, ...];  dx[..., argmax, ...] += dy");

Var max(const Var& x, int axis, bool keepdim) {
  const Shape& s = x.shape();
  const int a = s.axis(axis, "max");
  const int64_t outer = s.outer(a), len = s[a], inner = s.inner(a);
  if (len == 0) throw ShapeError(fmt::format("max: axis {} of shape {} is empty", axis, s.str()));
  Tensor y = Tensor::empty(keepdim ? s.with(a, 1) : s.without(a), x.dtype());
  std::vector<int64_t> argmax(static_cast<size_t>(outer * inner), 0);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.value().data<T>();
    T* py = y.data<T>();
    for (int64_t o = 0; o < outer; ++o) {  // x viewed as (O,K,I): a running maximum over k
      const T* xo = px + o * len * inner;
      T* best = py + o * inner;
      int64_t* at = argmax.data() + o * inner;
      std::copy(xo, xo + inner, best);
      for (int64_t k = 1; k < len; ++k) {
        const T* row = xo + k * inner;
        for (int64_t i = 0; i < inner; ++i) {
          // Strictly greater, so the first of equal maxima wins; a NaN beats any number.
          if (row[i] > best[i] || (std::isnan(row[i]) && !std::isnan(best[i]))) {
            best[i] = row[i];
            at[i] = k;
          }
        }
      }
    }
  });
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kMax, std::move(y), {&x});
  tape->save_attrs(id, argmax);
  tape->set_scalars(id, a);
  return tape->output(id);
}

}  // namespace tapestry::ops
