// Gradient-check cases for dropout; each forward reseeds its Rng so every pass draws the same mask.
#include "tapestry/core/random.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/gradcheck_cases.h"

namespace tapestry::ops {

void add_dropout_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  reg.add(op_case("dropout", "p = 0.3, training", {{{4, 5}}}, [](S x) {
    Rng rng(11);
    return dropout(x[0], 0.3, rng, true);
  }));
  reg.add(op_case("dropout", "p = 0.5, training", {{{2, 3, 4}}}, [](S x) {
    Rng rng(12);
    return dropout(x[0], 0.5, rng, true);
  }));
}

}  // namespace tapestry::ops
