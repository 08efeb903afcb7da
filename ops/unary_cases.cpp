// Gradient-check cases for the elementwise nonlinearities, inside each function's domain.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/unary.h"

namespace tapestry::ops {

void add_unary_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  reg.add(op_case("exp", "(3,4) in [-2,2]", {{{3, 4}, -2, 2}}, [](S x) { return exp(x[0]); }));
  reg.add(op_case("log", "(3,4) in [0.1,3]", {{{3, 4}, 0.1, 3}}, [](S x) { return log(x[0]); }));
  reg.add(op_case("sqrt", "(3,4) in [0.1,3]", {{{3, 4}, 0.1, 3}}, [](S x) { return sqrt(x[0]); }));
  reg.add(op_case("pow", "p = 3 on [-2,2]", {{{2, 5}, -2, 2}}, [](S x) { return pow(x[0], 3.0); }));
  reg.add(op_case("pow", "p = -1.5 on [0.2,2]", {{{2, 5}, 0.2, 2}},
                  [](S x) { return pow(x[0], -1.5); }));
  reg.add(op_case("tanh", "(3,4) in [-3,3]", {{{3, 4}, -3, 3}}, [](S x) { return tanh(x[0]); }));
  reg.add(
      op_case("sigmoid", "(3,4) in [-6,6]", {{{3, 4}, -6, 6}}, [](S x) { return sigmoid(x[0]); }));
  reg.add(op_case("relu", "(4,5) away from 0", {{{4, 5}, -1, 1, {0.0}}},
                  [](S x) { return relu(x[0]); }));
  reg.add(op_case("tanh", "scalar", {{{}, -1, 1}}, [](S x) { return tanh(x[0]); }));
  reg.add(op_case("gelu", "(3,4) in [-4,4]", {{{3, 4}, -4, 4}}, [](S x) { return gelu(x[0]); }));
}

}  // namespace tapestry::ops
