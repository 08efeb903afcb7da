// Gradient-check cases for softmax and log_softmax: each axis position, masks broadcast or not.
#include "tapestry/ops/gradcheck_cases.h"
#include "tapestry/ops/softmax.h"

namespace tapestry::ops {

void add_softmax_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  constexpr DType f64 = DType::f64;
  // (3,4): position 2 of row 0 masked, row 1 masked entirely, row 2 all real.
  const Tensor rows = Tensor::from({1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1}, {3, 4}, f64);
  // (2,1,4) for x (2,3,4): one mask per batch, shared by its 3 rows.
  const Tensor batch = Tensor::from({1, 1, 0, 1, 1, 0, 1, 1}, {2, 1, 4}, f64);
  // (4,3) for a softmax along axis 0: column 1 masked entirely, a single real entry in column 2.
  const Tensor cols = Tensor::from({1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0}, {4, 3}, f64);
  // (2,3,1,1) for x (2,3,4,3) along axis 1: per batch, whole (4,3) slices masked (slice 1 of
  // batch 0, slice 2 of batch 1).
  const Tensor mid = Tensor::from({1, 0, 1, 1, 1, 0}, {2, 3, 1, 1}, f64);

  struct Family {
    const char* op;
    Var (*fn)(const Var&, int, const Tensor&);
  };
  for (Family f : {Family{"softmax", softmax}, Family{"log_softmax", log_softmax}}) {
    auto with = [fn = f.fn](int axis, Tensor mask) {
      return [fn, axis, mask](S x) { return fn(x[0], axis, mask); };
    };
    reg.add(op_case(f.op, "last axis", {{{3, 5}, -3, 3}}, with(-1, Tensor())));
    reg.add(op_case(f.op, "1-D", {{{6}, -3, 3}}, with(0, Tensor())));
    reg.add(op_case(f.op, "axis 0", {{{4, 3}, -3, 3}}, with(0, Tensor())));
    reg.add(op_case(f.op, "middle axis of 3-D", {{{2, 4, 3}, -3, 3}}, with(1, Tensor())));
    reg.add(op_case(f.op, "rows of one element", {{{3, 1}, -3, 3}}, with(-1, Tensor())));
    reg.add(op_case(f.op, "large inputs [50,60]", {{{2, 5}, 50, 60}}, with(-1, Tensor())));
    reg.add(op_case(f.op, "mask, a row fully masked", {{{3, 4}, -3, 3}}, with(-1, rows)));
    reg.add(op_case(f.op, "mask (B,1,S) broadcast", {{{2, 3, 4}, -3, 3}}, with(2, batch)));
    reg.add(op_case(f.op, "mask along axis 0", {{{4, 3}, -3, 3}}, with(0, cols)));
    reg.add(op_case(f.op, "mask along middle axis", {{{2, 3, 4, 3}, -3, 3}}, with(1, mid)));
  }
}

}  // namespace tapestry::ops
