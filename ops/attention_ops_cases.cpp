// Gradient-check cases for the fused attention kernels.
#include "tapestry/core/random.h"
#include "tapestry/ops/attention_ops.h"
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/scaled_dot_attention.h"
#include "tapestry/ops/shape_ops.h"

namespace tapestry::ops {

namespace {
// A (B,1,R,S) mask: 1 where keep(b, r, s), else 0.
template <class Keep>
Tensor attention_mask(int64_t b, int64_t r, int64_t s, DType dtype, Keep keep) {
  Tensor m = Tensor::empty({b, 1, r, s}, dtype);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < r; ++t)
      for (int64_t j = 0; j < s; ++j) m.set((i * r + t) * s + j, keep(i, t, j) ? 1.0 : 0.0);
  return m;
}
}  // namespace

void add_attention_op_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  reg.add(op_case("additive_scores", "B=2, S=3, A=4", {{{2, 3, 4}}, {{2, 4}}, {{4}}},
                  [](S x) { return additive_scores(x[0], x[1], x[2]); }));
  reg.add(op_case("additive_scores", "B=1, S=1, A=1, wide inputs",
                  {{{1, 1, 1}, -3, 3}, {{1, 1}, -3, 3}, {{1}}},
                  [](S x) { return additive_scores(x[0], x[1], x[2]); }));
  reg.add(op_case("dot_scores", "B=2, S=3, K=4", {{{2, 3, 4}}, {{2, 4}}},
                  [](S x) { return dot_scores(x[0], x[1]); }));
  reg.add(op_case("dot_scores", "same tensor as keys and query rows", {{{2, 1, 3}}}, [](S x) {
    return dot_scores(x[0], reshape(x[0], Shape{2, 3}));
  }));
  reg.add(op_case("weighted_sum", "B=2, S=3, K=4", {{{2, 3}}, {{2, 3, 4}}},
                  [](S x) { return weighted_sum(x[0], x[1]); }));
  reg.add(op_case("weighted_sum", "B=3, S=1, K=2", {{{3, 1}}, {{3, 1, 2}}},
                  [](S x) { return weighted_sum(x[0], x[1]); }));
  // One (B,T,3*h*dk) input as q, k and v (self-attention), a causal mask, dropout: each forward
  // reseeds its Rng so every pass draws the same mask.
  reg.add(op_case(
      "scaled_dot_attention", "self: B=2, T=3, 2 heads of 2, causal, dropout 0.3", {{{2, 3, 12}}},
      [](S x) {
        Rng rng(5);
        const Tensor causal =
            attention_mask(2, 3, 3, x[0].dtype(), [](auto, auto t, auto j) { return j <= t; });
        return scaled_dot_attention(x[0], x[0], x[0], 2, 2, {0, 4, 8}, causal, 0.3, rng, true);
      }));
  // Separate q, k and v with heads that start past column 0, a key mask with a masked key.
  reg.add(op_case(
      "scaled_dot_attention", "cross: T=2, S=3, 2 heads of 2, key mask",
      {{{2, 2, 5}}, {{2, 3, 6}}, {{2, 3, 4}}}, [](S x) {
        Rng rng(6);
        const Tensor keys = attention_mask(2, 1, 3, x[0].dtype(),
                                           [](auto b, auto, auto j) { return b == 0 || j < 2; });
        return scaled_dot_attention(x[0], x[1], x[2], 2, 2, {1, 2, 0}, keys, 0.0, rng, true);
      }));
  reg.add(op_case("scaled_dot_attention", "one head of 3, no mask, evaluation",
                  {{{1, 2, 3}}, {{1, 4, 3}}, {{1, 4, 3}}}, [](S x) {
                    Rng rng(7);
                    return scaled_dot_attention(x[0], x[1], x[2], 1, 3, {}, Tensor(), 0.5, rng,
                                                false);
                  }));
}

}  // namespace tapestry::ops
