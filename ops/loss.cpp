// Cross-entropy fused with its softmax: one pass for the loss, the probabilities kept for backward.
#include "ops/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/kernels.h"

namespace tapestry::ops {

namespace {

// Throws unless logits is (N,V) with N targets, each in [0,V) or equal to ignore_index.
void check_cross_entropy(const Shape& s, std::span<const int32_t> targets, int32_t ignore_index) {
  const auto n = static_cast<int64_t>(targets.size());
  if (s.ndim() != 2)
    throw ShapeError(fmt::format(
        "cross_entropy: logits {} and targets ({}): logits must be 2-D (N,V)", s.str(), n));
  if (n != s[0])
    throw ShapeError(
        fmt::format("cross_entropy: logits {} and targets ({}): expected one target per row ({})",
                    s.str(), n, s[0]));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = targets[i];
    if (t != ignore_index && (t < 0 || t >= s[1]))
      throw IndexError(fmt::format(
          "cross_entropy: row {} has target {}, outside [0,V) for logits {} with V = {} "
          "(and not ignore_index {})",
          i, t, s.str(), s[1], ignore_index));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// cross_entropy
// L = mean_i (logsumexp(z_i) - z_i[t_i]);  dz_i += dL * (softmax(z_i) - onehot(t_i)) / count
// Reads the saved probabilities, the targets (attrs) and scalars (count, ignore_index).
void cross_entropy_backward(Tape& tape, const Node& n) {
  Tensor* dz = tape.input_grad(n, 0);
  const double count = n.scalar[0];
  if (!dz || count == 0) return;
  const Tensor& p = tape.saved(n, 0);
  std::span<const int64_t> targets = tape.attrs(n);
  const auto ignore_index = static_cast<int64_t>(n.scalar[1]);
  const int64_t v = p.dim(1);
  dispatch(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T g = static_cast<T>(n.grad.data<T>()[0] / count);
    const T* pp = p.data<T>();
    T* d = dz->data<T>();
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] == ignore_index) continue;
      const int64_t row = static_cast<int64_t>(i) * v;
      for (int64_t j = 0; j < v; ++j) d[row + j] += g * pp[row + j];
      d[row + targets[i]] -= g;
    }
  });
}
TAPESTRY_OP(
    kCrossEntropy, "cross_entropy", cross_entropy_backward,
    "L = mean_i(logsumexp(z_i) - z_i[t_i]);  dz_i += dL * (softmax(z_i) - onehot(t_i)) / count");

// logits (N,V), targets (N) -> loss ()
Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index) {
  check_cross_entropy(logits.shape(), targets, ignore_index);
  const int64_t n = logits.dim(0), v = logits.dim(1);
  Tape* tape = recording_tape({&logits});
  // The probabilities are written only when backward will read them; ignored rows are zeroed.
  Tensor probs = tape ? Tensor::empty(logits.shape(), logits.dtype()) : Tensor();
  double total = 0;
  int64_t count = 0;
  dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* z = logits.value().data<T>();
    T* pp = probs.defined() ? probs.data<T>() : nullptr;
    T* row_buffer = pp ? nullptr : detail::scratch<T>(static_cast<size_t>(v));  // nothing saved
    for (int64_t i = 0; i < n; ++i) {
      if (targets[i] == ignore_index) {
        if (pp) std::fill(pp + i * v, pp + (i + 1) * v, T(0));
        continue;
      }
      const T* zi = z + i * v;
      const int64_t k = std::max_element(zi, zi + v) - zi;
      const T m = zi[k];
      T* e = pp ? pp + i * v : row_buffer;
      // Separate loops: the exp loop vectorises, the sum (order-sensitive) need not.
      for (int64_t j = 0; j < v; ++j) e[j] = detail::exp(zi[j] - m);
      e[k] = 1;  // exp(0), exactly
      // logsumexp = m + log(1 + sum of the other terms), through log1p: a confident row's loss
      // (1e-4 beside logits of 20) keeps its digits rather than cancelling in log(s) - (z_t - m).
      T rest = 0;
      for (int64_t j = 0; j < k; ++j) rest += e[j];
      for (int64_t j = k + 1; j < v; ++j) rest += e[j];
      const T s = 1 + rest;
      total += static_cast<double>(std::log1p(rest) + (m - zi[targets[i]]));
      ++count;
      if (!pp) continue;
      const T inv = T(1) / s;
      for (int64_t j = 0; j < v; ++j) e[j] *= inv;
    }
  });
  Tensor loss =
      Tensor::scalar(count > 0 ? total / static_cast<double>(count) : 0.0, logits.dtype());
  if (!tape) return Var(std::move(loss));
  int32_t id = tape->record(kCrossEntropy, std::move(loss), {&logits});
  tape->save(id, std::move(probs));
  tape->save_attrs(id, targets);
  tape->set_scalars(id, static_cast<double>(count), ignore_index);
  return tape->output(id);
}

}  // namespace tapestry::ops
