// Gradient-check cases for gather, masked_fill and where; indices and masks are fixed constants.
#include <vector>

#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/index.h"

namespace tapestry::ops {

namespace {
// A float64 constant of `shape` from row-major values (masks and conditions).
Tensor constant(std::initializer_list<double> values, const Shape& shape) {
  return Tensor::from(values, shape, DType::f64);
}
}  // namespace

void add_index_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  using Idx = std::vector<int32_t>;

  // gather: table (V,E) or (V,)
  reg.add(op_case("gather", "distinct indices", {{{5, 3}}},
                  [idx = Idx{3, 0, 4}](S x) { return gather(x[0], idx); }));
  reg.add(op_case("gather", "repeated indices accumulate", {{{4, 3}}},
                  [idx = Idx{1, 3, 1, 1, 0}](S x) { return gather(x[0], idx); }));
  reg.add(
      op_case("gather", "(B,S) indices into (V,E)", {{{5, 4}}}, [idx = Idx{4, 1, 0, 1, 3, 4}](S x) {
        return gather(x[0], idx, Shape{2, 3});
      }));
  reg.add(op_case("gather", "(B,S) with a no-gradient (padding) id absent", {{{5, 2}}},
                  [idx = Idx{1, 2, 4, 4}](S x) {
                    return gather(x[0], idx, Shape{2, 2}, 0);
                  }));
  reg.add(op_case("gather", "1-D table", {{{6}}},
                  [idx = Idx{5, 2, 2, 0}](S x) { return gather(x[0], idx); }));

  // masked_fill: x (B,T,S)
  reg.add(op_case("masked_fill", "same-shape mask", {{{3, 4}}},
                  [mask = constant({0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0}, {3, 4})](S x) {
                    return masked_fill(x[0], mask, -5.0);
                  }));
  reg.add(op_case("masked_fill", "broadcast mask (B,1,S)", {{{2, 3, 4}}},
                  [mask = constant({0, 0, 0, 1, 0, 0, 1, 1}, {2, 1, 4})](S x) {
                    return masked_fill(x[0], mask, -3.0);
                  }));

  // where: a, b (B,T,S), cond broadcast from (B,1,S)
  reg.add(op_case("where", "broadcast cond (B,1,S), a and b", {{{2, 3, 4}}, {{2, 3, 4}}},
                  [cond = constant({1, 0, 1, 1, 0, 0, 1, 0}, {2, 1, 4})](S x) {
                    return where(cond, x[0], x[1]);
                  }));
}

}  // namespace tapestry::ops
