// The fast float32 exp, tanh and sigmoid stay within a few units in the last place of the C
// library's functions over their whole useful range, and the float32 ops use them.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "float_sweep.h"
#include "tapestry/core/fastmath.h"
#include "tapestry/core/random.h"
#include "tapestry/ops/unary.h"

using namespace tapestry;

using testing::sweep;
using testing::ulps;

TEST_CASE("fast exp is within 2 ulp of std::exp", "[fastmath]") {
  int64_t worst = 0;
  sweep(-87.0f, 88.0f,
        [&](float x) { worst = std::max(worst, ulps(fastmath::exp(x), std::exp(x))); });
  CHECK(worst <= 2);
  CHECK(fastmath::exp(0.0f) == 1.0f);
  CHECK(fastmath::exp(-1000.0f) < 1e-37f);  // clamped: tiny, never inf or NaN
  CHECK(std::isfinite(fastmath::exp(1000.0f)));
}

TEST_CASE("fast tanh is within 3 ulp of the rounded double tanh and saturates at +-1",
          "[fastmath]") {
  int64_t worst = 0;
  sweep(-20.0f, 20.0f, [&](float x) {
    const float a = fastmath::tanh(x), b = static_cast<float>(std::tanh(static_cast<double>(x)));
    if (b != 0) worst = std::max(worst, ulps(a, b));
  });
  CHECK(worst <= 3);
  CHECK(fastmath::tanh(0.0f) == 0.0f);
  CHECK(std::signbit(fastmath::tanh(-0.0f)));
  CHECK(fastmath::tanh(30.0f) == 1.0f);
  CHECK(fastmath::tanh(-30.0f) == -1.0f);
  CHECK(fastmath::tanh(-1e-30f) == -1e-30f);
}

TEST_CASE("fast sigmoid is within 3 ulp of the double-precision sigmoid", "[fastmath]") {
  int64_t worst = 0;
  sweep(-80.0f, 80.0f, [&](float x) {
    const auto exact = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
    if (exact > 1e-37f) worst = std::max(worst, ulps(fastmath::sigmoid(x), exact));
  });
  CHECK(worst <= 3);
  CHECK(fastmath::sigmoid(0.0f) == 0.5f);
}

TEST_CASE("float32 tanh, sigmoid and exp ops agree with their float64 versions", "[fastmath]") {
  Rng rng(5);
  Tensor x64 = rng.uniform_tensor({1000}, -8, 8, DType::f64);
  Tensor x32 = x64.to(DType::f32);
  for (auto op : {&ops::tanh, &ops::sigmoid, &ops::exp}) {
    Tensor y64 = op(x64).value(), y32 = op(x32).value();
    for (int64_t i = 0; i < 1000; ++i)
      CHECK(y32.at(i) == Approx(y64.at(i)).epsilon(1e-6).margin(1e-30));
  }
}

TEST_CASE("fast exp, tanh and sigmoid pass NaN through", "[fastmath]") {
  // A diverged model must not get a finite loss: the trainer skips steps whose gradient norm is
  // not finite.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(fastmath::exp(nan)));
  CHECK(std::isnan(fastmath::tanh(nan)));
  CHECK(std::isnan(fastmath::sigmoid(nan)));
}
