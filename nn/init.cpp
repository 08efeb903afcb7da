// Initialisation helpers; orthogonal uses modified Gram-Schmidt in double precision.
#include "tapestry/nn/init.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

namespace tapestry::nn::init {

namespace {
std::pair<double, double> fans(const Tensor& w, const char* who) {
  if (w.ndim() < 2)
    throw ShapeError(fmt::format("{}: needs at least 2 dimensions, got {}", who, w.shape().str()));
  double receptive = static_cast<double>(w.shape().inner(1));
  return {static_cast<double>(w.dim(1)) * receptive, static_cast<double>(w.dim(0)) * receptive};
}
}  // namespace

void uniform(Tensor& w, double lo, double hi, Rng& rng) {
  rng.fill_uniform(w, lo, hi);
}

void normal(Tensor& w, double mean, double stddev, Rng& rng) {
  rng.fill_normal(w, mean, stddev);
}

void xavier_uniform(Tensor& w, Rng& rng, double gain) {
  auto [fan_in, fan_out] = fans(w, "xavier_uniform");
  double a = gain * std::sqrt(6.0 / (fan_in + fan_out));
  rng.fill_uniform(w, -a, a);
}

void xavier_normal(Tensor& w, Rng& rng, double gain) {
  auto [fan_in, fan_out] = fans(w, "xavier_normal");
  rng.fill_normal(w, 0.0, gain * std::sqrt(2.0 / (fan_in + fan_out)));
}

void orthogonal(Tensor& w, Rng& rng, double gain) {
  if (w.ndim() < 2)
    throw ShapeError(
        fmt::format("orthogonal: needs at least 2 dimensions, got {}", w.shape().str()));
  const int64_t rows = w.dim(0), cols = w.numel() / rows;
  // Orthonormalise the k = min(rows, cols) vectors of length n = max(rows, cols), then lay them
  // out as rows (rows <= cols) or as columns.
  const bool transpose = rows > cols;
  const int64_t k = transpose ? cols : rows, n = transpose ? rows : cols;
  std::vector<double> q(static_cast<size_t>(k * n));
  for (auto& v : q) v = rng.normal();
  for (int64_t i = 0; i < k; ++i) {
    double* qi = &q[i * n];
    for (int64_t j = 0; j < i; ++j) {
      const double* qj = &q[j * n];
      double dot = 0;
      for (int64_t t = 0; t < n; ++t) dot += qi[t] * qj[t];
      for (int64_t t = 0; t < n; ++t) qi[t] -= dot * qj[t];
    }
    double norm = 0;
    for (int64_t t = 0; t < n; ++t) norm += qi[t] * qi[t];
    norm = std::sqrt(norm);
    for (int64_t t = 0; t < n; ++t) qi[t] /= norm;  // the positive norm plays R's positive diagonal
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      w.set(r * cols + c, gain * (transpose ? q[c * n + r] : q[r * n + c]));
}

}  // namespace tapestry::nn::init
