// Reductions and shape ops: values and gradients worked out by hand, float32, and error messages.
#include <catch2/catch.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "tapestry/core/tape.h"
#include "tapestry/ops/arith.h"
#include "tapestry/ops/reduce.h"
#include "tapestry/ops/shape_ops.h"

using namespace tapestry;
using namespace tapestry::ops;
using Catch::Contains;
using V = std::vector<double>;

namespace {

// [[1, 2, 3], [4, 5, 6]]
Tensor m23(DType d = DType::f64) {
  return Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, d);
}

// x[i, j, k] = 6i + 2j + k, shape (2,3,2)
Tensor t232(DType d = DType::f64) {
  V v(12);
  std::iota(v.begin(), v.end(), 0.0);
  return Tensor::from(v, {2, 3, 2}, d);
}

// 1, 2, ..., n as a seed gradient of the given shape.
Tensor ramp(const Shape& s, DType d = DType::f64) {
  V v(static_cast<size_t>(s.numel()));
  std::iota(v.begin(), v.end(), 1.0);
  return Tensor::from(v, s, d);
}

V values(const Var& v) {
  return v.value().to_vector();
}

// The message of the tapestry::Error that f throws ("" if none).
template <class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---- reductions

TEST_CASE("sum over one axis, several axes and everything", "[reduce]") {
  Var x = m23();
  CHECK(sum(x, {0}).shape() == Shape{3});
  CHECK(values(sum(x, {0})) == V{5, 7, 9});
  CHECK(values(sum(x, {1})) == V{6, 15});
  CHECK(values(sum(x, {-1})) == V{6, 15});
  CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(values(sum(x, {1}, true)) == V{6, 15});
  CHECK(sum(x).shape() == Shape{});
  CHECK(sum(x).value().item() == 21);
  CHECK(sum(x, {0, 1}, true).shape() == Shape{1, 1});
  CHECK(sum(x, {}).shape() == Shape{2, 3});
  CHECK(values(sum(x, {})) == values(x));

  Var t = t232();
  CHECK(sum(t, {0, 2}).shape() == Shape{3});
  CHECK(values(sum(t, {0, 2})) == V{14, 22, 30});
  CHECK(values(sum(t, {2, 0})) == V{14, 22, 30});
  CHECK(sum(t, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(values(sum(t, {1})) == V{6, 9, 24, 27});
  CHECK(values(sum(t, {-1, -3})) == V{14, 22, 30});
}

TEST_CASE("mean divides by the number of elements reduced", "[reduce]") {
  Var x = m23();
  CHECK(values(mean(x, {0})) == V{2.5, 3.5, 4.5});
  CHECK(values(mean(x, {1})) == V{2, 5});
  CHECK(mean(x).shape() == Shape{});
  CHECK(mean(x).value().item() == 3.5);
  Var m = mean(t232(), {0, 2}, true);
  CHECK(m.shape() == Shape{1, 3, 1});
  CHECK(values(m) == V{3.5, 5.5, 7.5});
}

TEST_CASE("max along an axis, with keepdim", "[reduce]") {
  Var x = Tensor::from({1, 5, 3, 4, 2, 6}, {2, 3}, DType::f64);
  CHECK(max(x, 0).shape() == Shape{3});
  CHECK(values(max(x, 0)) == V{4, 5, 6});
  CHECK(values(max(x, 1)) == V{5, 6});
  CHECK(max(x, 1, true).shape() == Shape{2, 1});
  CHECK(values(max(x, -1, true)) == V{5, 6});
  Var t = t232();
  CHECK(max(t, 1).shape() == Shape{2, 2});
  CHECK(values(max(t, 1)) == V{4, 5, 10, 11});
  CHECK(values(max(t, -1)) == V{1, 3, 5, 7, 9, 11});
  CHECK(values(max(t, 0)) == V{6, 7, 8, 9, 10, 11});
}

TEST_CASE("reduction gradients spread dy back", "[reduce]") {
  Tape tape;
  SECTION("sum over axis 0") {
    Var x = tape.leaf(m23());
    Var y = sum(x, {0});
    tape.backward(y, Tensor::from({1, 2, 3}, {3}, DType::f64));
    CHECK(tape.grad(x).to_vector() == V{1, 2, 3, 1, 2, 3});
  }
  SECTION("sum over everything") {
    Var x = tape.leaf(t232());
    tape.backward(sum(x));
    CHECK(tape.grad(x).to_vector() == V(12, 1.0));
  }
  SECTION("mean over axis 0 with keepdim") {
    Var x = tape.leaf(m23());
    Var y = mean(x, {0}, true);
    tape.backward(y, Tensor::from({2, 4, 6}, {1, 3}, DType::f64));
    CHECK(tape.grad(x).to_vector() == V{1, 2, 3, 1, 2, 3});
  }
  SECTION("max: only the argmax receives dy") {
    Var x = tape.leaf(Tensor::from({1, 5, 3, 4, 2, 6}, {2, 3}, DType::f64));
    tape.backward(max(x, 1), Tensor::from({10, 20}, {2}, DType::f64));
    CHECK(tape.grad(x).to_vector() == V{0, 10, 0, 0, 0, 20});
  }
  SECTION("max: the first of equal maxima receives dy") {
    Var x = tape.leaf(Tensor::from({2, 2, 1, 3, 3, 3}, {2, 3}, DType::f64));
    tape.backward(max(x, 1), Tensor::from({1, 1}, {2}, DType::f64));
    CHECK(tape.grad(x).to_vector() == V{1, 0, 0, 1, 0, 0});
  }
  SECTION("max along axis 0 of a 3-D tensor") {
    Var x = tape.leaf(t232());
    tape.backward(max(x, 0), ramp({3, 2}));
    CHECK(tape.grad(x).to_vector() == V{0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6});
  }
  SECTION("an input used by two reductions accumulates both") {
    Var x = tape.leaf(m23());
    tape.backward(add(sum(x, {1}), max(x, 1)), Tensor::from({1, 1}, {2}, DType::f64));
    CHECK(tape.grad(x).to_vector() == V{1, 1, 2, 1, 1, 2});
  }
}

// ---- shape ops

TEST_CASE("reshape is a view and infers one -1", "[shape]") {
  Var x = m23();
  Var y = reshape(x, Shape{3, 2});
  CHECK(y.shape() == Shape{3, 2});
  CHECK(y.value().shares_storage(x.value()));
  CHECK(values(y) == values(x));
  CHECK(reshape(x, {-1}).shape() == Shape{6});
  CHECK(reshape(x, {3, -1}).shape() == Shape{3, 2});
  CHECK(reshape(x, {-1, 1, 2}).shape() == Shape{3, 1, 2});
  CHECK(reshape(Tensor::scalar(4, DType::f64), {1, -1}).shape() == Shape{1, 1});

  Tape tape;
  Var l = tape.leaf(m23());
  tape.backward(reshape(l, {3, -1}), ramp({3, 2}));
  CHECK(tape.grad(l).shape() == Shape{2, 3});
  CHECK(tape.grad(l).to_vector() == V{1, 2, 3, 4, 5, 6});
}

TEST_CASE("permute and transpose reorder axes", "[shape]") {
  Var x = m23();
  Var xt = permute(x, {1, 0});
  CHECK(xt.shape() == Shape{3, 2});
  CHECK(values(xt) == V{1, 4, 2, 5, 3, 6});
  CHECK(values(transpose(x, 0, 1)) == V{1, 4, 2, 5, 3, 6});
  CHECK(!xt.value().shares_storage(x.value()));

  Var p = permute(t232(), {2, 0, 1});  // p[k, i, j] = t[i, j, k]
  CHECK(p.shape() == Shape{2, 2, 3});
  CHECK(values(p) == V{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
  Var t = transpose(t232(), 0, -1);  // t[k, j, i] = x[i, j, k]
  CHECK(t.shape() == Shape{2, 3, 2});
  CHECK(values(t) == V{0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11});

  Tape tape;
  Var l = tape.leaf(m23());
  tape.backward(permute(l, {1, 0}), ramp({3, 2}));
  CHECK(tape.grad(l).to_vector() == V{1, 3, 5, 2, 4, 6});
}

TEST_CASE("concat joins along an existing axis", "[shape]") {
  Var a = m23();
  Var b = Tensor::from({7, 8}, {2, 1}, DType::f64);
  Var c = Tensor::from({9, 9, 9}, {1, 3}, DType::f64);
  Var y = concat({a, b}, 1);
  CHECK(y.shape() == Shape{2, 4});
  CHECK(values(y) == V{1, 2, 3, 7, 4, 5, 6, 8});
  Var z = concat({a, c}, 0);
  CHECK(z.shape() == Shape{3, 3});
  CHECK(values(z) == V{1, 2, 3, 4, 5, 6, 9, 9, 9});
  Var e = concat({a, Tensor::zeros({2, 0}, DType::f64), b}, -1);
  CHECK(e.shape() == Shape{2, 4});
  CHECK(values(e) == values(y));
  std::vector<Var> one = {a};
  CHECK(values(concat(one, 0)) == values(a));

  Tape tape;
  SECTION("the same input twice accumulates both blocks") {
    Var x = tape.leaf(m23());
    tape.backward(concat({x, x}, 0), ramp({4, 3}));
    CHECK(tape.grad(x).to_vector() == V{1 + 7, 2 + 8, 3 + 9, 4 + 10, 5 + 11, 6 + 12});
  }
  SECTION("constants get no gradient, the others their columns") {
    Var x = tape.leaf(m23());
    tape.backward(concat({b, x, Tensor::zeros({2, 0}, DType::f64)}, 1), ramp({2, 4}));
    CHECK(tape.grad(x).to_vector() == V{2, 3, 4, 6, 7, 8});
  }
}

TEST_CASE("stack joins along a new axis", "[shape]") {
  Var a = m23();
  Var b = Tensor::from({10, 20, 30, 40, 50, 60}, {2, 3}, DType::f64);
  CHECK(stack({a, b}, 0).shape() == Shape{2, 2, 3});
  CHECK(values(stack({a, b}, 0)) == V{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  CHECK(stack({a, b}, 1).shape() == Shape{2, 2, 3});
  CHECK(values(stack({a, b}, 1)) == V{1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60});
  CHECK(stack({a, b}, -1).shape() == Shape{2, 3, 2});
  CHECK(values(stack({a, b}, 2)) == V{1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60});

  Tape tape;
  Var x = tape.leaf(m23());
  tape.backward(stack({x, x}, -1), ramp({2, 3, 2}));
  CHECK(tape.grad(x).to_vector() == V{3, 7, 11, 15, 19, 23});
}

TEST_CASE("slice and split", "[shape]") {
  Var t = t232();
  Var s = slice(t, 1, 1, 2);
  CHECK(s.shape() == Shape{2, 2, 2});
  CHECK(values(s) == V{2, 3, 4, 5, 8, 9, 10, 11});
  CHECK(!s.value().shares_storage(t.value()));
  Var row = slice(m23(), 0, 1, 1);  // contiguous: a view
  CHECK(row.shape() == Shape{1, 3});
  CHECK(values(row) == V{4, 5, 6});
  CHECK(slice(m23(), -1, 3, 0).shape() == Shape{2, 0});

  std::vector<Var> parts = split(m23(), {1, 0, 2}, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{2, 1});
  CHECK(values(parts[0]) == V{1, 4});
  CHECK(parts[1].shape() == Shape{2, 0});
  CHECK(parts[2].shape() == Shape{2, 2});
  CHECK(values(parts[2]) == V{2, 3, 5, 6});

  Tape tape;
  SECTION("slice gradient lands in its range") {
    Var x = tape.leaf(m23());
    tape.backward(slice(x, 1, 1, 2), ramp({2, 2}));
    CHECK(tape.grad(x).to_vector() == V{0, 1, 2, 0, 3, 4});
  }
  SECTION("overlapping slices accumulate") {
    Var x = tape.leaf(m23());
    tape.backward(concat({slice(x, 1, 0, 2), slice(x, 1, 1, 2)}, 1),
                  Tensor::full({2, 4}, 1, DType::f64));
    CHECK(tape.grad(x).to_vector() == V{1, 2, 1, 1, 2, 1});
  }
  SECTION("split parts that are unused get nothing") {
    Var x = tape.leaf(t232());
    std::vector<Var> p = split(x, {1, 1}, 0);
    tape.backward(sum(p[1]));
    CHECK(tape.grad(x).to_vector() == V{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  }
}

TEST_CASE("reductions and shape ops work in float32", "[reduce][shape]") {
  Tape tape;
  Var x = tape.leaf(m23(DType::f32));
  Var s = sum(x, {0});
  Var m = max(x, 1);
  Var c = concat({x, x}, 1);
  CHECK(s.dtype() == DType::f32);
  CHECK(values(s) == V{5, 7, 9});
  CHECK(values(m) == V{3, 6});
  CHECK(values(mean(x, {1})) == V{2, 5});
  CHECK(values(permute(x, {1, 0})) == V{1, 4, 2, 5, 3, 6});
  CHECK(values(slice(stack({x, x}, 0), 2, 1, 1)) == V{2, 5, 2, 5});
  CHECK(c.shape() == Shape{2, 6});
  Var loss = add(add(sum(c), sum(s)), sum(reshape(m, {2, 1})));
  tape.backward(loss);
  REQUIRE(tape.grad(x).dtype() == DType::f32);
  CHECK(tape.grad(x).to_vector() == V{3, 3, 4, 3, 3, 4});
}

TEST_CASE("constants and no-grad scopes record nothing", "[reduce][shape]") {
  Tape tape;
  Var k = m23();
  CHECK(!sum(k, {0}).requires_grad());
  CHECK(!concat({k, k}, 0).requires_grad());
  Var x = tape.leaf(m23());
  size_t before = tape.size();
  {
    NoGrad no_grad(tape);
    Var y = stack({x, x}, 0);
    CHECK(!y.requires_grad());
    CHECK(!max(x, 0).requires_grad());
  }
  CHECK(tape.size() == before);
  CHECK(concat({k, x}, 0).requires_grad());
}

// ---- errors

TEST_CASE("reduction errors name the op and the shape", "[reduce][errors]") {
  Var x = m23();
  REQUIRE_THROWS_AS(sum(x, {2}), IndexError);
  REQUIRE_THAT(message_of([&] { sum(x, {2}); }), Contains("sum") && Contains("(2,3)"));
  REQUIRE_THROWS_AS(sum(x, {1, -1}), IndexError);
  REQUIRE_THAT(message_of([&] {
                 sum(x, {1, -1});
               }),
               Contains("sum") && Contains("twice") && Contains("(2,3)"));
  REQUIRE_THROWS_AS(mean(x, {0, 0}), IndexError);
  REQUIRE_THAT(message_of([&] { mean(x, {0, 0}); }), Contains("mean") && Contains("(2,3)"));
  REQUIRE_THROWS_AS(max(x, -3), IndexError);
  REQUIRE_THAT(message_of([&] { max(x, -3); }), Contains("max") && Contains("(2,3)"));
  Var empty = Tensor::zeros({2, 0}, DType::f64);
  REQUIRE_THROWS_AS(max(empty, 1), ShapeError);
  REQUIRE_THAT(message_of([&] { max(empty, 1); }), Contains("max") && Contains("(2,0)"));
  REQUIRE_THROWS_AS(sum(Tensor::scalar(1, DType::f64), {0}), IndexError);
}

TEST_CASE("shape op errors name the op and every shape", "[shape][errors]") {
  Var a = m23();
  Var b = Tensor::zeros({2, 4}, DType::f64);
  Var c = Tensor::zeros({2, 3, 1}, DType::f64);
  Var a32 = m23(DType::f32);

  SECTION("concat") {
    REQUIRE_THROWS_AS(concat({a, b}, 0), ShapeError);
    REQUIRE_THAT(message_of([&] {
                   concat({a, b}, 0);
                 }),
                 Contains("concat: shapes (2,3) and (2,4) differ outside axis 0"));
    REQUIRE_THAT(message_of([&] {
                   concat({a, a, b}, -2);
                 }),
                 Contains("concat: shapes (2,3), (2,3) and (2,4)"));
    REQUIRE_THROWS_AS(concat({a, c}, 1), ShapeError);
    REQUIRE_THAT(message_of([&] {
                   concat({a, c}, 1);
                 }),
                 Contains("concat") && Contains("(2,3) and (2,3,1)"));
    REQUIRE_THROWS_AS(concat({a, a32}, 0), DTypeError);
    REQUIRE_THAT(message_of([&] {
                   concat({a, a32}, 0);
                 }),
                 Contains("concat") && Contains("float64") && Contains("float32"));
    REQUIRE_THROWS_AS(concat({a, a}, 2), IndexError);
    REQUIRE_THAT(message_of([&] { concat({a, a}, 2); }), Contains("concat") && Contains("(2,3)"));
    REQUIRE_THROWS_AS(concat(std::span<const Var>(), 0), ValueError);
  }
  SECTION("stack") {
    REQUIRE_THROWS_AS(stack({a, b}, 0), ShapeError);
    REQUIRE_THAT(message_of([&] {
                   stack({a, a, b}, 0);
                 }),
                 Contains("stack: shapes (2,3), (2,3) and (2,4) differ"));
    REQUIRE_THROWS_AS(stack({a, a}, 3), IndexError);
    REQUIRE_THROWS_AS(stack({a, a}, -4), IndexError);
    REQUIRE_THAT(message_of([&] { stack({a, a}, 3); }), Contains("stack") && Contains("(2,3)"));
    REQUIRE_THROWS_AS(stack({a, a32}, 0), DTypeError);
  }
  SECTION("reshape") {
    REQUIRE_THROWS_AS(reshape(a, Shape{4, 2}), ShapeError);
    REQUIRE_THAT(message_of([&] {
                   reshape(a, Shape{4, 2});
                 }),
                 Contains("reshape") && Contains("(2,3)") && Contains("(4,2)"));
    REQUIRE_THROWS_AS(reshape(a, {4, -1}), ShapeError);
    REQUIRE_THAT(message_of([&] {
                   reshape(a, {4, -1});
                 }),
                 Contains("reshape") && Contains("(2,3)") && Contains("(4,-1)"));
    REQUIRE_THROWS_AS(reshape(a, {-1, -1}), ShapeError);
    REQUIRE_THROWS_AS(reshape(a, {-2, -3}), ShapeError);
  }
  SECTION("permute and transpose") {
    REQUIRE_THROWS_AS(permute(a, {0}), ShapeError);
    REQUIRE_THAT(message_of([&] { permute(a, {0}); }), Contains("permute") && Contains("(2,3)"));
    REQUIRE_THROWS_AS(permute(a, {1, 1}), IndexError);
    REQUIRE_THAT(message_of([&] {
                   permute(a, {1, -1});
                 }),
                 Contains("permute") && Contains("(2,3)"));
    REQUIRE_THROWS_AS(permute(a, {0, 2}), IndexError);
    REQUIRE_THROWS_AS(transpose(a, 0, 2), IndexError);
    REQUIRE_THAT(message_of([&] { transpose(a, 0, 2); }),
                 Contains("transpose") && Contains("(2,3)"));
  }
  SECTION("slice and split") {
    REQUIRE_THROWS_AS(slice(a, 1, 2, 3), IndexError);
    REQUIRE_THAT(message_of([&] { slice(a, 1, 2, 3); }),
                 Contains("slice") && Contains("[2, 5)") && Contains("(2,3)"));
    REQUIRE_THROWS_AS(slice(a, 0, -1, 1), IndexError);
    REQUIRE_THROWS_AS(slice(a, 0, 0, -1), IndexError);
    REQUIRE_THROWS_AS(slice(a, 2, 0, 1), IndexError);
    REQUIRE_THROWS_AS(split(a, {1, 1}, 1), ShapeError);
    REQUIRE_THAT(message_of([&] {
                   split(a, {1, 1}, 1);
                 }),
                 Contains("split") && Contains("(1,1)") && Contains("(2,3)"));
    REQUIRE_THROWS_AS(split(a, {4, -1}, 1), ShapeError);
  }
}
