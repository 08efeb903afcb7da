// Gradient-check cases for the reductions: one axis, several, all, keepdim, negative axes.
#include <string>

#include "tapestry/ops/arith.h"
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/reduce.h"

namespace tapestry::ops {

void add_reduce_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  struct Reduction {
    const char* op;
    Var (*fn)(const Var&, std::initializer_list<int>, bool);
    Var (*all)(const Var&);
  };
  for (Reduction r : {Reduction{"sum", sum, sum}, Reduction{"mean", mean, mean}}) {
    auto fn = r.fn;
    reg.add(op_case(r.op, "axis 1", {{{2, 3, 4}}}, [fn](S x) { return fn(x[0], {1}, false); }));
    reg.add(op_case(r.op, "axes 0 and 2", {{{2, 3, 4}}}, [fn](S x) {
      return fn(x[0], {0, 2}, false);
    }));
    reg.add(op_case(r.op, "axes 2 and 0, keepdim", {{{2, 3, 4}}}, [fn](S x) {
      return fn(x[0], {2, 0}, true);
    }));
    reg.add(op_case(r.op, "axis 1 keepdim", {{{3, 4}}}, [fn](S x) { return fn(x[0], {1}, true); }));
    reg.add(op_case(r.op, "negative axes -1 and -3", {{{2, 3, 4}}}, [fn](S x) {
      return fn(x[0], {-1, -3}, false);
    }));
    reg.add(op_case(r.op, "all axes listed, keepdim", {{{2, 3, 4}}}, [fn](S x) {
      return fn(x[0], {0, 1, 2}, true);
    }));
    reg.add(op_case(r.op, "everything -> scalar", {{{3, 4}}},
                    [all = r.all](S x) { return all(x[0]); }));
    reg.add(
        op_case(r.op, "no axes (identity)", {{{2, 3}}}, [fn](S x) { return fn(x[0], {}, false); }));
  }
  reg.add(op_case("sum", "input reused: sum + mean", {{{3, 4}}},
                  [](S x) { return add(sum(x[0], {0}), mean(x[0], {0})); }));
  for (int axis : {0, 1, 2}) {
    reg.add(op_case("max", "axis " + std::to_string(axis) + " of (3,4,5)", {{{3, 4, 5}}},
                    [axis](S x) { return max(x[0], axis); }));
  }
  reg.add(op_case("max", "axis -1 keepdim", {{{4, 6}}}, [](S x) { return max(x[0], -1, true); }));
  reg.add(op_case("max", "axis 0 of a vector", {{{7}}}, [](S x) { return max(x[0], 0); }));
}

}  // namespace tapestry::ops
