// Layer normalisation as one op: a row's mean and 1/std computed once, forward and backward
// adjacent. (The same from mean, sub, mul and sqrt records eight nodes and keeps four (N,D)
// tensors; tests/test_norm.cpp checks the two agree.)
#include "tapestry/ops/norm.h"

#include <cmath>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {
// A row's sums run over this many lanes (a row of 64 in one chain of dependent adds took 256
// cycles a pass).
constexpr int kRowLanes = 16;
}  // namespace

// ---------------------------------------------------------------------------------------------
// layer_norm
// xh = (x - mu) r, r = 1 / sqrt(var + eps);  y = xh gamma + beta;
// g = dy gamma;  dx += r (g - mean(g) - xh mean(g xh));  dgamma += sum_rows dy xh;
// dbeta += sum_rows dy.   Saved: x and gamma (alive anyway), and per row mu and r (N,2).
void layer_norm_backward(Tape& tape, const Node& n) {
  const Tensor& x = tape.saved(n, 0);
  const Tensor& gamma = tape.saved(n, 1);
  const Tensor& stats = tape.saved(n, 2);
  bool first;
  Tensor *dx = tape.input_grad_to_write(n, 0, &first), *dgamma = tape.input_grad(n, 1),
         *dbeta = tape.input_grad(n, 2);
  const int64_t d = x.dim(x.ndim() - 1), rows = d > 0 ? x.numel() / d : 0;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* pg = gamma.data<T>();
    const T* ps = stats.data<T>();
    const T* dy = n.grad.data<T>();
    T* pdx = dx ? dx->data<T>() : nullptr;
    T* pdg = dgamma ? dgamma->data<T>() : nullptr;
    T* pdb = dbeta ? dbeta->data<T>() : nullptr;
    detail::first_or_added(first, [&](auto store) {
      for (int64_t i = 0; i < rows; ++i) {
        const T mu = ps[2 * i], r = ps[2 * i + 1];
        const T* xi = px + i * d;
        const T* gi = dy + i * d;
        const T mean_g =
            detail::lane_sum<T, kRowLanes>(d, [&](int64_t j) { return gi[j] * pg[j]; }) /
            static_cast<T>(d);
        const T mean_gxh = detail::lane_sum<T, kRowLanes>(
                               d, [&](int64_t j) { return gi[j] * pg[j] * ((xi[j] - mu) * r); }) /
                           static_cast<T>(d);
        if (pdg)
          for (int64_t j = 0; j < d; ++j) pdg[j] += gi[j] * ((xi[j] - mu) * r);
        if (pdb)
          for (int64_t j = 0; j < d; ++j) pdb[j] += gi[j];
        if (!pdx) continue;
        T* di = pdx + i * d;
        for (int64_t j = 0; j < d; ++j) {
          const T xh = (xi[j] - mu) * r;
          const T g = r * (gi[j] * pg[j] - mean_g - xh * mean_gxh);
          di[j] = store ? g : di[j] + g;
        }
      }
    });
  });
}
TAPESTRY_OP(kLayerNorm, "layer_norm", layer_norm_backward,
            "y = (x - mean) / sqrt(var + eps) * gamma + beta (last axis);  dx += r (g - mean(g) - "
            "xh mean(g xh)), g = dy gamma;  dgamma += sum dy xh;  dbeta += sum dy");

// x (...,D), gamma (D), beta (D) -> y (...,D)
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
  check_same_dtype("layer_norm", {&x.value(), &gamma.value(), &beta.value()});
  if (x.ndim() < 1 || gamma.ndim() != 1 || beta.ndim() != 1 ||
      gamma.dim(0) != x.dim(x.ndim() - 1) || beta.dim(0) != x.dim(x.ndim() - 1))
    throw ShapeError(fmt::format(
        "layer_norm: shapes x {}, gamma {} and beta {} do not fit: expected (...,D), (D) and (D)",
        x.shape().str(), gamma.shape().str(), beta.shape().str()));
  if (!(eps > 0)) throw ValueError(fmt::format("layer_norm: eps = {} must be positive", eps));
  const int64_t d = x.dim(x.ndim() - 1), rows = d > 0 ? x.numel() / d : 0;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor stats = Tensor::empty({rows, 2}, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.value().data<T>();
    const T* pg = gamma.value().data<T>();
    const T* pb = beta.value().data<T>();
    T* py = y.data<T>();
    T* ps = stats.data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      const T* xi = px + i * d;
      const T mu =
          detail::lane_sum<T, kRowLanes>(d, [&](int64_t j) { return xi[j]; }) / static_cast<T>(d);
      // two passes: sum (x - mu)^2 keeps its digits where E[x^2] - mu^2 would not
      const T var = detail::lane_sum<T, kRowLanes>(
                        d, [&](int64_t j) { return (xi[j] - mu) * (xi[j] - mu); }) /
                    static_cast<T>(d);
      const T r = T(1) / std::sqrt(var + static_cast<T>(eps));
      ps[2 * i] = mu;
      ps[2 * i + 1] = r;
      T* yi = py + i * d;
      for (int64_t j = 0; j < d; ++j) yi[j] = (xi[j] - mu) * r * pg[j] + pb[j];
    }
  });
  Tape* tape = recording_tape({&x, &gamma, &beta});
  if (!tape) return Var(std::move(y));
  const int32_t id = tape->record(kLayerNorm, std::move(y), {&x, &gamma, &beta});
  tape->save(id, x.value());
  tape->save(id, gamma.value());
  tape->save(id, std::move(stats));
  return tape->output(id);
}

}  // namespace tapestry::ops
