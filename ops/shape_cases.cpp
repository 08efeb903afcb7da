// Gradient-check cases for the shape ops: views, axis orders, joins with empty pieces, slices.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/shape_ops.h"

namespace tapestry::ops {

void add_shape_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  reg.add(op_case("reshape", "(2,3,4) -> (6,4)", {{{2, 3, 4}}}, [](S x) {
    return reshape(x[0], Shape{6, 4});
  }));
  reg.add(op_case("reshape", "(2,3,4) -> (4,-1)", {{{2, 3, 4}}}, [](S x) {
    return reshape(x[0], {4, -1});
  }));
  reg.add(op_case("reshape", "(1,1) -> scalar", {{{1, 1}}},
                  [](S x) { return reshape(x[0], Shape{}); }));

  reg.add(op_case("permute", "(2,0,1) of 3-D", {{{2, 3, 4}}}, [](S x) {
    return permute(x[0], {2, 0, 1});
  }));
  reg.add(op_case("permute", "(1,2,0) negative axes", {{{2, 3, 4}}}, [](S x) {
    return permute(x[0], {-2, -1, 0});
  }));
  reg.add(
      op_case("permute", "transpose 2-D", {{{3, 5}}}, [](S x) { return transpose(x[0], 0, 1); }));
  reg.add(op_case("permute", "transpose last two of 4-D", {{{2, 2, 3, 4}}},
                  [](S x) { return transpose(x[0], -1, -2); }));

  auto concat_along = [](int axis) { return [axis](S x) { return concat(x, axis); }; };
  reg.add(op_case("concat", "3 inputs, axis 0", {{{2, 3}}, {{1, 3}}, {{4, 3}}}, concat_along(0)));
  reg.add(op_case("concat", "3 inputs, axis 1", {{{2, 3, 4}}, {{2, 1, 4}}, {{2, 2, 4}}},
                  concat_along(1)));
  reg.add(op_case("concat", "3 inputs, last axis, one empty", {{{2, 3}}, {{2, 0}}, {{2, 5}}},
                  concat_along(-1)));
  reg.add(op_case("concat", "same input twice", {{{2, 3}}}, [](S x) {
    return concat({x[0], x[0]}, 1);
  }));

  auto stack_along = [](int axis) { return [axis](S x) { return stack(x, axis); }; };
  reg.add(op_case("stack", "3 inputs, axis 0", {{{2, 3}}, {{2, 3}}, {{2, 3}}}, stack_along(0)));
  reg.add(op_case("stack", "3 inputs, axis 1", {{{2, 3}}, {{2, 3}}, {{2, 3}}}, stack_along(1)));
  reg.add(op_case("stack", "2 inputs, new last axis", {{{2, 3}}, {{2, 3}}}, stack_along(-1)));

  reg.add(op_case("slice", "middle of axis 1", {{{3, 6, 2}}},
                  [](S x) { return slice(x[0], 1, 2, 3); }));
  reg.add(op_case("slice", "rows of axis 0 (view)", {{{5, 3}}},
                  [](S x) { return slice(x[0], 0, 1, 3); }));
  reg.add(op_case("slice", "last axis", {{{2, 3, 5}}}, [](S x) { return slice(x[0], -1, 3, 2); }));
  reg.add(op_case("slice", "split into 3", {{{3, 7}}}, [](S x) {
    std::vector<Var> p = split(x[0], {2, 3, 2}, 1);
    return concat({p[2], p[0], p[1]}, 1);  // reordered, so each part's gradient lands elsewhere
  }));
}

}  // namespace tapestry::ops
