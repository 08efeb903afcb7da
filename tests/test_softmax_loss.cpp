// Softmax, log_softmax and cross_entropy: values against hand computation, masks, errors.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/ops/arith.h"
#include "tapestry/ops/kernels.h"
#include "tapestry/ops/loss.h"
#include "tapestry/ops/softmax.h"

using namespace tapestry;
using Catch::Matchers::Contains;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// The message of the exception f throws (empty if it throws none).
template <class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace

TEST_CASE("softmax of [1,2,3]", "[softmax]") {
  const double want[] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748218};
  SECTION("float64") {
    Tensor y = ops::softmax(Tensor::from({1, 2, 3}, {3}, DType::f64)).value();
    for (int i = 0; i < 3; ++i) REQUIRE(y.at(i) == Approx(want[i]).margin(1e-7).epsilon(0));
  }
  SECTION("float32") {
    Tensor y = ops::softmax(Tensor::from({1, 2, 3}, {3}, DType::f32)).value();
    REQUIRE(y.dtype() == DType::f32);
    for (int i = 0; i < 3; ++i) REQUIRE(y.at(i) == Approx(want[i]).margin(1e-6).epsilon(0));
  }
}

TEST_CASE("softmax is invariant to a constant and does not overflow", "[softmax]") {
  Tensor x = Tensor::from({0.5, -1.25, 2, 0.75, 3, -2}, {2, 3}, DType::f64);
  Tensor y = ops::softmax(x).value();
  for (double c : {-1000.0, -7.5, 7.5, 1000.0}) {
    Tensor yc = ops::softmax(x + c).value();
    for (int i = 0; i < 6; ++i) REQUIRE(yc.at(i) == Approx(y.at(i)).margin(1e-12).epsilon(0));
  }
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor big = ops::softmax(Tensor::from({1000, 1001, 1002}, {3}, dt)).value();
    REQUIRE(all_finite(big));
    REQUIRE(big.at(2) == Approx(0.6652409557748218).margin(1e-6).epsilon(0));
    Tensor lbig = ops::log_softmax(Tensor::from({-1000, -1001, -1002}, {3}, dt)).value();
    REQUIRE(all_finite(lbig));
    REQUIRE(lbig.at(0) == Approx(-0.40760596444438013).margin(1e-6).epsilon(0));
  }
}

TEST_CASE("softmax along axis 0 and a middle axis", "[softmax]") {
  // Columns of a (3,2) are the vectors [1,2,3] and [3,2,1].
  Tensor y = ops::softmax(Tensor::from({1, 3, 2, 2, 3, 1}, {3, 2}, DType::f64), 0).value();
  REQUIRE(y.at(0) == Approx(0.09003057317038046));
  REQUIRE(y.at(4) == Approx(0.6652409557748218));
  REQUIRE(y.at(1) == Approx(0.6652409557748218));
  REQUIRE(y.at(5) == Approx(0.09003057317038046));
  // (2,3,2) along axis 1: every (b, :, k) sums to 1.
  Tensor x3 = Tensor::from({1, -2, 0, 3, 2, 1, 4, 0, -1, 2, 0.5, 5}, {2, 3, 2}, DType::f64);
  Tensor y3 = ops::softmax(x3, 1).value();
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 2; ++k) {
      double s = 0;
      for (int t = 0; t < 3; ++t) s += y3.at(b * 6 + t * 2 + k);
      REQUIRE(s == Approx(1.0));
    }
}

TEST_CASE("log_softmax of [1,2,3]", "[softmax]") {
  // log(e + e^2 + e^3) = 3.40760596444438
  const double want[] = {-2.40760596444438, -1.4076059644443801, -0.40760596444438013};
  Tensor y = ops::log_softmax(Tensor::from({1, 2, 3}, {3}, DType::f64)).value();
  for (int i = 0; i < 3; ++i) REQUIRE(y.at(i) == Approx(want[i]).margin(1e-7).epsilon(0));
  Tensor y32 = ops::log_softmax(Tensor::from({1, 2, 3}, {3}, DType::f32)).value();
  for (int i = 0; i < 3; ++i) REQUIRE(y32.at(i) == Approx(want[i]).margin(1e-6).epsilon(0));
}

TEST_CASE("masked softmax: exact zeros, sums to 1 over real positions", "[softmax]") {
  // Masked entries must not matter, however large: [1, 50, 2, 3] with 50 masked is
  // softmax([1,2,3]).
  Tensor x = Tensor::from({1, 50, 2, 3}, {4}, DType::f64);
  Tensor mask = Tensor::from({1, 0, 1, 1}, {4}, DType::f64);
  Tensor y = ops::softmax(x, -1, mask).value();
  REQUIRE(y.at(1) == 0.0);
  REQUIRE(y.at(0) == Approx(0.09003057317038046));
  REQUIRE(y.at(2) == Approx(0.24472847105479764));
  REQUIRE(y.at(3) == Approx(0.6652409557748218));
  Tensor ly = ops::log_softmax(x, -1, mask).value();
  REQUIRE(ly.at(1) == -kInf);
  REQUIRE(ly.at(3) == Approx(-0.40760596444438013));
}

TEST_CASE("masked softmax with a (B,1,S) mask broadcast over (B,T,S)", "[softmax]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = Tensor::from({0.3, -1, 2, 0.5, 1, 1, 1, 1, -3, 4,  0, 2,  //
                             5,   6,  7, 8,   0, 0, 0, 0, 1,  -1, 1, -1},
                            {2, 3, 4}, dt);
    Tensor mask = Tensor::from({1, 1, 0, 1, 0, 1, 1, 0}, {2, 1, 4}, dt);
    Tensor y = ops::softmax(x, -1, mask).value();
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 3; ++t) {
        double sum = 0;
        for (int s = 0; s < 4; ++s) {
          const double v = y.at((b * 3 + t) * 4 + s);
          if (mask.at(b * 4 + s) == 0) {
            REQUIRE(v == 0.0);
          } else {
            REQUIRE(v > 0.0);
            sum += v;
          }
        }
        REQUIRE(sum == Approx(1.0).epsilon(1e-6));
      }
  }
}

TEST_CASE("fully masked rows: zeros / -inf forward, zero gradient, no NaN", "[softmax]") {
  Tensor x = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  Tensor mask = Tensor::from({1, 0, 1, 0, 0, 0}, {2, 3}, DType::f64);
  Tensor seed = Tensor::from({0.5, -1, 2, 3, -4, 1.5}, {2, 3}, DType::f64);
  SECTION("softmax") {
    Tape tape;
    Var xv = tape.leaf(x);
    Var y = ops::softmax(xv, -1, mask);
    for (int i = 3; i < 6; ++i) REQUIRE(y.value().at(i) == 0.0);
    REQUIRE(all_finite(y.value()));
    tape.backward(y, seed);
    Tensor dx = tape.grad(xv);
    REQUIRE(all_finite(dx));
    for (int i : {1, 3, 4, 5}) REQUIRE(dx.at(i) == 0.0);
    // Real row 0 is softmax([1,3]) with seed [0.5, 2]: dx = y * (dy - sum(dy*y)).
    const double p0 = 1 / (1 + std::exp(2.0)), p2 = 1 - p0, dot = 0.5 * p0 + 2 * p2;
    REQUIRE(dx.at(0) == Approx(p0 * (0.5 - dot)));
    REQUIRE(dx.at(2) == Approx(p2 * (2 - dot)));
  }
  SECTION("log_softmax") {
    Tape tape;
    Var xv = tape.leaf(x);
    Var y = ops::log_softmax(xv, -1, mask);
    for (int i : {1, 3, 4, 5}) REQUIRE(y.value().at(i) == -kInf);
    tape.backward(y, seed);
    Tensor dx = tape.grad(xv);
    REQUIRE(all_finite(dx));
    for (int i : {1, 3, 4, 5}) REQUIRE(dx.at(i) == 0.0);
    // dx = dy - p * sum(dy) over the real entries [1,3] with seed [0.5, 2].
    const double p0 = 1 / (1 + std::exp(2.0));
    REQUIRE(dx.at(0) == Approx(0.5 - p0 * 2.5));
    REQUIRE(dx.at(2) == Approx(2 - (1 - p0) * 2.5));
  }
}

TEST_CASE("softmax and log_softmax errors name the op and the shapes", "[softmax]") {
  Tensor x = Tensor::zeros({2, 3}, DType::f64);
  Tensor bad = Tensor::full({2, 4}, 1.0, DType::f64);
  REQUIRE_THROWS_AS(ops::softmax(x, -1, bad), ShapeError);
  std::string msg = message_of([&] { ops::softmax(x, -1, bad); });
  REQUIRE_THAT(msg, Contains("softmax: x (2,3) and mask (2,4)"));
  msg = message_of([&] { ops::log_softmax(x, -1, Tensor::full({3, 1}, 1.0, DType::f64)); });
  REQUIRE_THAT(msg, Contains("log_softmax: x (2,3) and mask (3,1)"));
  // More dimensions than x is no broadcast either.
  REQUIRE_THROWS_AS(ops::softmax(x, -1, Tensor::full({1, 2, 3}, 1.0, DType::f64)), ShapeError);

  Tensor mask32 = Tensor::full({2, 3}, 1.0, DType::f32);
  REQUIRE_THROWS_AS(ops::softmax(x, -1, mask32), DTypeError);
  msg = message_of([&] { ops::log_softmax(x, -1, mask32); });
  REQUIRE_THAT(msg, Contains("log_softmax"));
  REQUIRE_THAT(msg, Contains("(2,3) float32"));

  REQUIRE_THROWS_AS(ops::softmax(x, 2), IndexError);
  REQUIRE_THROWS_AS(ops::log_softmax(x, -3), IndexError);
  REQUIRE_THAT(message_of([&] { ops::softmax(x, 2); }), Contains("softmax") && Contains("(2,3)"));
}

TEST_CASE("cross_entropy of known logits, with ignore_index", "[loss]") {
  // Row 0: logits [0,0,0], target 1: log(3) - 0                    = 1.0986122886681098
  // Row 1: logits [1,2,3], target 2: log(e + e^2 + e^3) - 3        = 0.40760596444438013
  // Row 2: logits [5,0,-5], target 0 = ignore_index: left out.
  // Loss = (1.0986122886681098 + 0.40760596444438013) / 2        = 0.753109126556245
  Tensor z = Tensor::from({0, 0, 0, 1, 2, 3, 5, 0, -5}, {3, 3}, DType::f64);
  const std::vector<int32_t> t = {1, 2, 0};
  REQUIRE(ops::cross_entropy(z, t, 0).value().shape() == Shape{});
  REQUIRE(ops::cross_entropy(z, t, 0).value().item() == Approx(0.753109126556245).epsilon(1e-12));
  // Without ignoring, row 2 adds log(e^5 + 1 + e^-5) - 5 and the mean is over 3 rows.
  const double row2 = std::log(std::exp(5.0) + 1 + std::exp(-5.0)) - 5;
  const double all3 = (1.0986122886681098 + 0.40760596444438013 + row2) / 3;
  REQUIRE(ops::cross_entropy(z, t).value().item() == Approx(all3).epsilon(1e-12));
  // float32 agrees to single precision.
  Tensor z32 = z.to(DType::f32);
  REQUIRE(ops::cross_entropy(z32, t, 0).value().dtype() == DType::f32);
  REQUIRE(ops::cross_entropy(z32, t, 0).value().item() == Approx(0.753109126556245).epsilon(1e-6));
  // Large logits do not overflow: row 1 shifted by 1000 has the same loss.
  Tensor big = Tensor::from({1001, 1002, 1003}, {1, 3}, DType::f64);
  REQUIRE(ops::cross_entropy(big, std::vector<int32_t>{2}).value().item() ==
          Approx(0.40760596444438013).epsilon(1e-12));
}

TEST_CASE("cross_entropy keeps the digits of a confident row's small loss", "[loss]") {
  // logits [30, 0, 0], target 0: L = log(1 + 2 e^-30) = 2 e^-30 - 2 e^-60 + ... (1.87e-13).
  // As log(s) - (z_t - m) with s = 1 + 2 e^-30 rounded to a double, L would keep only about 3
  // significant digits; a trained model's loss is this small, and `tapestry explain` takes finite
  // differences of it.
  Tensor z = Tensor::from({30, 0, 0}, {1, 3}, DType::f64);
  const double want = std::log1p(2 * std::exp(-30.0));
  REQUIRE(ops::cross_entropy(z, std::vector<int32_t>{0}).value().item() ==
          Approx(want).epsilon(1e-14));
  // The maximum elsewhere: target 1 costs 30 + L.
  REQUIRE(ops::cross_entropy(z, std::vector<int32_t>{1}).value().item() ==
          Approx(30 + want).epsilon(1e-14));
}

TEST_CASE("cross_entropy's gradient keeps the digits of a confident row's p - 1", "[loss]") {
  // logits [30, 0, 0], target 0: dL/dz_0 = p_0 - 1 = -2e^-30 / (1 + 2e^-30) (-1.87e-13). As
  // exp(z_0 - lse) - 1 it keeps about 3 digits; the gradients of a trained model's attention are
  // sums of such terms, and `tapestry explain`'s finite-difference check compares them.
  for (DType dtype : {DType::f64, DType::f32}) {
    Tape tape;
    Var z = tape.leaf(Tensor::from({30, 0, 0}, {1, 3}, dtype));
    tape.backward(ops::cross_entropy(z, std::vector<int32_t>{0}));
    const Tensor dz = tape.grad(z);
    const double e = std::exp(-30.0), p0_minus_1 = -2 * e / (1 + 2 * e);
    INFO(dtype_name(dtype));
    const double eps = dtype == DType::f64 ? 1e-14 : 1e-6;
    CHECK(dz.at(0) == Approx(p0_minus_1).epsilon(eps));
    CHECK(dz.at(1) == Approx(e / (1 + 2 * e)).epsilon(eps));
    CHECK(dz.at(2) == Approx(e / (1 + 2 * e)).epsilon(eps));
  }
}

TEST_CASE("cross_entropy of a row holding NaN is NaN", "[loss]") {
  // A diverged model's loss must not come out finite (the trainer skips non-finite steps).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::f64, DType::f32}) {
    for (int at : {0, 1, 2}) {  // below the maximum, the maximum's place, the target
      std::vector<double> v = {0.5, 3, -1};
      v[static_cast<size_t>(at)] = nan;
      Tensor z = Tensor::from(v, {1, 3}, dtype);
      INFO(dtype_name(dtype) << " NaN at " << at);
      CHECK(std::isnan(ops::cross_entropy(z, std::vector<int32_t>{2}).value().item()));
    }
  }
}

TEST_CASE("cross_entropy backward is (softmax - onehot) / count", "[loss]") {
  Tensor z =
      Tensor::from({0.5, -1, 2, 0, 1, 1, 1, 1, 3, -2, 0.25, 4, -1, 0, 1, 2}, {4, 4}, DType::f64);
  const std::vector<int32_t> t = {2, -100, 3, 0};  // row 1 ignored: count = 3
  Tape tape;
  Var zv = tape.leaf(z);
  Var loss = ops::cross_entropy(zv, t);
  tape.backward(loss);
  Tensor dz = tape.grad(zv);
  Tensor p = ops::softmax(z).value();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const double want = t[i] == -100 ? 0.0 : (p.at(i * 4 + j) - (j == t[i] ? 1.0 : 0.0)) / 3;
      REQUIRE(dz.at(i * 4 + j) == Approx(want).margin(1e-15));
    }
  // A seed of 2 doubles it.
  Tape tape2;
  Var zv2 = tape2.leaf(z);
  tape2.backward(ops::cross_entropy(zv2, t), Tensor::scalar(2.0, DType::f64));
  REQUIRE(tape2.grad(zv2).at(0) == Approx(2 * dz.at(0)));
}

TEST_CASE("cross_entropy with every row ignored is 0 with zero gradient", "[loss]") {
  Tensor z = Tensor::from({1, 2, 3, 4}, {2, 2}, DType::f64);
  Tape tape;
  Var zv = tape.leaf(z);
  Var loss = ops::cross_entropy(zv, std::vector<int32_t>{-100, -100});
  REQUIRE(loss.value().item() == 0.0);
  tape.backward(loss);
  Tensor dz = tape.grad(zv);
  for (int i = 0; i < 4; ++i) REQUIRE(dz.at(i) == 0.0);
  // No rows at all.
  REQUIRE(ops::cross_entropy(Tensor::zeros({0, 5}, DType::f64), {}).value().item() == 0.0);
}

TEST_CASE("cross_entropy errors name the op, the shapes, the row and the target", "[loss]") {
  Tensor z = Tensor::zeros({4, 3}, DType::f64);
  const std::vector<int32_t> three = {0, 1, 2};
  REQUIRE_THROWS_AS(ops::cross_entropy(z, three), ShapeError);
  REQUIRE_THAT(message_of([&] { ops::cross_entropy(z, three); }),
               Contains("cross_entropy") && Contains("logits (4,3)") && Contains("targets (3)"));

  Tensor z3 = Tensor::zeros({2, 2, 3}, DType::f64);
  const std::vector<int32_t> two = {0, 1};
  REQUIRE_THROWS_AS(ops::cross_entropy(z3, two), ShapeError);
  REQUIRE_THAT(message_of([&] { ops::cross_entropy(z3, two); }),
               Contains("cross_entropy") && Contains("(2,2,3)") && Contains("2-D"));

  const std::vector<int32_t> out_of_range = {0, 3, 1, 2};
  REQUIRE_THROWS_AS(ops::cross_entropy(z, out_of_range), IndexError);
  REQUIRE_THAT(
      message_of([&] { ops::cross_entropy(z, out_of_range); }),
      Contains("cross_entropy") && Contains("row 1") && Contains("target 3") && Contains("V = 3"));
  // A negative target other than ignore_index is an error too; it is fine once it is ignored.
  const std::vector<int32_t> negative = {0, 1, -1, 2};
  REQUIRE_THROWS_AS(ops::cross_entropy(z, negative), IndexError);
  REQUIRE_NOTHROW(ops::cross_entropy(z, negative, -1));
}

TEST_CASE("cross_entropy with label smoothing, by hand", "[loss]") {
  // Per row (1 - eps)(lse - z_t) + eps mean_j(lse - z_j) = (lse - z_t) + eps (z_t - mean_j z_j).
  // Row 0: logits [0,0,0], target 1: every term is log(3)                 = 1.0986122886681098
  // Row 1: logits [1,2,3], target 2: 0.40760596444438013 + 0.1 (3 - 2)    = 0.50760596444438013
  // Row 2: target 0 = ignore_index: left out.
  // Loss = (1.0986122886681098 + 0.50760596444438013) / 2                = 0.803109126556245
  Tensor z = Tensor::from({0, 0, 0, 1, 2, 3, 5, 0, -5}, {3, 3}, DType::f64);
  const std::vector<int32_t> t = {1, 2, 0};
  Tape tape;
  Var zv = tape.leaf(z);
  Var loss = ops::cross_entropy(zv, t, 0, 0.1);
  REQUIRE(loss.value().item() == Approx(0.803109126556245).epsilon(1e-14));
  // dz = (p - 0.9 onehot - 0.1 / 3) / 2. Row 0: p = 1/3 each, so (0.3, 0.3 - 0.9, 0.3) / 2.
  tape.backward(loss);
  const Tensor dz = tape.grad(zv);
  const double p1[] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748218};
  const double u = 0.1 / 3;
  const double row0[] = {0.15, -0.3, 0.15};
  const double row1[] = {(p1[0] - u) / 2, (p1[1] - u) / 2, (p1[2] - 0.9 - u) / 2};
  for (int j = 0; j < 3; ++j) {
    INFO("class " << j);
    CHECK(dz.at(j) == Approx(row0[j]).margin(1e-15).epsilon(0));
    CHECK(dz.at(3 + j) == Approx(row1[j]).margin(1e-15).epsilon(0));
    CHECK(dz.at(6 + j) == 0.0);  // the ignored row
  }
  // float32 agrees to single precision.
  REQUIRE(ops::cross_entropy(z.to(DType::f32), t, 0, 0.1).value().item() ==
          Approx(0.803109126556245).epsilon(1e-6));
}

TEST_CASE("cross_entropy backward with label smoothing is (p - (1-eps) onehot - eps/V) / count",
          "[loss]") {
  Rng rng(5);
  const int64_t n = 6, v = 37;  // 37: full lanes and a tail in every row loop
  Tensor z = rng.uniform_tensor({n, v}, -4, 4, DType::f64);
  const std::vector<int32_t> t = {3, -100, 36, 0, 17, -100};  // count 4
  const double eps = 0.25;
  Tape tape;
  Var zv = tape.leaf(z);
  Var loss = ops::cross_entropy(zv, t, -100, eps);
  tape.backward(loss);
  const Tensor dz = tape.grad(zv);
  const Tensor p = ops::softmax(z).value();
  double want_loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    double lse = 0, mean = 0;
    for (int64_t j = 0; j < v; ++j) {
      lse += std::exp(z.at(i * v + j));
      mean += z.at(i * v + j) / v;
    }
    lse = std::log(lse);
    if (t[i] != -100) want_loss += (1 - eps) * (lse - z.at(i * v + t[i])) + eps * (lse - mean);
    for (int64_t j = 0; j < v; ++j) {
      const double want =
          t[i] == -100 ? 0.0 : (p.at(i * v + j) - (j == t[i] ? 1 - eps : 0.0) - eps / v) / 4;
      INFO("row " << i << ", class " << j);
      REQUIRE(dz.at(i * v + j) == Approx(want).margin(1e-15).epsilon(0));
    }
  }
  CHECK(loss.value().item() == Approx(want_loss / 4).epsilon(1e-13));
}

namespace {
// The unsmoothed loss and gradient written out (lse in two parts, expm1 for the target's p - 1).
// label_smoothing = 0 must give these bits, not merely close values: a model trained without
// smoothing trains exactly as before.
template <class T>
std::pair<double, std::vector<double>> plain_cross_entropy(const Tensor& z,
                                                           const std::vector<int32_t>& t,
                                                           int32_t ignore_index) {
  const int64_t n = z.dim(0), v = z.dim(1);
  const T* pz = z.data<T>();
  double total = 0;
  int64_t count = 0;
  std::vector<T> m(static_cast<size_t>(n)), r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) continue;
    m[i] = ops::detail::max_value(pz + i * v, v);
    r[i] = std::log1p(ops::detail::softmax_rest(pz + i * v, v, m[i]));
    total += static_cast<double>(r[i] + (m[i] - pz[i * v + t[i]]));
    ++count;
  }
  const auto loss = static_cast<T>(total / static_cast<double>(count));
  std::vector<double> grad(static_cast<size_t>(n * v), 0.0);
  const auto g = static_cast<T>(T(1) / static_cast<double>(count));
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) continue;
    for (int64_t j = 0; j < v; ++j) {
      const T x = (pz[i * v + j] - m[i]) - r[i];
      // float's e^x through the kernels in use: the op's rows are compiled for their
      // instruction set, where the exp's polynomial may fuse into FMAs, and this file is not.
      T e;
      if constexpr (std::is_same_v<T, float>)
        cpu::kernels().exp(&x, &e, 1);
      else
        e = ops::detail::exp(x);
      grad[i * v + j] = g * (j == t[i] ? std::expm1(x) : e);
    }
  }
  return {loss, grad};
}
}  // namespace

TEST_CASE("cross_entropy with label_smoothing 0 gives the unsmoothed bits", "[loss]") {
  // Rows of 40 classes (lanes and a tail), a confident row, a masked class (-inf, where a
  // smoothing term 0 * inf would be NaN), padding rows.
  Rng rng(9);
  for (DType dtype : {DType::f64, DType::f32}) {
    const int64_t n = 5, v = 40;
    std::vector<double> values = rng.uniform_tensor({n, v}, -6, 6, DType::f64).to_vector();
    values[2 * v + 7] = 30;
    values[3 * v + 11] = -std::numeric_limits<double>::infinity();
    const Tensor z = Tensor::from(values, {n, v}, dtype);
    const std::vector<int32_t> t = {5, 0, 7, 39, 0};  // ignore_index 0: rows 1 and 4
    Tape tape;
    Var zv = tape.leaf(z);
    Var loss = ops::cross_entropy(zv, t, 0, 0.0);
    tape.backward(loss);
    const auto want = dtype == DType::f64 ? plain_cross_entropy<double>(z, t, 0)
                                          : plain_cross_entropy<float>(z, t, 0);
    INFO(dtype_name(dtype));
    CHECK(loss.value().item() == want.first);
    CHECK(tape.grad(zv).to_vector() == want.second);
    CHECK(all_finite(tape.grad(zv)));
  }
}

TEST_CASE("cross_entropy with label smoothing keeps the digits of a confident row", "[loss]") {
  // logits [30, 0, 0], target 0, V = 3, eps = 1e-12: dz_0 = (p_0 - 1) + eps (1 - 1/3), where
  // p_0 - 1 = -2e^-30 / (1 + 2e^-30) (-1.87e-13) is of the size of eps's term: exp(.) - 1 would
  // leave it 3 digits and the sum fewer. The loss is L + eps (z_0 - mean z) = L + 20 eps.
  const double eps = 1e-12, e = std::exp(-30.0);
  Tape tape;
  Var z = tape.leaf(Tensor::from({30, 0, 0}, {1, 3}, DType::f64));
  Var loss = ops::cross_entropy(z, std::vector<int32_t>{0}, -100, eps);
  CHECK(loss.value().item() == Approx(std::log1p(2 * e) + 20 * eps).epsilon(1e-14));
  tape.backward(loss);
  const Tensor dz = tape.grad(z);
  CHECK(dz.at(0) == Approx(-2 * e / (1 + 2 * e) + eps * 2 / 3).epsilon(1e-14));
  CHECK(dz.at(1) == Approx(e / (1 + 2 * e) - eps / 3).epsilon(1e-14));
  CHECK(dz.at(2) == Approx(e / (1 + 2 * e) - eps / 3).epsilon(1e-14));
}

TEST_CASE("cross_entropy refuses label smoothing outside [0, 1)", "[loss]") {
  Tensor z = Tensor::zeros({4, 3}, DType::f64);
  const std::vector<int32_t> t = {0, 1, 2, 1};
  for (double eps : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    INFO("label_smoothing " << eps);
    REQUIRE_THROWS_AS(ops::cross_entropy(z, t, -100, eps), ValueError);
    REQUIRE_THAT(message_of([&] { ops::cross_entropy(z, t, -100, eps); }),
                 Contains("cross_entropy") && Contains("logits (4,3)") && Contains("targets (4)") &&
                     Contains(fmt::format("label_smoothing = {}", eps)) &&
                     Contains("outside [0, 1)"));
  }
  // Up to 1 is allowed: with eps near 1 every class's share is about 1/V.
  REQUIRE_NOTHROW(ops::cross_entropy(z, t, -100, 0.999));
  REQUIRE(ops::cross_entropy(z, t, -100, 0.999).value().item() == Approx(std::log(3.0)));
}

namespace {
// softmax_rest as it was written before it vectorised: the same lanes and order, a maximum's
// term skipped by a select. The branch-free form must give the same bits wherever m is finite.
template <class T>
T select_rest(const T* x, int64_t n, T m) {
  constexpr int kLanes = 64 / sizeof(T);
  const int64_t full = n / kLanes * kLanes;
  T lane[kLanes] = {}, count[kLanes] = {};
  for (int64_t i = 0; i < full; i += kLanes)
    for (int u = 0; u < kLanes; ++u) {
      lane[u] += x[i + u] == m ? T(0) : ops::detail::exp(x[i + u] - m);
      count[u] += x[i + u] == m ? T(1) : T(0);
    }
  T rest = 0, maxima = 0;
  for (int u = 0; u < kLanes; ++u) rest += lane[u], maxima += count[u];
  for (int64_t i = full; i < n; ++i) {
    rest += x[i] == m ? T(0) : ops::detail::exp(x[i] - m);
    maxima += x[i] == m ? T(1) : T(0);
  }
  return rest + (maxima - 1);
}

template <class T>
void check_rest_bits(uint64_t seed) {
  Rng rng(seed);
  const T inf = std::numeric_limits<T>::infinity();
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + rng.randint(600);
    const double spread = 1 + rng.randint(40);
    std::vector<T> x(static_cast<size_t>(n));
    for (auto& v : x) v = static_cast<T>(rng.normal() * spread);
    if (trial % 3 == 0)  // ties at the maximum
      for (int64_t i = 0; i < n; i += 1 + trial % 7) x[static_cast<size_t>(i)] = x[0];
    if (trial % 5 == 0 && n > 1) x[static_cast<size_t>(rng.randint(n))] = -inf;  // masked
    if (trial % 11 == 0) x[static_cast<size_t>(rng.randint(n))] = T(1e-30);      // near-zero gaps
    const T m = ops::detail::max_value(x.data(), n);
    // The loop itself, compiled with this file's flags as select_rest is (the kernel in use may
    // be built for another instruction set, whose products can fuse into FMAs: test_cpu_kernels
    // checks every one of them against double loops).
    const T got = loops::softmax_rest(x.data(), n, m), want = select_rest(x.data(), n, m);
    INFO("n = " << n << ", trial " << trial);
    REQUIRE(std::isfinite(m));
    CHECK(std::memcmp(&got, &want, sizeof(T)) == 0);
  }
}
}  // namespace

TEST_CASE("softmax_rest gives the select form's bits wherever the maximum is finite", "[softmax]") {
  SECTION("float32") {
    check_rest_bits<float>(11);
  }
  SECTION("float64") {
    check_rest_bits<double>(12);
  }
}

TEST_CASE("softmax_rest: sum of e^(x - max) - 1 in lanes, maxima counted apart", "[softmax]") {
  // Rows long enough for the vectorised lanes and a scalar tail, with ties at the maximum.
  Rng rng(7);
  for (int64_t n : {1, 5, 16, 17, 100, 8003}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = static_cast<float>(rng.uniform(-8.0, 8.0));
    for (int64_t i = 0; i < n; i += 7) x[static_cast<size_t>(i)] = 9.5f;  // tied maxima
    const float m = ops::detail::max_value(x.data(), n);
    REQUIRE(m == 9.5f);
    double want = -1;
    for (float v : x) want += std::exp(static_cast<double>(v) - m);
    const float got = ops::detail::softmax_rest(x.data(), n, m);
    CHECK(got == Approx(want).epsilon(1e-5).margin(1e-6));
    // The tied maxima add exactly 1 each, the rest something positive.
    CHECK(got >= static_cast<float>((n + 6) / 7 - 1));
  }
  SECTION("an infinite maximum takes the plain loop: a -inf row and a +inf logit") {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> all_minus(40, -inf);
    // Every element equals the maximum: 40 terms of exactly 1.
    CHECK(ops::detail::softmax_rest(all_minus.data(), 40, -inf) == 39.0f);
    std::vector<float> one_plus(40, 1.0f);
    one_plus[21] = inf;
    // The finite terms are e^-87 at most (exp's clamp), the +inf one the maximum itself.
    const float rest = ops::detail::softmax_rest(one_plus.data(), 40, inf);
    CHECK(rest >= 0.0f);
    CHECK(rest < 1e-35f);
  }
  SECTION("a NaN anywhere makes it NaN") {
    std::vector<float> x(64, 0.5f);
    x[3] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(ops::detail::softmax_rest(x.data(), 64, 0.5f)));
  }
}
