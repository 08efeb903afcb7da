// Cross-entropy fused with its softmax: the loss in one pass, the probabilities recomputed in
// backward.
#include "tapestry/ops/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {

// Throws unless 0 <= label_smoothing < 1 and logits is (N,V) with N targets, each in [0,V) or
// equal to ignore_index.
void check_cross_entropy(const Shape& s, std::span<const int32_t> targets, int32_t ignore_index,
                         double label_smoothing) {
  const auto n = static_cast<int64_t>(targets.size());
  if (!(label_smoothing >= 0 && label_smoothing < 1))
    throw ValueError(fmt::format(
        "cross_entropy: logits {} and targets ({}): label_smoothing = {} is outside [0, 1)",
        s.str(), n, label_smoothing));
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

// sum_i (m - x[i]) for m = max_value(x, n), over independent lanes of doubles (they vectorise,
// and a float row of 30,000 classes keeps its digits); every term is >= 0, so nothing cancels.
template <class T>
double gap_sum(const T* __restrict x, int64_t n, T m) {
  return detail::lane_sum<double, 64 / sizeof(T)>(
      n, [&](int64_t i) { return static_cast<double>(m - x[i]); });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// cross_entropy
// L = mean_i ((1-eps)(lse_i - z_i[t_i]) + eps mean_j(lse_i - z_ij)), lse_i = logsumexp(z_i);
// dz_i += dL (exp(z_i - lse_i) - (1-eps) onehot(t_i) - eps/V) / count.  Saved: the logits (alive
// anyway, as their producer's value) and per row lse_i in two parts, the maximum m_i and
// r_i = log1p(rest_i), from which backward recomputes the probabilities instead of keeping another
// (N,V) tensor; the targets (attrs) and scalars (ignore_index, eps), from which backward counts
// the rows again (a node has two scalars). The target's term p - (1-eps) - eps/V is computed as
// expm1(z_t - m - r) + eps (1 - 1/V): for a confident row (p = 1 - 1e-13) exp(.) - 1 would keep
// 3 of p - 1's digits, and m + r rounded as one number fewer. With eps = 0 both terms add 0, so
// the result is the unsmoothed one to the bit.
void cross_entropy_backward(Tape& tape, const Node& n) {
  Tensor* dz = tape.input_grad(n, 0);
  if (!dz) return;
  std::span<const int64_t> targets = tape.attrs(n);
  const auto ignore_index = static_cast<int64_t>(n.scalar[0]);
  const double eps = n.scalar[1];
  const auto count = static_cast<double>(
      std::count_if(targets.begin(), targets.end(), [&](int64_t t) { return t != ignore_index; }));
  if (count == 0) return;
  const Tensor& z = tape.saved(n, 0);
  const Tensor& lse = tape.saved(n, 1);  // (N,2): m_i, r_i
  const int64_t v = z.dim(1);
  dispatch(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T g = static_cast<T>(n.grad.data<T>()[0] / count);
    // The smoothed target's share of every class, and what the target's column adds to p - 1.
    const T u = static_cast<T>(eps / static_cast<double>(v));
    const T keep = static_cast<T>(eps - eps / static_cast<double>(v));
    const T* pz = z.data<T>();
    const T* pl = lse.data<T>();
    T* d = dz->data<T>();
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] == ignore_index) continue;
      const int64_t row = static_cast<int64_t>(i) * v;
      const T m = pl[2 * i], r = pl[2 * i + 1];
      const int64_t t = targets[i];
      detail::softmax_grad(pz + row, d + row, t, m, r, g, u);
      d[row + t] += g * (std::expm1((pz[row + t] - m) - r) + keep);
      detail::softmax_grad(pz + row + t + 1, d + row + t + 1, v - t - 1, m, r, g, u);
    }
  });
}
TAPESTRY_OP(kCrossEntropy, "cross_entropy", cross_entropy_backward,
            "L = mean_i((1-eps)(lse(z_i) - z_i[t_i]) + eps mean_j(lse(z_i) - z_ij));  dz_i += dL * "
            "(softmax(z_i) - (1-eps) onehot(t_i) - eps/V) / count");

// logits (N,V), targets (N) -> loss ()
Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index,
                  double label_smoothing) {
  check_cross_entropy(logits.shape(), targets, ignore_index, label_smoothing);
  const int64_t n = logits.dim(0), v = logits.dim(1);
  const double eps = label_smoothing;
  Tape* tape = recording_tape({&logits});
  Tensor lse = tape ? Tensor::zeros({n, 2}, logits.dtype()) : Tensor();
  double total = 0;
  int64_t count = 0;
  dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* z = logits.value().data<T>();
    T* pl = lse.defined() ? lse.data<T>() : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      if (targets[i] == ignore_index) continue;
      const T* zi = z + i * v;
      const T m = detail::max_value(zi, v), rest = detail::softmax_rest(zi, v, m);
      const T r = std::log1p(rest), nll = r + (m - zi[targets[i]]);
      // mean_j (lse - z_j) as r + mean_j (m - z_j), whose terms are all >= 0. Skipped at eps = 0,
      // where a masked class's -inf logit would make 0 * inf a NaN.
      total +=
          eps == 0
              ? static_cast<double>(nll)
              : (1 - eps) * static_cast<double>(nll) +
                    eps * (static_cast<double>(r) + gap_sum(zi, v, m) / static_cast<double>(v));
      ++count;
      if (pl) {
        pl[2 * i] = m;
        pl[2 * i + 1] = r;
      }
    }
  });
  Tensor loss =
      Tensor::scalar(count > 0 ? total / static_cast<double>(count) : 0.0, logits.dtype());
  if (!tape) return Var(std::move(loss));
  int32_t id = tape->record(kCrossEntropy, std::move(loss), {&logits});
  tape->save(id, logits.value());
  tape->save(id, std::move(lse));
  tape->save_attrs(id, targets);
  tape->set_scalars(id, ignore_index, eps);
  return tape->output(id);
}

}  // namespace tapestry::ops
