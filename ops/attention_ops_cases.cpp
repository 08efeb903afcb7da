// Gradient-check cases for the fused attention kernels.
#include "tapestry/ops/attention_ops.h"
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/shape_ops.h"

namespace tapestry::ops {

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
}

}  // namespace tapestry::ops
