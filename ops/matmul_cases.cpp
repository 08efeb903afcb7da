// Gradient-check cases for matmul (every shape form and transpose combination) and affine.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/matmul.h"

namespace tapestry::ops {

void add_matmul_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::string t = std::string(ta ? "a^T" : "a") + " " + (tb ? "b^T" : "b");
      auto f = [ta, tb](S x) { return matmul(x[0], x[1], ta, tb); };
      Shape a2 = ta ? Shape{4, 3} : Shape{3, 4}, b2 = tb ? Shape{5, 4} : Shape{4, 5};
      reg.add(op_case("matmul", "2-D " + t, {{a2}, {b2}}, f));
      Shape a3 = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, b3 = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
      reg.add(op_case("matmul", "batched 3-D " + t, {{a3}, {b3}}, f));
      reg.add(op_case("matmul", "3-D by shared 2-D " + t, {{a3}, {b2}}, f));
    }
  }
  reg.add(op_case("matmul", "vector-like (1,4)x(4,1)", {{{1, 4}}, {{4, 1}}},
                  [](S x) { return matmul(x[0], x[1]); }));
  reg.add(op_case("matmul", "a reused: a a^T", {{{3, 4}}},
                  [](S x) { return matmul(x[0], x[0], false, true); }));

  auto lin = [](S x) { return affine(x[0], x[1], x.size() > 2 ? x[2] : Var()); };
  reg.add(op_case("affine", "(N,K) with bias", {{{3, 4}}, {{5, 4}}, {{5}}}, lin));
  reg.add(op_case("affine", "(B,S,K) with bias", {{{2, 3, 4}}, {{5, 4}}, {{5}}}, lin));
  reg.add(op_case("affine", "no bias", {{{3, 4}}, {{2, 4}}}, lin));
  reg.add(op_case("affine", "one row, one output", {{{1, 6}}, {{1, 6}}, {{1}}}, lin));
}

}  // namespace tapestry::ops
