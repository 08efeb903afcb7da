// Elementwise nonlinearities. Each backward reads the saved input or, cheaper, the output y.
#include "tapestry/ops/unary.h"

#include <cmath>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {

// One of the kernels' float array loops (core/cpu_kernels.h), e.g. &cpu::Kernels::exp.
using ArrayLoop = void (*)(const float*, float*, int64_t);
using ArrayKernel = ArrayLoop cpu::Kernels::*;

// y[i] = f(x[i]); in float through `fast` of the kernels in use when given.
template <class F>
Tensor map(const Tensor& x, F f, ArrayKernel fast = nullptr) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  if (fast && x.dtype() == DType::f32) {
    (cpu::kernels().*fast)(x.data<float>(), y.data<float>(), x.numel());
    return y;
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) py[i] = f(px[i]);
  });
  return y;
}

// dx[i] += g(dy[i], s[i]) where s is the tensor the backward reads (the input x or the output y).
template <class G>
void map_backward(Tape& tape, const Node& n, const Tensor& s, G g) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    const T* ps = s.data<T>();
    T* d = dx->data<T>();
    for (int64_t i = 0, m = dx->numel(); i < m; ++i) d[i] += g(dy[i], ps[i]);
  });
}

Var record(const OpDef& op, Tensor y, const Var& x, bool save_x, double s0 = 0) {
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(op, std::move(y), {&x});
  if (save_x) tape->save(id, x.value());
  tape->set_scalars(id, s0);
  return tape->output(id);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// exp
// y = exp(x);  dx += dy * y
void exp_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, n.value, [](auto dy, auto y) { return dy * y; });
}
TAPESTRY_OP(kExp, "exp", exp_backward, "y = exp(x);  dx += dy * y");

Var exp(const Var& x) {
  return record(kExp,
                map(
                    x.value(), [](auto v) { return detail::exp(v); }, &cpu::Kernels::exp),
                x, false);
}

// ---------------------------------------------------------------------------------------------
// log
// y = log(x);  dx += dy / x
void log_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, tape.saved(n, 0), [](auto dy, auto x) { return dy / x; });
}
TAPESTRY_OP(kLog, "log", log_backward, "y = log(x);  dx += dy / x");

Var log(const Var& x) {
  return record(kLog, map(x.value(), [](auto v) { return std::log(v); }), x, true);
}

// ---------------------------------------------------------------------------------------------
// sqrt
// y = sqrt(x);  dx += dy / (2 y)
void sqrt_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, n.value, [](auto dy, auto y) { return dy / (y + y); });
}
TAPESTRY_OP(kSqrt, "sqrt", sqrt_backward, "y = sqrt(x);  dx += dy / (2 y)");

Var sqrt(const Var& x) {
  return record(kSqrt, map(x.value(), [](auto v) { return std::sqrt(v); }), x, false);
}

// ---------------------------------------------------------------------------------------------
// pow
// y = x^p;  dx += dy * p * x^(p-1)
void pow_backward(Tape& tape, const Node& n) {
  const double p = n.scalar[0];
  map_backward(tape, n, tape.saved(n, 0), [p](auto dy, auto x) {
    using T = decltype(x);
    return dy * static_cast<T>(p) * std::pow(x, static_cast<T>(p - 1));
  });
}
TAPESTRY_OP(kPow, "pow", pow_backward, "y = x^p;  dx += dy * p * x^(p-1)");

Var pow(const Var& x, double p) {
  return record(kPow,
                map(x.value(), [p](auto v) { return std::pow(v, static_cast<decltype(v)>(p)); }), x,
                true, p);
}

// ---------------------------------------------------------------------------------------------
// tanh
// y = tanh(x);  dx += dy * (1 - y*y)
void tanh_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, n.value, [](auto dy, auto y) { return dy * (1 - y * y); });
}
TAPESTRY_OP(kTanh, "tanh", tanh_backward, "y = tanh(x);  dx += dy * (1 - y*y)");

Var tanh(const Var& x) {
  return record(kTanh,
                map(
                    x.value(), [](auto v) { return detail::tanh(v); }, &cpu::Kernels::tanh),
                x, false);
}

// ---------------------------------------------------------------------------------------------
// sigmoid
// y = 1 / (1 + exp(-x));  dx += dy * y * (1 - y)
void sigmoid_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, n.value, [](auto dy, auto y) { return dy * y * (1 - y); });
}
TAPESTRY_OP(kSigmoid, "sigmoid", sigmoid_backward,
            "y = 1 / (1 + exp(-x));  dx += dy * y * (1 - y)");

Var sigmoid(const Var& x) {
  return record(kSigmoid,
                map(
                    x.value(), [](auto v) { return detail::sigmoid(v); }, &cpu::Kernels::sigmoid),
                x, false);
}

// ---------------------------------------------------------------------------------------------
// relu
// y = max(x, 0);  dx += dy * (y > 0)
void relu_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, n.value, [](auto dy, auto y) { return y > 0 ? dy : decltype(dy)(0); });
}
TAPESTRY_OP(kRelu, "relu", relu_backward, "y = max(x, 0);  dx += dy * (x > 0)");

Var relu(const Var& x) {
  return record(kRelu, map(x.value(), [](auto v) { return v > 0 ? v : decltype(v)(0); }), x, false);
}

// ---------------------------------------------------------------------------------------------
// gelu (exact, with erf, as torch.nn.GELU() by default)
// y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2;  dx += dy * (Phi(x) + x phi(x)),
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi).   Saved: x.
void gelu_backward(Tape& tape, const Node& n) {
  map_backward(tape, n, tape.saved(n, 0), [](auto dy, auto x) {
    using T = decltype(x);
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
    return dy * (cdf + x * pdf);
  });
}
TAPESTRY_OP(kGelu, "gelu", gelu_backward,
            "y = x Phi(x);  dx += dy * (Phi(x) + x phi(x)) (Phi, phi: the normal's cdf and pdf)");

Var gelu(const Var& x) {
  return record(kGelu,
                map(x.value(),
                    [](auto v) {
                      using T = decltype(v);
                      return T(0.5) * v * (T(1) + std::erf(v * T(M_SQRT1_2)));
                    }),
                x, true);
}

}  // namespace tapestry::ops
