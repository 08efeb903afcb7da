// Gradient-check cases for the arithmetic ops: same shapes, broadcasting both ways, scalars.
#include "tapestry/ops/arith.h"
#include "tapestry/ops/gradcheck_cases.h"

namespace tapestry::ops {

void add_arith_cases(GradcheckRegistry& reg) {
  using S = std::span<const Var>;
  struct Binary {
    const char* op;
    Var (*fn)(const Var&, const Var&);
    double lo_b;  // div keeps b away from 0
  };
  for (Binary b : {Binary{"add", add, -1}, Binary{"sub", sub, -1}, Binary{"mul", mul, -1},
                   Binary{"div", div, 0.5}}) {
    auto f = [fn = b.fn](S x) { return fn(x[0], x[1]); };
    auto spec = [&](Shape s) { return InputSpec{s, b.lo_b, 2}; };
    reg.add(op_case(b.op, "same shape", {{{3, 4}}, spec({3, 4})}, f));
    reg.add(op_case(b.op, "broadcast row", {{{2, 3, 4}}, spec({4})}, f));
    reg.add(op_case(b.op, "broadcast column", {{{3, 4}}, spec({3, 1})}, f));
    reg.add(op_case(b.op, "broadcast both ways", {{{3, 1}}, spec({1, 4})}, f));
    reg.add(op_case(b.op, "scalar", {{{2, 3}}, spec({})}, f));
    reg.add(op_case(b.op, "lhs broadcast", {{{4}}, spec({2, 3, 4})}, f));
    reg.add(op_case(b.op, "empty", {{{0, 3}}, spec({3})}, f));
  }
  reg.add(op_case("neg", "(2,3)", {{{2, 3}}}, [](S x) { return neg(x[0]); }));
  reg.add(op_case("scale", "c = -2.5", {{{2, 3}}}, [](S x) { return scale(x[0], -2.5); }));
  reg.add(op_case("add_scalar", "c = 3", {{{4}}}, [](S x) { return add_scalar(x[0], 3.0); }));
  reg.add(op_case("mul", "same input twice (x*x)", {{{5}}}, [](S x) { return mul(x[0], x[0]); }));
}

}  // namespace tapestry::ops
