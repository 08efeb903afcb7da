// The public gradient checker for a user's own code: a function of Vars and a module of one's own,
// its options, its table, what it refuses, and that it leaves the user's parameters as they were.
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>

#include "tapestry/core/gradcheck.h"
#include "tapestry/nn/gradcheck_module.h"
#include "tapestry/nn/linear.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using Catch::Matchers::Contains;
using S = std::span<const Var>;

TEST_CASE("gradcheck passes a correct function and reports every input", "[gradcheck-api]") {
  // y = tanh(a) * b + a^2, with a broadcast b
  auto fn = [](S x) { return ops::tanh(x[0]) * x[1] + x[0] * x[0]; };
  GradcheckResult r = gradcheck(fn, {Shape{2, 3}, Shape{3}});
  REQUIRE(r.error.empty());
  CHECK(r.pass);
  REQUIRE(r.tensors.size() == 2);
  CHECK(r.tensors[0].name == "x0");
  CHECK(r.tensors[0].shape == Shape{2, 3});
  CHECK(r.tensors[1].shape == Shape{3});
  for (const auto& t : r.tensors) {
    CHECK(t.pass);
    CHECK(t.max_rel < 1e-6);
    CHECK(std::abs(t.analytic - t.numeric) <= t.max_abs);
  }
  const std::string table = gradcheck_table(r);
  CHECK_THAT(table, Contains("x0") && Contains("(2,3)") && Contains("x1") && Contains("(3)") &&
                        Contains("2 inputs checked, 0 failed") && Contains("PASS"));
}

TEST_CASE("gradcheck fails a function whose gradient is wrong, and names the input",
          "[gradcheck-api]") {
  // x * (a constant copy of x): the tape sees one path (dy/dx = x), the function two (2x).
  auto fn = [](S x) { return x[0] * Var(x[0].value().clone()); };
  GradcheckResult r = gradcheck(fn, {Tensor::from({0.5, -1.5, 2.0}, {3}, DType::f64)});
  CHECK_FALSE(r.pass);
  REQUIRE(r.tensors.size() == 1);
  CHECK_FALSE(r.tensors[0].pass);
  // The worst element is the largest |x|: analytic r x against numeric 2 r x.
  CHECK(r.tensors[0].worst == 2);
  CHECK(r.tensors[0].numeric == Approx(2 * r.tensors[0].analytic).epsilon(1e-6));
  CHECK_THAT(gradcheck_table(r), Contains("FAIL") && Contains("[2]"));
}

TEST_CASE("gradcheck's options: step, fourth order, tolerance, seed, points to avoid",
          "[gradcheck-api]") {
  auto relu = [](S x) { return ops::relu(x[0]); };
  // Sampled inputs keep away from relu's kink.
  GradcheckResult sampled = gradcheck(relu, {Shape{50}}, {.avoid = {0.0}, .margin = 0.05});
  CHECK(sampled.pass);
  // A given input on the kink is refused, naming it.
  REQUIRE_THROWS_AS(
      gradcheck(relu, {Tensor::from({0.3, 0.0004}, {2}, DType::f64)}, {.avoid = {0.0}}),
      ValueError);
  REQUIRE_THROWS_WITH(
      gradcheck(relu, {Tensor::from({0.3, 0.0004}, {2}, DType::f64)}, {.avoid = {0.0}}),
      Contains("x0 element 1") && Contains("point to avoid"));
  // A coarse step fails central differences on a curved function; fourth order passes it.
  auto cube = [](S x) { return ops::pow(x[0], 3.0); };
  CHECK_FALSE(gradcheck(cube, {Shape{4}}, {.eps = 1e-2, .tol = 1e-6}).pass);
  CHECK(gradcheck(cube, {Shape{4}}, {.eps = 1e-2, .fourth_order = true, .tol = 1e-6}).pass);
  // Float32 inputs are checked in float64; the seed picks the random weighting.
  GradcheckResult a = gradcheck(cube, {Tensor::from({0.5, 1.0}, {2}, DType::f32)}, {.seed = 1});
  GradcheckResult b = gradcheck(cube, {Tensor::from({0.5, 1.0}, {2}, DType::f32)}, {.seed = 2});
  CHECK(a.pass);
  CHECK(a.tensors[0].analytic != b.tensors[0].analytic);
  // Nothing to check, or no function, is refused.
  REQUIRE_THROWS_AS(gradcheck(cube, std::vector<Tensor>{}), ValueError);
  REQUIRE_THROWS_AS(gradcheck({}, {Shape{2}}), ValueError);
}

TEST_CASE("gradcheck_module checks a module's parameters and inputs", "[gradcheck-api]") {
  Rng rng(2);
  nn::Linear layer(3, 2, true, rng, DType::f64);
  auto fn = [&](Tape& tape, S x) { return ops::sigmoid(layer.forward(tape, x[0])); };
  GradcheckResult r =
      nn::gradcheck_module(layer, fn, {rng.uniform_tensor({4, 3}, -1, 1, DType::f64)});
  REQUIRE(r.error.empty());
  CHECK(r.pass);
  REQUIRE(r.tensors.size() == 3);
  CHECK(r.tensors[0].name == "x0");
  CHECK(r.tensors[1].name == "weight");
  CHECK(r.tensors[2].name == "bias");

  nn::Linear single(3, 2, true, rng);  // float32
  REQUIRE_THROWS_AS(
      nn::gradcheck_module(single, fn, {rng.uniform_tensor({4, 3}, -1, 1, DType::f64)}),
      DTypeError);
  REQUIRE_THROWS_WITH(
      nn::gradcheck_module(single, fn, {rng.uniform_tensor({4, 3}, -1, 1, DType::f64)}),
      Contains("'weight' is float32"));
}

TEST_CASE("a function that throws leaves the module's parameters as they were", "[gradcheck-api]") {
  Rng rng(3);
  nn::Linear layer(2, 2, true, rng, DType::f64);
  const std::vector<double> before = layer.weight().value.to_vector();
  // Evaluation 1 is the analytic pass, 2 to 5 perturb the input's two elements, 6 and 7 the
  // weight's first: the 7th throws while that weight is moved by -h.
  int calls = 0;
  auto fn = [&](Tape& tape, S x) {
    if (++calls == 7) throw std::runtime_error("the seventh evaluation fails");
    return layer.forward(tape, x[0]);
  };
  GradcheckResult r =
      nn::gradcheck_module(layer, fn, {rng.uniform_tensor({1, 2}, -1, 1, DType::f64)});
  CHECK_FALSE(r.pass);
  CHECK(calls == 7);
  CHECK_THAT(r.error, Contains("seventh evaluation"));
  CHECK_THAT(gradcheck_table(r), Contains("error: the seventh evaluation fails"));
  CHECK(layer.weight().value.to_vector() == before);
}
