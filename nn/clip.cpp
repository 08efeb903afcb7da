// Gradient clipping: one pass for the global norm, a second to scale (or the factor, for an
// optimizer to apply as it reads the gradients).
#include "tapestry/nn/clip.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tapestry/core/parallel.h"

namespace tapestry::nn {

namespace {

constexpr int kJobs = 2;

// Whether the gradients are many enough to be worth the second core.
bool worth_parallel(std::span<Parameter* const> params) {
  int64_t elements = 0;
  for (const Parameter* p : params)
    if (p->grad.defined()) elements += p->grad.numel();
  return elements >= kParallelMinElements;
}

// Sum of squares: blocks of up to 4096 summed in T over 16 independent lanes (which vectorise),
// each block's sum then added in double; the last fewer than 16 elements are added in double.
// Most of a small model's gradients are shorter than a block, so the last block is one too.
// before(j, len) runs on each range just before the range is read.
template <class T, class Before>
double sum_squares(const T* d, int64_t n, Before before) {
  constexpr int kLanes = 16;
  constexpr int64_t kBlock = 4096;
  double total = 0;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kBlock) {
    const int64_t len = std::min(kBlock, (n - j) / kLanes * kLanes);
    before(j, len);
    T acc[kLanes] = {};
    for (int64_t i = 0; i < len; i += kLanes)
      for (int u = 0; u < kLanes; ++u) acc[u] += d[j + i + u] * d[j + i + u];
    for (int u = 0; u < kLanes; ++u) total += static_cast<double>(acc[u]);
    if (len < kBlock) {
      j += len;
      break;
    }
  }
  if (j < n) before(j, n - j);
  for (; j < n; ++j) total += static_cast<double>(d[j]) * d[j];
  return total;
}
}  // namespace

double grad_norm(std::span<Parameter* const> params) {
  return grad_norm(params, nullptr, nullptr);
}

double grad_norm(std::span<Parameter* const> params, GradRangeFn prepare, void* context) {
  for (size_t i = 0; i < params.size(); ++i)
    if (!params[i]) throw ValueError(fmt::format("grad_norm: parameter {} is null", i));
  // Each parameter's gradient in two halves, one per job, the two partial sums added in job
  // order: the same result on one core or two. A small model's gradients (a tiny one's 66K
  // elements) take less time than waking the other core.
  double partial[kJobs] = {};
  parallel_run_if(worth_parallel(params), kJobs, [&](int job) {
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& dx = params[i]->grad;
      if (!dx.defined()) continue;
      const int64_t n = dx.numel(), begin = n * job / kJobs, end = n * (job + 1) / kJobs;
      const auto before = [&](int64_t j, int64_t len) {
        if (prepare) prepare(context, i, begin + j, len);
      };
      dispatch(dx.dtype(), [&](auto tag) {
        using T = decltype(tag);
        partial[job] += sum_squares(dx.data<T>() + begin, end - begin, before);
      });
    }
  });
  double sum = 0;
  for (double x : partial) sum += x;
  return std::sqrt(sum);
}

double clip_factor(double norm, double max_norm) {
  if (!(max_norm >= 0))
    throw ValueError(fmt::format("clip_grad_norm: max_norm must be >= 0, got {}", max_norm));
  // A NaN for a non-finite norm, which Optimizer::step refuses: no finite factor makes such a
  // gradient one to step by. The 1e-6 keeps the factor finite for an all-zero gradient (PyTorch
  // adds the same).
  if (!std::isfinite(norm)) return std::nan("");
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_grad_norm(std::span<Parameter* const> params, double max_norm) {
  clip_factor(0, max_norm);  // max_norm is checked before any work
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const double factor = clip_factor(norm, max_norm);
  if (factor >= 1) return norm;
  parallel_run_if(worth_parallel(params), kJobs, [&](int job) {
    for (Parameter* p : params) {
      Tensor& dx = p->grad;
      if (!dx.defined()) continue;
      const int64_t n = dx.numel(), begin = n * job / kJobs, end = n * (job + 1) / kJobs;
      dispatch(dx.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T f = static_cast<T>(factor);
        T* d = dx.data<T>();
        for (int64_t j = begin; j < end; ++j) d[j] *= f;
      });
    }
  });
  return norm;
}

}  // namespace tapestry::nn
