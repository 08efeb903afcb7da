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

// Whether the gradients are many enough to be worth the second core, and it is awake.
bool worth_parallel(std::span<Parameter* const> params) {
  int64_t elements = 0;
  for (const Parameter* p : params)
    if (p->grad.defined()) elements += p->grad.numel();
  return parameter_pass_parallel(elements);
}

// Sum of squares: blocks of up to 4096 summed in T over 16 independent lanes (which vectorise),
// each block's sum then added in double; the last fewer than 16 elements are added in double.
// Most of a small model's gradients are shorter than a block, so the last block is one too.
// before(j, len) (before(r, j, len) for range r of two) runs on each range of elements just
// before it is read.
//
// Two ranges may be summed at once, their blocks' lanes side by side, each range's sum the same
// chain of additions as if it were summed alone: one range's 16 lanes are two AVX2 registers,
// whose chains of fused multiply-adds keep only half the adders busy (the sum ran at the adders'
// latency, 4 floats a cycle); two ranges keep them all busy.
constexpr int kLanes = 16;
constexpr int64_t kBlock = 4096;

// acc + x * x, fused where the CPU fuses (as the compiler would contract it): spelled out, so that
// no way of vectorising the loops below can make one range's sum differ from another's.
template <class T>
inline T add_square(T acc, T x) {
#if defined(__FMA__)
  return std::fma(x, x, acc);
#else
  return acc + x * x;
#endif
}

template <class T>
struct SquaresRange {
  const T* d;
  int64_t n;
  int64_t j = 0;       // the next element to read
  bool blocks = true;  // whether a block may start at j (the last block was a whole one)
  double total = 0;
  // The length of the block starting at j, or 0 once the blocks are done.
  int64_t next_block() const {
    return blocks && j + kLanes <= n ? std::min(kBlock, (n - j) / kLanes * kLanes) : 0;
  }
};

// total plus the squares of one block d[0, len): summed over the lanes from zero, the lanes then
// added to total in order. Not inlined: GCC vectorises the lanes so, and inlined into the loop
// over blocks it kept them as 16 scalars.
template <class T>
[[gnu::noinline]] double add_block(double total, const T* d, int64_t len) {
  T acc[kLanes] = {};
  for (int64_t i = 0; i < len; i += kLanes)
    for (int u = 0; u < kLanes; ++u) acc[u] = add_square(acc[u], d[i + u]);
  for (int u = 0; u < kLanes; ++u) total += static_cast<double>(acc[u]);
  return total;
}

// add_block on two blocks of one length at once: the same two sums.
template <class T>
[[gnu::noinline]] void add_blocks(double& total0, const T* d0, double& total1, const T* d1,
                                  int64_t len) {
  T acc0[kLanes] = {}, acc1[kLanes] = {};
  for (int64_t i = 0; i < len; i += kLanes)
    for (int u = 0; u < kLanes; ++u) {
      acc0[u] = add_square(acc0[u], d0[i + u]);
      acc1[u] = add_square(acc1[u], d1[i + u]);
    }
  for (int u = 0; u < kLanes; ++u) total0 += static_cast<double>(acc0[u]);
  for (int u = 0; u < kLanes; ++u) total1 += static_cast<double>(acc1[u]);
}

template <class T>
void advance(SquaresRange<T>& r, int64_t len) {
  r.j += len;
  r.blocks = len == kBlock;
}

// The rest of range r alone: its blocks, then each element past them added in double.
template <class T, class Before>
void sum_squares(SquaresRange<T>& r, Before before) {
  for (int64_t len; (len = r.next_block()) > 0; advance(r, len)) {
    before(r.j, len);
    r.total = add_block(r.total, r.d + r.j, len);
  }
  if (r.j < r.n) before(r.j, r.n - r.j);
  for (; r.j < r.n; ++r.j) r.total = add_square(r.total, static_cast<double>(r.d[r.j]));
}

// Two ranges (a gradient's two halves) side by side while their blocks are of one length, then
// the rest of each alone: the same sums as one after the other.
template <class T, class Before>
void sum_squares(SquaresRange<T>& r0, SquaresRange<T>& r1, Before before) {
  for (int64_t len; (len = r0.next_block()) > 0 && len == r1.next_block();) {
    before(0, r0.j, len);
    before(1, r1.j, len);
    add_blocks(r0.total, r0.d + r0.j, r1.total, r1.d + r1.j, len);
    advance(r0, len);
    advance(r1, len);
  }
  sum_squares(r0, [&](int64_t j, int64_t len) { before(0, j, len); });
  sum_squares(r1, [&](int64_t j, int64_t len) { before(1, j, len); });
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
  // elements) take less time than waking the other core; on one core both halves are summed at
  // once, each to the bits it has alone.
  double partial[kJobs] = {};
  const auto half = [&](size_t i, int job) {
    const Tensor& dx = params[i]->grad;
    const int64_t n = dx.numel(), begin = n * job / kJobs, end = n * (job + 1) / kJobs;
    return std::pair{begin, end};
  };
  const auto prepare_range = [&](size_t i, int job, int64_t j, int64_t len) {
    if (prepare) prepare(context, i, half(i, job).first + j, len);
  };
  const bool two_cores = worth_parallel(params) && parallel_threads() > 1 && !in_parallel_region();
  parallel_run_if(two_cores, two_cores ? kJobs : 1, [&](int job) {
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& dx = params[i]->grad;
      if (!dx.defined()) continue;
      dispatch(dx.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* d = dx.data<T>();
        if (two_cores) {
          const auto [begin, end] = half(i, job);
          SquaresRange<T> r{d + begin, end - begin};
          sum_squares(r, [&](int64_t j, int64_t len) { prepare_range(i, job, j, len); });
          partial[job] += r.total;
        } else {
          const auto [b0, e0] = half(i, 0);
          const auto [b1, e1] = half(i, 1);
          SquaresRange<T> r0{d + b0, e0 - b0}, r1{d + b1, e1 - b1};
          sum_squares(r0, r1, [&](int s, int64_t j, int64_t len) { prepare_range(i, s, j, len); });
          partial[0] += r0.total;
          partial[1] += r1.total;
        }
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
