// Tensors and shapes: creation, views, broadcasting rules, dtype handling, the seeded generator.
#include <catch2/catch.hpp>

#include "tapestry/core/random.h"
#include "tapestry/core/tensor.h"

using namespace tapestry;
using Catch::Contains;

TEST_CASE("tensor creation, element access and views", "[tensor]") {
  Tensor t = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  REQUIRE(t.shape() == Shape{2, 3});
  REQUIRE(t.numel() == 6);
  REQUIRE(t.at(4) == 5.0);
  Tensor r = t.reshape({3, 2});
  REQUIRE(r.shares_storage(t));
  r.set(0, 10);
  REQUIRE(t.at(0) == 10.0);  // a view writes through
  Tensor row = t.rows(1, 1);
  REQUIRE(row.shape() == Shape{1, 3});
  REQUIRE(row.to_vector() == std::vector<double>{4, 5, 6});
  Tensor c = t.clone();
  REQUIRE_FALSE(c.shares_storage(t));
  REQUIRE(Tensor::zeros({0, 4}, DType::f32).numel() == 0);
  REQUIRE(Tensor::scalar(2.5, DType::f32).item() == 2.5);
  REQUIRE(t.str() == "[[10, 2, 3], [4, 5, 6]]");
}

TEST_CASE("float32 and float64 convert and refuse the wrong accessor", "[tensor]") {
  Tensor d = Tensor::from({0.1, 0.2}, {2}, DType::f64);
  Tensor f = d.to(DType::f32);
  REQUIRE(f.dtype() == DType::f32);
  REQUIRE(f.at(1) == Approx(0.2).epsilon(1e-7));
  REQUIRE_THROWS_AS(f.data<double>(), DTypeError);
  REQUIRE_THROWS_AS(d.data<float>(), DTypeError);
}

TEST_CASE("bad shapes and indices raise typed errors", "[tensor]") {
  REQUIRE_THROWS_AS(Tensor::from({1, 2, 3}, {2, 2}, DType::f32), ShapeError);
  Tensor t = Tensor::zeros({2, 3}, DType::f32);
  REQUIRE_THROWS_AS(t.reshape({4, 2}), ShapeError);
  REQUIRE_THROWS_AS(t.at(6), IndexError);
  REQUIRE_THROWS_AS(t.rows(1, 2), IndexError);
  REQUIRE_THROWS_AS(t.shape().axis(2, "sum"), IndexError);
  REQUIRE(t.shape().axis(-1, "sum") == 1);
}

TEST_CASE("broadcasting follows NumPy's rules", "[tensor]") {
  REQUIRE(broadcast_shapes({2, 3, 4}, {4}, "add") == Shape{2, 3, 4});
  REQUIRE(broadcast_shapes({3, 1}, {1, 4}, "add") == Shape{3, 4});
  REQUIRE(broadcast_shapes({}, {2, 2}, "add") == Shape{2, 2});
  try {
    broadcast_shapes({2, 3}, {4}, "mul");
    FAIL("expected a ShapeError");
  } catch (const ShapeError& e) {
    REQUIRE_THAT(e.what(), Contains("mul") && Contains("(2,3)") && Contains("(4)"));
  }
  Tensor b = Tensor::from({1, 2, 3}, {3}, DType::f64).broadcast_to({2, 3}, "test");
  REQUIRE(b.to_vector() == std::vector<double>{1, 2, 3, 1, 2, 3});
  Tensor col = Tensor::from({1, 2}, {2, 1}, DType::f64).broadcast_to({2, 3}, "test");
  REQUIRE(col.to_vector() == std::vector<double>{1, 1, 1, 2, 2, 2});
}

TEST_CASE("the generator is reproducible from its seed", "[random]") {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next_u64();
    REQUIRE(x == b.next_u64());
  }
  REQUIRE(Rng(42).next_u64() != c.next_u64());
  Rng u(7);
  double sum = 0, sq = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double v = u.normal();
    sum += v;
    sq += v * v;
  }
  REQUIRE(std::abs(sum / n) < 0.02);
  REQUIRE(std::abs(sq / n - 1) < 0.02);
  for (int i = 0; i < 1000; ++i) {
    double v = u.uniform(-2, 3);
    REQUIRE(v >= -2);
    REQUIRE(v < 3);
  }
}
