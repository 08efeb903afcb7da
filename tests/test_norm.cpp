// Layer normalisation and GELU: values by hand and from PyTorch's definitions, and the fused
// layer_norm equal to the same computation composed from mean, sub, mul and sqrt.
#include <catch2/catch.hpp>
#include <cmath>

#include "results_close.h"
#include "tapestry/core/random.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using tapestry::testing::check_results_close;
using tapestry::testing::Results;

namespace {

// layer_norm from the primitive ops, as a learner would write it.
Var composed_layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
  const int last = x.ndim() - 1;
  Var centred = ops::sub(x, ops::mean(x, {last}, true));
  Var var = ops::mean(ops::mul(centred, centred), {last}, true);
  Var xh = ops::div(centred, ops::sqrt(ops::add_scalar(var, eps)));
  return ops::add(ops::mul(xh, gamma), beta);
}

Tensor random(const Shape& shape, Rng& rng, double lo, double hi) {
  Tensor t = Tensor::empty(shape, DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, lo + (hi - lo) * rng.uniform());
  return t;
}

}  // namespace

TEST_CASE("layer_norm by hand: a row standardised, then scaled and shifted", "[norm]") {
  Tensor x = Tensor::from({1, 2, 3, 10, 10, 10}, {2, 3}, DType::f64);
  Tensor gamma = Tensor::from({1, 2, 3}, {3}, DType::f64);
  Tensor beta = Tensor::from({0, 0, 1}, {3}, DType::f64);
  Tensor y = ops::layer_norm(Var(x), Var(gamma), Var(beta), 1e-5).value();
  const double r = 1 / std::sqrt(2.0 / 3 + 1e-5);  // var of (1, 2, 3) is 2/3
  CHECK(y.at(0) == Approx(-1 * r * 1 + 0).epsilon(1e-14));
  CHECK(y.at(1) == Approx(0).margin(1e-15));
  CHECK(y.at(2) == Approx(1 * r * 3 + 1).epsilon(1e-14));
  // A constant row has no spread: x - mean = 0, so y = beta.
  CHECK(y.at(3) == 0);
  CHECK(y.at(5) == 1);
  CHECK_THROWS_AS(ops::layer_norm(Var(x), Var(beta), Var(Tensor::zeros({2}, DType::f64))),
                  ShapeError);
}

TEST_CASE("layer_norm equals the composed ops, values and gradients", "[norm]") {
  Rng rng(7);
  for (const Shape& shape : {Shape{4, 6}, Shape{2, 3, 8}, Shape{5, 1}}) {
    const int64_t d = shape[shape.ndim() - 1];
    const Tensor x0 = random(shape, rng, -3, 3), g0 = random({d}, rng, 0.5, 1.5),
                 b0 = random({d}, rng, -1, 1), seed = random(shape, rng, -1, 1);
    auto run = [&](bool fused) {
      Tape tape;
      Var x = tape.leaf(x0.clone()), g = tape.leaf(g0.clone()), b = tape.leaf(b0.clone());
      Var y = fused ? ops::layer_norm(x, g, b, 1e-5) : composed_layer_norm(x, g, b, 1e-5);
      tape.backward(y, seed);
      return Results{y.value().to_vector(), tape.grad(x).to_vector(), tape.grad(g).to_vector(),
                     tape.grad(b).to_vector()};
    };
    check_results_close(run(true), run(false), "layer_norm " + shape.str(), 1e-12);
  }
}

TEST_CASE("gelu is x Phi(x) with the normal cdf, as torch.nn.GELU()", "[norm]") {
  // Phi(1) = 0.8413447460685429 and Phi(-1) = 0.15865525393145707 (the normal cdf).
  Tensor x = Tensor::from({1, -1, 0, 3}, {4}, DType::f64);
  Tensor y = ops::gelu(Var(x)).value();
  CHECK(y.at(0) == Approx(0.8413447460685429).epsilon(1e-14));
  CHECK(y.at(1) == Approx(-0.15865525393145707).epsilon(1e-14));
  CHECK(y.at(2) == 0);
  CHECK(y.at(3) == Approx(3 * 0.9986501019683699).epsilon(1e-14));
}
