// Arithmetic ops with NumPy broadcasting; backward sums each gradient over the broadcast axes.
#include "tapestry/ops/arith.h"

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

using detail::for_each_broadcast;

namespace {

// Forward of a broadcasting binary op: y[i] = f(a[ia], b[ib]).
template <class F>
Tensor binary_forward(const char* op, const Var& a, const Var& b, F f) {
  detail::same_dtype(op, a, b);
  Shape out = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor y = Tensor::empty(out, a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.value().data<T>();
    const T* pb = b.value().data<T>();
    T* py = y.data<T>();
    for_each_broadcast(out, a.shape(), b.shape(),
                       [&](int64_t i, int64_t ia, int64_t ib) { py[i] = f(pa[ia], pb[ib]); });
  });
  return y;
}

// Records a binary op; mul and div save their operands, add and sub need only the shapes, which
// the input gradients carry.
Var record_binary(const OpDef& op, Tensor y, const Var& a, const Var& b, bool save_operands) {
  Tape* tape = recording_tape({&a, &b});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(op, std::move(y), {&a, &b});
  if (save_operands) {
    tape->save(id, a.value());
    tape->save(id, b.value());
  }
  return tape->output(id);
}

// dx[ix] += sign * dy[i] for input k, summing dy over the axes along which x was broadcast; the
// gradient of an input of y's own shape is stored where it is new (Tape::input_grad_to_write).
void sum_broadcast_into(Tape& tape, const Node& n, int k, double sign) {
  const int32_t id = tape.inputs(n)[static_cast<size_t>(k)];
  if (id < 0) return;
  const bool whole = tape.node(static_cast<size_t>(id)).value.shape() == n.value.shape();
  bool first = false;
  Tensor* dx = whole ? tape.input_grad_to_write(n, k, &first) : tape.input_grad(n, k);
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    T* d = dx->data<T>();
    const T s = static_cast<T>(sign);
    if (whole) {
      detail::first_or_added(first, [&](auto store) {
        for (int64_t i = 0, count = dx->numel(); i < count; ++i)
          d[i] = store ? s * dy[i] : d[i] + s * dy[i];
      });
      return;
    }
    for_each_broadcast(n.value.shape(), dx->shape(), dx->shape(),
                       [&](int64_t i, int64_t ix, int64_t) { d[ix] += s * dy[i]; });
  });
}

// Backward of a broadcasting binary op: da[ia] += ga(dy, a, b), db[ib] += gb(dy, a, b).
template <class GA, class GB>
void binary_backward(Tape& tape, const Node& n, GA ga, GB gb) {
  const Tensor& a = tape.saved(n, 0);
  const Tensor& b = tape.saved(n, 1);
  Tensor* da = tape.input_grad(n, 0);
  Tensor* db = tape.input_grad(n, 1);
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const T* dy = n.grad.data<T>();
    if (da) {
      T* d = da->data<T>();
      for_each_broadcast(
          n.value.shape(), a.shape(), b.shape(),
          [&](int64_t i, int64_t ia, int64_t ib) { d[ia] += ga(dy[i], pa[ia], pb[ib]); });
    }
    if (db) {
      T* d = db->data<T>();
      for_each_broadcast(
          n.value.shape(), a.shape(), b.shape(),
          [&](int64_t i, int64_t ia, int64_t ib) { d[ib] += gb(dy[i], pa[ia], pb[ib]); });
    }
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// add
// y = a + b;  da += sum_bcast(dy);  db += sum_bcast(dy)
void add_backward(Tape& tape, const Node& n) {
  sum_broadcast_into(tape, n, 0, 1.0);
  sum_broadcast_into(tape, n, 1, 1.0);
}
TAPESTRY_OP(kAdd, "add", add_backward,
            "y = a + b;  da += dy;  db += dy  (summed over broadcast axes)");

Var add(const Var& a, const Var& b) {
  return record_binary(kAdd, binary_forward("add", a, b, [](auto x, auto y) { return x + y; }), a,
                       b, false);
}

// ---------------------------------------------------------------------------------------------
// sub
// y = a - b;  da += sum_bcast(dy);  db -= sum_bcast(dy)
void sub_backward(Tape& tape, const Node& n) {
  sum_broadcast_into(tape, n, 0, 1.0);
  sum_broadcast_into(tape, n, 1, -1.0);
}
TAPESTRY_OP(kSub, "sub", sub_backward,
            "y = a - b;  da += dy;  db += -dy  (summed over broadcast axes)");

Var sub(const Var& a, const Var& b) {
  return record_binary(kSub, binary_forward("sub", a, b, [](auto x, auto y) { return x - y; }), a,
                       b, false);
}

// ---------------------------------------------------------------------------------------------
// mul
// y = a * b;  da += sum_bcast(dy * b);  db += sum_bcast(dy * a)
void mul_backward(Tape& tape, const Node& n) {
  binary_backward(
      tape, n, [](auto dy, auto, auto b) { return dy * b; },
      [](auto dy, auto a, auto) { return dy * a; });
}
TAPESTRY_OP(kMul, "mul", mul_backward,
            "y = a * b;  da += dy * b;  db += dy * a  (summed over broadcast axes)");

Var mul(const Var& a, const Var& b) {
  return record_binary(kMul, binary_forward("mul", a, b, [](auto x, auto y) { return x * y; }), a,
                       b, true);
}

// ---------------------------------------------------------------------------------------------
// div
// y = a / b;  da += sum_bcast(dy / b);  db += sum_bcast(-dy * a / b^2)
void div_backward(Tape& tape, const Node& n) {
  binary_backward(
      tape, n, [](auto dy, auto, auto b) { return dy / b; },
      [](auto dy, auto a, auto b) { return -dy * a / (b * b); });
}
TAPESTRY_OP(kDiv, "div", div_backward,
            "y = a / b;  da += dy / b;  db += -dy * a / b^2  (summed over broadcast axes)");

Var div(const Var& a, const Var& b) {
  return record_binary(kDiv, binary_forward("div", a, b, [](auto x, auto y) { return x / y; }), a,
                       b, true);
}

// ---------------------------------------------------------------------------------------------
// Unary affine ops share one kernel: y = alpha * x + beta.
namespace {
Tensor affine(const Tensor& x, double alpha, double beta) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const T a = static_cast<T>(alpha), c = static_cast<T>(beta);
    for (int64_t i = 0, n = x.numel(); i < n; ++i) py[i] = a * px[i] + c;
  });
  return y;
}

// dx += alpha * dy
void affine_backward(Tape& tape, const Node& n, double alpha) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    T* d = dx->data<T>();
    const T a = static_cast<T>(alpha);
    for (int64_t i = 0, m = dx->numel(); i < m; ++i) d[i] += a * dy[i];
  });
}

Var record_unary(const OpDef& op, Tensor y, const Var& x, double s0) {
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(op, std::move(y), {&x});
  tape->set_scalars(id, s0);
  return tape->output(id);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// neg
// y = -x;  dx += -dy
void neg_backward(Tape& tape, const Node& n) {
  affine_backward(tape, n, -1.0);
}
TAPESTRY_OP(kNeg, "neg", neg_backward, "y = -x;  dx += -dy");

Var neg(const Var& x) {
  return record_unary(kNeg, affine(x.value(), -1.0, 0.0), x, 0);
}

// ---------------------------------------------------------------------------------------------
// scale
// y = c * x;  dx += c * dy
void scale_backward(Tape& tape, const Node& n) {
  affine_backward(tape, n, n.scalar[0]);
}
TAPESTRY_OP(kScale, "scale", scale_backward, "y = c * x;  dx += c * dy");

Var scale(const Var& x, double c) {
  return record_unary(kScale, affine(x.value(), c, 0.0), x, c);
}

// ---------------------------------------------------------------------------------------------
// add_scalar
// y = x + c;  dx += dy
void add_scalar_backward(Tape& tape, const Node& n) {
  affine_backward(tape, n, 1.0);
}
TAPESTRY_OP(kAddScalar, "add_scalar", add_scalar_backward, "y = x + c;  dx += dy");

Var add_scalar(const Var& x, double c) {
  return record_unary(kAddScalar, affine(x.value(), 1.0, c), x, c);
}

}  // namespace tapestry::ops
