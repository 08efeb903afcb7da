// Gradient-check cases for layer normalisation: rows of a matrix and of a batch of sequences.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/norm.h"

namespace tapestry::ops {

void add_norm_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  reg.add(op_case("layer_norm", "(4,6), gamma and beta", {{{4, 6}, -2, 2}, {{6}, 0.5, 1.5}, {{6}}},
                  [](S x) { return layer_norm(x[0], x[1], x[2]); }));
  reg.add(op_case("layer_norm", "(2,3,5) batch of sequences",
                  {{{2, 3, 5}, -1, 3}, {{5}, -1.5, 1.5}, {{5}}},
                  [](S x) { return layer_norm(x[0], x[1], x[2], 1e-3); }));
  reg.add(op_case("layer_norm", "D = 2, small spread", {{{3, 2}, -0.1, 0.1}, {{2}}, {{2}}},
                  [](S x) { return layer_norm(x[0], x[1], x[2], 1e-2); }));
}

}  // namespace tapestry::ops
