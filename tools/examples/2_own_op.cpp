// Example 2: your own op. swish(x) = x sigmoid(x) written as Tapestry's ops are (forward and
// backward side by side, the backward accumulating into dx), registered with the tape, checked in
// float64 by the public gradient checker, then used in a model that fits sin(x).
#include <tapestry/tapestry.h>

#include <cmath>
#include <cstdio>

using namespace tapestry;

// ---------------------------------------------------------------------------------------------
// swish
// y = x s(x), s = sigmoid(x);  dx += dy * (s + y (1 - s))
void swish_backward(Tape& tape, const Node& n) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;  // the input is a constant
  const Tensor& x = tape.saved(n, 0);
  dispatch(x.dtype(), [&](auto tag) {  // one loop for float and double
    using T = decltype(tag);
    const T *px = x.data<T>(), *py = n.value.data<T>(), *dy = n.grad.data<T>();
    T* d = dx->data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const T s = 1 / (1 + std::exp(-px[i]));
      d[i] += dy[i] * (s + py[i] * (1 - s));
    }
  });
}
TAPESTRY_OP(kSwish, "swish", swish_backward, "y = x sigmoid(x);  dx += dy * (s + y (1 - s))");

Var swish(const Var& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.value().data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] / (1 + std::exp(-px[i]));
  });
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));  // nothing needs a gradient: compute only
  int32_t id = tape->record(kSwish, std::move(y), {&x});
  tape->save(id, x.value());  // what the backward reads (y is the node's own value)
  return tape->output(id);
}

int main() {
  // 1. The gradient against finite differences, in float64, on random inputs in [-4, 4).
  GradcheckResult check = gradcheck([](std::span<const Var> x) { return swish(x[0]); },
                                    {Shape{3, 4}}, {.lo = -4, .hi = 4});
  std::printf("gradient check of swish:\n%s\n", gradcheck_table(check).c_str());

  // 2. In a model: 1 -> 16 (swish) -> 1 fits y = sin(x) on [-3, 3].
  Rng rng(1);
  nn::Linear l1(1, 16, true, rng), l2(16, 1, true, rng);
  std::vector<nn::Parameter*> params = l1.parameters();
  for (nn::Parameter* p : l2.parameters()) params.push_back(p);
  nn::Adam opt(params, 0.01);
  Tensor x = Tensor::empty({64, 1}, DType::f32), y = Tensor::empty({64, 1}, DType::f32);
  for (int i = 0; i < 64; ++i) {
    x.set(i, -3 + 6.0 * i / 63);
    y.set(i, std::sin(x.at(i)));
  }
  Tape tape;
  double first = 0, last = 0;
  for (int step = 0; step < 500; ++step) {
    tape.clear();
    Var d = l2.forward(tape, swish(l1.forward(tape, x))) - y;
    Var loss = ops::mean(d * d);
    opt.zero_grad();
    tape.backward(loss);
    opt.step();
    (step == 0 ? first : last) = loss.value().item();
  }
  std::printf("fitting sin(x) with a swish layer: mean squared error %.4f -> %.6f\n", first, last);
  return check.pass && last < 1e-3 ? 0 : 1;
}
