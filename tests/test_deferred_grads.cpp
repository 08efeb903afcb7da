// Deferred weight gradients: per-step products' weight gradients multiplied at once by the tape.
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;

namespace {

struct Weights {
  Tensor w, u, b, v;  // w: (H,H) read transposed; u: (H,X) through affine; v: (H,H) read as is
};

Weights make_weights(DType dt) {
  Rng rng(7);
  const int64_t h = 5, x = 4;
  return {rng.uniform_tensor({h, h}, -0.5, 0.5, dt), rng.uniform_tensor({h, x}, -0.5, 0.5, dt),
          rng.uniform_tensor({h}, -0.5, 0.5, dt), rng.uniform_tensor({h, h}, -0.5, 0.5, dt)};
}

struct Grads {
  std::vector<double> w, u, b, v;
  int64_t staged = 0;
};

// A recurrence of `steps` steps over `rows` rows that reads every weight at every step, the way
// an RNN and its attention do: h' = tanh(h W^T + x U^T + b + h V2), with V2 = 0.5 V an inner node
// (its gradient reaches the leaf V through the scale's backward, which must see every step's).
Grads run(const Weights& p, DType dt, bool defer, bool anomaly, int steps, int64_t rows) {
  Tensor dw = Tensor::zeros(p.w.shape(), dt), du = Tensor::zeros(p.u.shape(), dt);
  Tensor db = Tensor::zeros(p.b.shape(), dt), dv = Tensor::zeros(p.v.shape(), dt);
  Tape tape;
  tape.set_defer_grads(defer);
  tape.set_detect_anomaly(anomaly);
  Var w = tape.bind(p.w, dw), u = tape.bind(p.u, du), b = tape.bind(p.b, db);
  Var v2 = ops::scale(tape.bind(p.v, dv), 0.5);
  Rng rng(11);
  Var h = Var(rng.uniform_tensor({rows, p.w.dim(0)}, -1, 1, dt));
  for (int t = 0; t < steps; ++t) {
    Var x = Var(rng.uniform_tensor({rows, p.u.dim(1)}, -1, 1, dt));
    h = ops::tanh(ops::matmul(h, w, false, true) + ops::affine(x, u, b) + ops::matmul(h, v2));
  }
  Var loss = ops::sum(h * h);
  tape.backward(loss);
  return {dw.to_vector(), du.to_vector(), db.to_vector(), dv.to_vector(),
          tape.deferred_grads().staged()};
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("per-step products' weight gradients, deferred, equal the products run at once",
          "[tape][deferred]") {
  const auto dt = GENERATE(DType::f64, DType::f32);
  const double tol = dt == DType::f64 ? 1e-13 : 1e-5;
  const Weights p = make_weights(dt);
  const Grads now = run(p, dt, false, false, 6, 3);
  const Grads later = run(p, dt, true, false, 6, 3);
  CHECK(now.staged == 0);
  // Per step: W through matmul, U through affine, V2 through matmul (non-transposed b).
  CHECK(later.staged == 3 * 6);
  CHECK(max_diff(now.w, later.w) < tol);
  CHECK(max_diff(now.u, later.u) < tol);
  CHECK(max_diff(now.b, later.b) < tol);
  CHECK(max_diff(now.v, later.v) < tol);  // the inner node's products ran before its backward
  double norm = 0;
  for (double g : now.v) norm = std::max(norm, std::abs(g));
  CHECK(norm > 1e-3);  // the comparison is of gradients that are there
}

TEST_CASE("anomaly mode and products of many rows run each product at once", "[tape][deferred]") {
  const Weights p = make_weights(DType::f64);
  const Grads now = run(p, DType::f64, false, false, 3, 2);
  const Grads anomaly = run(p, DType::f64, true, true, 3, 2);
  CHECK(anomaly.staged == 0);  // anomaly mode checks every gradient as an op makes it
  CHECK(max_diff(now.w, anomaly.w) == 0.0);
  CHECK(run(p, DType::f64, true, false, 2, 300).staged == 0);  // a batch's rows: no gain
}

TEST_CASE("products of 8 to 255 rows defer only gradients of 1 MB or more", "[tape][deferred]") {
  // Fewer than 8 rows always defer; from 8 rows, only a gradient too big to stay in cache between
  // steps (ops/matmul.cpp, defer_worth_it) does.
  auto staged = [](int64_t rows, int64_t n, int64_t k) {
    Rng rng(5);
    Tensor w = rng.uniform_tensor({n, k}, -0.5, 0.5, DType::f32);
    Tensor dw = Tensor::zeros(w.shape(), DType::f32);
    Tape tape;
    Var y = ops::sum(ops::matmul(Var(rng.uniform_tensor({rows, k}, -1, 1, DType::f32)),
                                 tape.bind(w, dw), false, true));
    tape.backward(y);
    return tape.deferred_grads().staged();
  };
  CHECK(staged(7, 256, 256) == 1);  // few rows
  CHECK(staged(8, 256, 256) == 0);  // 256 KB
  CHECK(staged(16, 256, 256) == 0);
  CHECK(staged(16, 512, 512) == 1);  // 1 MB
  CHECK(staged(255, 512, 512) == 1);
  CHECK(staged(256, 512, 512) == 0);  // a batch's rows
}

TEST_CASE("deferred gradients are dropped by clear and by a new backward", "[tape][deferred]") {
  const Weights p = make_weights(DType::f64);
  Tensor dw = Tensor::zeros(p.w.shape(), DType::f64);
  Tape tape;
  Rng rng(3);
  for (int step = 0; step < 2; ++step) {  // the second step must not see the first's rows
    Var w = tape.bind(p.w, dw);
    Var h = Var(rng.uniform_tensor({2, 5}, -1, 1, DType::f64));
    Var y = ops::sum(ops::matmul(h, w, false, true));
    tape.backward(y);
    CHECK(tape.deferred_grads().staged() == 1);
    CHECK_FALSE(tape.deferred_grads().pending());
    tape.clear();
    CHECK(tape.deferred_grads().staged() == 0);
  }
  // d sum(h W^T) / dW[j][k] = sum over rows of h[r][k], over both steps.
  Rng again(3);
  std::vector<double> col(5, 0.0);
  for (int step = 0; step < 2; ++step) {
    const std::vector<double> h = again.uniform_tensor({2, 5}, -1, 1, DType::f64).to_vector();
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 5; ++k) col[k] += h[r * 5 + k];
  }
  const std::vector<double> g = dw.to_vector();
  for (int j = 0; j < 5; ++j)
    for (int k = 0; k < 5; ++k) CHECK(g[j * 5 + k] == Approx(col[k]).epsilon(1e-12));
}

TEST_CASE("DeferGrads sets deferring for a scope and restores it, also on an exception",
          "[tape][deferred]") {
  Tape tape;
  REQUIRE(tape.defer_grads());
  {
    DeferGrads off(tape, false);
    CHECK_FALSE(tape.defer_grads());
    {
      DeferGrads on(tape, true);
      CHECK(tape.defer_grads());
    }
    CHECK_FALSE(tape.defer_grads());
  }
  CHECK(tape.defer_grads());
  try {
    DeferGrads off(tape, false);
    throw std::runtime_error("leaves the scope");
  } catch (const std::runtime_error&) {
  }
  CHECK(tape.defer_grads());
}
