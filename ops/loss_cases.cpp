// Gradient-check cases for cross_entropy: plain, with ignored rows, V = 1, a larger vocabulary,
// with label smoothing.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/loss.h"

namespace tapestry::ops {

void add_loss_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  auto ce = [](std::vector<int32_t> targets, int32_t ignore_index = -100, double smoothing = 0) {
    return [targets, ignore_index, smoothing](S x) {
      return cross_entropy(x[0], targets, ignore_index, smoothing);
    };
  };
  reg.add(op_case("cross_entropy", "no ignored rows", {{{4, 5}, -3, 3}}, ce({0, 3, 4, 1})));
  reg.add(op_case("cross_entropy", "ignore_index 0 (padding)", {{{6, 5}, -3, 3}},
                  ce({2, 0, 4, 0, 1, 3}, 0)));
  reg.add(op_case("cross_entropy", "default ignore_index -100", {{{4, 3}, -3, 3}},
                  ce({1, -100, 2, -100})));
  reg.add(op_case("cross_entropy", "single row", {{{1, 6}, -3, 3}}, ce({5})));
  reg.add(op_case("cross_entropy", "V = 1", {{{3, 1}, -3, 3}}, ce({0, 0, 0})));
  reg.add(op_case("cross_entropy", "larger V = 50", {{{3, 50}, -3, 3}}, ce({7, 49, 0})));
  reg.add(op_case("cross_entropy", "large logits [50,60]", {{{3, 4}, 50, 60}}, ce({1, 3, 0})));
  reg.add(op_case("cross_entropy", "every row ignored", {{{2, 4}, -3, 3}}, ce({-100, -100})));
  reg.add(op_case("cross_entropy", "label smoothing 0.1, a row ignored", {{{5, 6}, -3, 3}},
                  ce({2, -100, 5, 0, 3}, -100, 0.1)));
  reg.add(op_case("cross_entropy", "label smoothing 0.3, padding 0", {{{4, 7}, -3, 3}},
                  ce({0, 6, 1, 0}, 0, 0.3)));
  reg.add(op_case("cross_entropy", "label smoothing 0.1, V = 50", {{{3, 50}, -3, 3}},
                  ce({7, 49, 0}, -100, 0.1)));
  reg.add(op_case("cross_entropy", "label smoothing 0.9, large logits", {{{3, 4}, 50, 60}},
                  ce({1, 3, 0}, -100, 0.9)));
}

}  // namespace tapestry::ops
