// gather, masked_fill, where and dropout: forward values, gradients, randomness and errors.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/index.h"

using namespace tapestry;
using Catch::Contains;

namespace {
// The values 0, 1, 2, ... in `shape`.
Tensor iota(const Shape& shape, DType dtype = DType::f64) {
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i));
  return t;
}

// The message of the exception f throws (as type E), or "" if it throws none.
template <class E, class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// ---- gather

TEST_CASE("gather picks table rows; (B,S) indices into (V,E) give (B,S,E)", "[index]") {
  Tensor table = iota({4, 2});  // row v is (2v, 2v+1)
  std::vector<int32_t> idx = {3, 0, 2, 2, 1, 3};
  Var y = ops::gather(table, idx, Shape{2, 3});
  REQUIRE(y.shape() == Shape{2, 3, 2});
  CHECK(y.value().to_vector() == std::vector<double>{6, 7, 0, 1, 4, 5, 4, 5, 2, 3, 6, 7});

  Var flat = ops::gather(table, idx);  // 1-D overload: (N,E)
  CHECK(flat.shape() == Shape{6, 2});
  CHECK(flat.value().to_vector() == y.value().to_vector());

  Var scalars = ops::gather(iota({5}), std::vector<int32_t>{4, 1});  // 1-D table: (N,)
  CHECK(scalars.shape() == Shape{2});
  CHECK(scalars.value().to_vector() == std::vector<double>{4, 1});
}

TEST_CASE("gather works in float32", "[index]") {
  Var y = ops::gather(iota({3, 2}, DType::f32), std::vector<int32_t>{2, 0});
  CHECK(y.dtype() == DType::f32);
  CHECK(y.value().to_vector() == std::vector<double>{4, 5, 0, 1});
}

TEST_CASE("gather backward scatter-adds; a repeated index accumulates", "[index]") {
  for (DType dt : {DType::f64, DType::f32}) {
    Tape t;
    Var table = t.leaf(Tensor::zeros({4, 2}, dt));
    Var y = ops::gather(table, std::vector<int32_t>{1, 3, 1, 1});
    Tensor dy = Tensor::from({1, 2, 10, 20, 100, 200, 1000, 2000}, {4, 2}, dt);
    t.backward(y, dy);
    Tensor g = t.grad(table);
    REQUIRE(g.defined());
    REQUIRE(g.shape() == Shape{4, 2});
    // row 1 collects positions 0, 2 and 3; row 3 position 1; rows 0 and 2 nothing.
    CHECK(g.to_vector() == std::vector<double>{0, 0, 1101, 2202, 0, 0, 10, 20});
  }
}

TEST_CASE("gather errors: bad indices, index count, dtype", "[index][errors]") {
  Tensor table = iota({5, 3});
  for (int32_t bad : {-1, 5}) {
    std::vector<int32_t> idx = {0, 2, bad, 1};
    std::string msg = message_of<IndexError>([&] { ops::gather(table, idx); });
    REQUIRE_THAT(msg, Contains("gather"));
    REQUIRE_THAT(msg, Contains(fmt::format("index {}", bad)));
    REQUIRE_THAT(msg, Contains("position 2"));
    REQUIRE_THAT(msg, Contains("[0, 5)"));
  }
  std::string msg = message_of<ShapeError>([&] {
    ops::gather(table, std::vector<int32_t>{0, 1, 2}, Shape{2, 2});
  });
  REQUIRE_THAT(msg, Contains("gather"));
  REQUIRE_THAT(msg, Contains("(5,3)"));
  REQUIRE_THAT(msg, Contains("(2,2)"));
  CHECK_THROWS_AS(ops::gather(Tensor::scalar(1, DType::f64), std::vector<int32_t>{0}), ShapeError);
}

// ---- masked_fill

TEST_CASE("masked_fill replaces masked elements, with a same-shape or broadcast mask", "[index]") {
  Tensor x = iota({2, 3});
  Tensor mask = Tensor::from({0, 1, 0, 1, 0, 0}, {2, 3}, DType::f64);
  CHECK(ops::masked_fill(x, mask, -9).value().to_vector() ==
        std::vector<double>{0, -9, 2, -9, 4, 5});

  // key padding mask (B,1,S) over scores (B,T,S) = (2,2,3): batch 0 masks key 2, batch 1 keys 1, 2
  Tensor scores = iota({2, 2, 3});
  Tensor pad = Tensor::from({0, 0, 1, 0, 1, 1}, {2, 1, 3}, DType::f64);
  Var y = ops::masked_fill(scores, pad, -100);
  REQUIRE(y.shape() == Shape{2, 2, 3});
  CHECK(y.value().to_vector() ==
        std::vector<double>{0, 1, -100, 3, 4, -100, 6, -100, -100, 9, -100, -100});
}

TEST_CASE("masked_fill with -infinity passes gradient only where unmasked", "[index]") {
  const double inf = std::numeric_limits<double>::infinity();
  Tape t;
  Var x = t.leaf(iota({2, 3}));
  Tensor mask = Tensor::from({1, 0, 0}, {3}, DType::f64);  // broadcast over rows
  Var y = ops::masked_fill(x, mask, -inf);
  CHECK(y.value().to_vector() == std::vector<double>{-inf, 1, 2, -inf, 4, 5});
  t.backward(y, Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64));
  CHECK(t.grad(x).to_vector() == std::vector<double>{0, 2, 3, 0, 5, 6});
}

TEST_CASE("masked_fill errors: mask shape and dtype", "[index][errors]") {
  Tensor x = iota({2, 3});
  std::string msg = message_of<ShapeError>([&] {
    ops::masked_fill(x, Tensor::zeros({2, 4}, DType::f64), 0);
  });
  REQUIRE_THAT(msg, Contains("masked_fill"));
  REQUIRE_THAT(msg, Contains("(2,3)"));
  REQUIRE_THAT(msg, Contains("(2,4)"));
  // a mask that would broadcast x up (rather than itself to x) is refused too
  CHECK_THROWS_AS(ops::masked_fill(x, Tensor::zeros({4, 2, 3}, DType::f64), 0), ShapeError);
  msg = message_of<DTypeError>([&] { ops::masked_fill(x, Tensor::zeros({2, 3}, DType::f32), 0); });
  REQUIRE_THAT(msg, Contains("masked_fill"));
  REQUIRE_THAT(msg, Contains("float32"));
  REQUIRE_THAT(msg, Contains("float64"));
}

// ---- where

TEST_CASE("where selects from a or b and splits the gradient between them", "[index]") {
  Tape t;
  Var a = t.leaf(iota({2, 3}));
  Var b = t.leaf(Tensor::full({2, 3}, -1, DType::f64));
  Tensor cond = Tensor::from({1, 0, 2}, {3}, DType::f64);  // any nonzero picks a
  Var y = ops::where(cond, a, b);
  CHECK(y.value().to_vector() == std::vector<double>{0, -1, 2, 3, -1, 5});
  t.backward(y, Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64));
  CHECK(t.grad(a).to_vector() == std::vector<double>{1, 0, 3, 4, 0, 6});
  CHECK(t.grad(b).to_vector() == std::vector<double>{0, 2, 0, 0, 5, 0});
}

TEST_CASE("where errors: shapes and dtypes", "[index][errors]") {
  Tensor a = iota({2, 3}), b = iota({2, 3});
  std::string msg = message_of<ShapeError>([&] {
    ops::where(Tensor::zeros({2, 3}, DType::f64), a, iota({3, 2}));
  });
  REQUIRE_THAT(msg, Contains("where"));
  REQUIRE_THAT(msg, Contains("(2,3)"));
  REQUIRE_THAT(msg, Contains("(3,2)"));
  msg = message_of<ShapeError>([&] { ops::where(Tensor::zeros({4}, DType::f64), a, b); });
  REQUIRE_THAT(msg, Contains("where"));
  REQUIRE_THAT(msg, Contains("(4)"));
  REQUIRE_THAT(msg, Contains("(2,3)"));
  CHECK_THROWS_AS(ops::where(Tensor::zeros({2, 3}, DType::f32), a, b), DTypeError);
  CHECK_THROWS_AS(ops::where(Tensor::zeros({2, 3}, DType::f64), a, iota({2, 3}, DType::f32)),
                  DTypeError);
}

// ---- dropout

TEST_CASE("dropout: the same seed gives the same mask, another seed another", "[dropout]") {
  Tensor x = Tensor::full({1000}, 1, DType::f64);
  auto run = [&](uint64_t seed) {
    Rng rng(seed);
    return ops::dropout(x, 0.5, rng, true).value().to_vector();
  };
  std::vector<double> a = run(42), b = run(42), c = run(43);
  CHECK(a == b);
  CHECK(a != c);
  for (double v : a) CHECK((v == 0 || v == 2));  // kept elements scaled by 1/(1-p)
}

TEST_CASE("dropout in eval mode or with p = 0 returns x itself", "[dropout]") {
  Tape t;
  Var x = t.leaf(iota({3, 4}));
  Rng rng(1);
  for (auto [p, training] : {std::pair{0.5, false}, std::pair{0.0, true}}) {
    const size_t nodes = t.size();
    Var y = ops::dropout(x, p, rng, training);
    CHECK(y.value().shares_storage(x.value()));
    CHECK(y.node() == x.node());
    CHECK(t.size() == nodes);  // nothing recorded
  }
}

TEST_CASE("dropout keeps a fraction 1-p and preserves the mean", "[dropout]") {
  const int64_t n = 100000;
  for (DType dt : {DType::f64, DType::f32}) {
    for (double p : {0.1, 0.3, 0.5}) {
      Rng data(7);
      Tensor x = data.uniform_tensor({n}, 0.5, 1.5, dt);
      Rng rng(99);
      Tensor y = ops::dropout(x, p, rng, true).value();
      int64_t kept = 0;
      double sum_x = 0, sum_y = 0;
      for (int64_t i = 0; i < n; ++i) {
        kept += y.at(i) != 0;
        sum_x += x.at(i);
        sum_y += y.at(i);
      }
      INFO(fmt::format("{} p = {}", dtype_name(dt), p));
      CHECK(std::abs(static_cast<double>(kept) / n - (1 - p)) < 0.01);
      CHECK(std::abs(sum_y / n - sum_x / n) < 0.01 * (sum_x / n));
    }
  }
}

TEST_CASE("dropout's draws are independent between neighbours and between calls", "[dropout]") {
  // The mask comes from a counter-based hash of (one draw per call, element index): a weak mixer
  // would show as correlation between adjacent indices or between the masks of two calls.
  const int64_t n = 200000;
  const double p = 0.5;
  Tensor x = Tensor::full({n}, 1, DType::f32);
  Rng rng(3);
  std::vector<double> a = ops::dropout(x, p, rng, true).value().to_vector();
  std::vector<double> b = ops::dropout(x, p, rng, true).value().to_vector();
  CHECK(a != b);
  int64_t both_next = 0, both_calls = 0, both_stride = 0;
  for (int64_t i = 0; i + 64 < n; ++i) {
    both_next += a[i] != 0 && a[i + 1] != 0;
    both_stride += a[i] != 0 && a[i + 64] != 0;
    both_calls += a[i] != 0 && b[i] != 0;
  }
  // Independent keeps: (1-p)^2 = 0.25 of the pairs. Between calls the pairs are independent and
  // 4 standard deviations is about 0.004; neighbouring pairs overlap, which widens the spread to
  // about 0.0013 a standard deviation, so 0.004 is 3 of them there (the seed is fixed).
  const double m = static_cast<double>(n - 64);
  CHECK(std::abs(both_next / m - 0.25) < 0.004);
  CHECK(std::abs(both_stride / m - 0.25) < 0.004);
  CHECK(std::abs(both_calls / m - 0.25) < 0.004);
}

// Guards the construction: each step of the mixer is one-to-one, so distinct indices must give
// distinct values; a change that broke that would repeat dropout masks within a tensor.
TEST_CASE("counter_hash32 gives distinct values for distinct indices under one key", "[dropout]") {
  std::vector<uint32_t> h;
  for (uint64_t i = 0; i < 100000; ++i) h.push_back(counter_hash32(0x1234567890abcdefULL, i));
  std::sort(h.begin(), h.end());
  CHECK(std::adjacent_find(h.begin(), h.end()) == h.end());
  CHECK(counter_hash32(1, 0) != counter_hash32(2, 0));
  CHECK(counter_hash32(1ULL << 32, 0) != counter_hash32(2ULL << 32, 0));  // the key's high half
}

TEST_CASE("dropout backward multiplies by the same mask", "[dropout]") {
  Tape t;
  Var x = t.leaf(Tensor::full({200}, 3, DType::f64));
  Rng rng(5);
  Var y = ops::dropout(x, 0.25, rng, true);
  t.backward(y, Tensor::full({200}, 1, DType::f64));
  Tensor g = t.grad(x);
  for (int64_t i = 0; i < 200; ++i) CHECK(g.at(i) == Approx(y.value().at(i) / 3));
}

TEST_CASE("dropout rejects p outside [0, 1)", "[dropout][errors]") {
  Tensor x = iota({4});
  Rng rng(1);
  for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    std::string msg = message_of<ValueError>([&] { ops::dropout(x, p, rng, true); });
    REQUIRE_THAT(msg, Contains("dropout"));
    REQUIRE_THAT(msg, Contains(fmt::format("p = {}", p)));
  }
  CHECK_THROWS_AS(ops::dropout(x, 1.0, rng, false), ValueError);  // checked in eval mode too
}
