// Tape labels: names given to single nodes for inspection, dropped by clear(), checked indices.
#include <catch2/catch.hpp>

#include "tapestry/core/tape.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;

TEST_CASE("a label names one node and leaves the others unlabelled", "[tape]") {
  Tape tape;
  Var x = tape.leaf(Tensor::from({1, 2}, {2}, DType::f64));
  Var y = ops::mul(x, x);
  tape.set_label(x.node(), "x");
  REQUIRE(tape.label(x.node()) == "x");
  REQUIRE(tape.label(y.node()).empty());
  tape.set_label(x.node(), "input");  // relabelling replaces
  REQUIRE(tape.label(x.node()) == "input");
  REQUIRE(tape.label(12345).empty());  // reading any index is harmless
}

TEST_CASE("labelling a node outside the tape throws IndexError naming it", "[tape]") {
  Tape tape;
  tape.leaf(Tensor::zeros({1}, DType::f64));
  REQUIRE_THROWS_AS(tape.set_label(1, "past the end"), IndexError);
  REQUIRE_THROWS_WITH(tape.set_label(-1, "negative"),
                      Catch::Contains("node -1") && Catch::Contains("1 nodes"));
}

TEST_CASE("clear drops the labels with the nodes", "[tape]") {
  Tape tape;
  Var x = tape.leaf(Tensor::zeros({1}, DType::f64));
  tape.set_label(x.node(), "x");
  tape.clear();
  Var z = tape.leaf(Tensor::zeros({1}, DType::f64));
  REQUIRE(z.node() == x.node());  // the same index, a new node
  REQUIRE(tape.label(z.node()).empty());
}

TEST_CASE("labels do not change what backward computes", "[tape]") {
  // y = sum(x * x) at x = (1, -3): dy/dx = 2x = (2, -6), by hand.
  for (bool labelled : {false, true}) {
    Tape tape;
    Var x = tape.leaf(Tensor::from({1, -3}, {2}, DType::f64));
    Var sq = ops::mul(x, x);
    Var y = ops::sum(sq, {0});
    if (labelled) {
      tape.set_label(x.node(), "x");
      tape.set_label(sq.node(), "x^2");
    }
    tape.backward(y);
    REQUIRE(tape.grad(x).to_vector() == std::vector<double>{2, -6});
  }
}
