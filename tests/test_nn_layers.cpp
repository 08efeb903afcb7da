// Layers: PyTorch names and shapes, cell equations against plain loops, padding invariance.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "results_close.h"
#include "tapestry/nn/embedding.h"
#include "tapestry/nn/init.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/rnn.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using namespace tapestry::nn;

TEST_CASE("recurrent layers name and shape their parameters as PyTorch does", "[nn]") {
  Rng rng(1);
  RNN gru(CellKind::gru, 5, 7, 2, true, rng, DType::f32);
  auto params = gru.named_parameters();
  std::vector<std::string> names;
  for (auto& [n, p] : params) names.push_back(n);
  std::vector<std::string> expected = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  REQUIRE(names == expected);
  REQUIRE(params[0].second->shape() == Shape{21, 5});   // (3H, E)
  REQUIRE(params[1].second->shape() == Shape{21, 7});   // (3H, H)
  REQUIRE(params[8].second->shape() == Shape{21, 14});  // layer 1 reads both directions: (3H, 2H)
  // nn.GRU(5, 7, num_layers=2, bidirectional=True): 2*(21*5 + 21*7 + 42) + 2*(21*14 + 21*7 + 42) =
  // 1554
  REQUIRE(gru.num_parameters() == 1554);

  RNN lstm(CellKind::lstm, 3, 4, 1, false, rng);
  REQUIRE(lstm.named_parameters()[0].second->shape() == Shape{16, 3});  // (4H, E), gates i, f, g, o
  // Every weight starts in U(-1/sqrt(H), 1/sqrt(H)).
  for (auto* p : lstm.parameters())
    for (double v : p->value.to_vector()) REQUIRE(std::abs(v) <= 0.5);

  Linear lin(3, 2, true, rng);
  REQUIRE(lin.named_parameters()[0].first == "weight");
  REQUIRE(lin.weight().shape() == Shape{2, 3});
  REQUIRE(lin.named_parameters()[1].first == "bias");
  REQUIRE_THROWS_AS(parse_cell("transformer"), ValueError);
}

namespace {
double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

// h W^T + b for one row, with W (G*H, in) row-major.
std::vector<double> affine(const Tensor& w, const Tensor& b, const std::vector<double>& x) {
  const int64_t rows = w.dim(0), cols = w.dim(1);
  std::vector<double> y(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = b.at(r);
    for (int64_t c = 0; c < cols; ++c) s += w.at(r * cols + c) * x[c];
    y[r] = s;
  }
  return y;
}
}  // namespace

TEST_CASE("GRU and LSTM cells follow PyTorch's equations", "[nn]") {
  Rng rng(3);
  const int64_t in = 3, h = 4;
  std::vector<double> x = {0.3, -0.7, 1.1}, h0 = {0.1, -0.2, 0.5, 0.05}, c0 = {0.4, 0.0, -0.3, 0.2};
  Tensor xt = Tensor::from(std::span<const double>(x), {1, in}, DType::f64);
  Tensor ht = Tensor::from(std::span<const double>(h0), {1, h}, DType::f64);
  Tensor ct = Tensor::from(std::span<const double>(c0), {1, h}, DType::f64);

  SECTION("GRU: r, z, n with b_hn inside the reset product") {
    Cell cell(CellKind::gru, in, h, rng, DType::f64);
    auto p = cell.named_parameters();
    auto gi = affine(p[0].second->value, p[2].second->value, x);
    auto gh = affine(p[1].second->value, p[3].second->value, h0);
    Tape tape;
    Tensor got = cell.forward(tape, xt, {ht, Var()}).h.value();
    for (int64_t j = 0; j < h; ++j) {
      double r = sigmoid(gi[j] + gh[j]);
      double z = sigmoid(gi[h + j] + gh[h + j]);
      double n = std::tanh(gi[2 * h + j] + r * gh[2 * h + j]);
      REQUIRE(got.at(j) == Approx((1 - z) * n + z * h0[j]).epsilon(1e-14));
    }
  }
  SECTION("LSTM: i, f, g, o") {
    Cell cell(CellKind::lstm, in, h, rng, DType::f64);
    auto p = cell.named_parameters();
    auto gi = affine(p[0].second->value, p[2].second->value, x);
    auto gh = affine(p[1].second->value, p[3].second->value, h0);
    Tape tape;
    RecurrentState s = cell.forward(tape, xt, {ht, ct});
    for (int64_t j = 0; j < h; ++j) {
      double i = sigmoid(gi[j] + gh[j]), f = sigmoid(gi[h + j] + gh[h + j]);
      double g = std::tanh(gi[2 * h + j] + gh[2 * h + j]),
             o = sigmoid(gi[3 * h + j] + gh[3 * h + j]);
      double c = f * c0[j] + i * g;
      REQUIRE(s.c.value().at(j) == Approx(c).epsilon(1e-14));
      REQUIRE(s.h.value().at(j) == Approx(o * std::tanh(c)).epsilon(1e-14));
    }
  }
  SECTION("RNN: tanh") {
    Cell cell(CellKind::rnn, in, h, rng, DType::f64);
    auto p = cell.named_parameters();
    auto gi = affine(p[0].second->value, p[2].second->value, x);
    auto gh = affine(p[1].second->value, p[3].second->value, h0);
    Tape tape;
    Tensor got = cell.forward(tape, xt, {ht, Var()}).h.value();
    for (int64_t j = 0; j < h; ++j)
      REQUIRE(got.at(j) == Approx(std::tanh(gi[j] + gh[j])).epsilon(1e-14));
  }
}

TEST_CASE("a sequence's outputs do not depend on what else is in its batch", "[nn][padding]") {
  for (CellKind kind : {CellKind::rnn, CellKind::gru, CellKind::lstm}) {
    DYNAMIC_SECTION(cell_name(kind)) {
      Rng rng(11);
      RNN layer(kind, 3, 4, 2, true, rng, DType::f64);
      const int64_t s_long = 6, len = 3;
      // The sequence alone: (1,3,3).
      Tensor alone = rng.uniform_tensor({1, len, 3}, -1, 1, DType::f64);
      // The same sequence as row 1 of a batch padded to 6 steps, beside two longer sequences;
      // its padded steps hold NaN, which must never be read.
      Tensor batch = rng.uniform_tensor({3, s_long, 3}, -1, 1, DType::f64);
      for (int64_t t = 0; t < s_long; ++t)
        for (int64_t e = 0; e < 3; ++e)
          batch.set((1 * s_long + t) * 3 + e,
                    t < len ? alone.at(t * 3 + e) : std::numeric_limits<double>::quiet_NaN());
      const int64_t len_alone[] = {len}, len_batch[] = {6, len, 5};

      Tape tape;
      Var xa = tape.leaf(alone), xb = tape.leaf(batch);
      RNN::Output a = layer.forward(tape, xa, len_alone);
      RNN::Output b = layer.forward(tape, xb, len_batch);
      const int64_t width = 2 * 4;
      for (int64_t t = 0; t < s_long; ++t)
        for (int64_t j = 0; j < width; ++j) {
          double got = b.y.value().at((1 * s_long + t) * width + j);
          REQUIRE(std::isfinite(got));
          if (t < len)
            REQUIRE(std::abs(got - a.y.value().at(t * width + j)) <= 1e-12);
          else
            REQUIRE(got == 0.0);  // outputs at padding are zero
        }
      // Final states (L*D, B, H): row 1 of the batch against row 0 alone.
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t j = 0; j < 4; ++j)
          REQUIRE(std::abs(b.h_n.value().at((k * 3 + 1) * 4 + j) - a.h_n.value().at(k * 4 + j)) <=
                  1e-12);

      // Gradients: padded steps receive exactly zero, and nothing is NaN.
      tape.backward(b.y, Tensor::full(b.y.shape(), 1.0, DType::f64));
      Tensor dx = tape.grad(xb);
      for (int64_t t = 0; t < s_long; ++t)
        for (int64_t e = 0; e < 3; ++e) {
          double g = dx.at((1 * s_long + t) * 3 + e);
          if (t >= len)
            REQUIRE(g == 0.0);
          else
            REQUIRE(std::isfinite(g));
        }
      for (auto* p : layer.parameters())
        for (double g : p->grad.to_vector()) REQUIRE(std::isfinite(g));
    }
  }
}

TEST_CASE("the embedding's padding row gets no gradient", "[nn]") {
  Rng rng(5);
  Embedding emb(5, 3, rng, 0, DType::f64);
  for (int64_t j = 0; j < 3; ++j) REQUIRE(emb.weight().value.at(j) == 0.0);
  const int32_t ids[] = {0, 2, 0, 2, 4};
  Tape tape;
  Var y = emb.forward(tape, ids, Shape{5});
  REQUIRE(y.shape() == Shape{5, 3});
  tape.backward(y, Tensor::full(y.shape(), 1.0, DType::f64));
  Tensor g = emb.weight().grad;
  for (int64_t j = 0; j < 3; ++j) {
    REQUIRE(g.at(0 * 3 + j) == 0.0);  // padding row untouched
    REQUIRE(g.at(2 * 3 + j) == 2.0);  // id 2 used twice
    REQUIRE(g.at(4 * 3 + j) == 1.0);
  }
}

TEST_CASE("layers reject inputs that do not fit, naming the shapes", "[nn][errors]") {
  Rng rng(2);
  RNN gru(CellKind::gru, 3, 4, 1, false, rng);
  Tape tape;
  const int64_t lens[] = {2, 2};
  REQUIRE_THROWS_WITH(gru.forward(tape, Tensor::zeros({2, 2, 5}, DType::f32), lens),
                      Catch::Contains("gru") && Catch::Contains("(2,2,5)"));
  const int64_t too_long[] = {2, 3};
  REQUIRE_THROWS_AS(gru.forward(tape, Tensor::zeros({2, 2, 3}, DType::f32), too_long), ValueError);
  const int64_t one[] = {2};
  REQUIRE_THROWS_AS(gru.forward(tape, Tensor::zeros({2, 2, 3}, DType::f32), one), ShapeError);
  Linear lin(3, 2, true, rng);
  REQUIRE_THROWS_WITH(lin.forward(tape, Tensor::zeros({2, 4}, DType::f32)),
                      Catch::Contains("linear") && Catch::Contains("(2,4)"));
}

TEST_CASE("orthogonal and Xavier initialisation", "[nn][init]") {
  Rng rng(9);
  for (Shape s : {Shape{4, 6}, Shape{6, 4}, Shape{5, 5}}) {
    Tensor w = Tensor::empty(s, DType::f64);
    init::orthogonal(w, rng);
    const int64_t r = s[0], c = s[1];
    // W W^T = I (rows <= cols) or W^T W = I (rows > cols).
    const bool rows_orth = r <= c;
    const int64_t k = rows_orth ? r : c, n = rows_orth ? c : r;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        double dot = 0;
        for (int64_t t = 0; t < n; ++t)
          dot += rows_orth ? w.at(i * c + t) * w.at(j * c + t) : w.at(t * c + i) * w.at(t * c + j);
        REQUIRE(dot == Approx(i == j ? 1.0 : 0.0).margin(1e-12));
      }
  }
  Tensor x = Tensor::empty({30, 20}, DType::f64);
  init::xavier_uniform(x, rng);
  const double a = std::sqrt(6.0 / 50);
  for (double v : x.to_vector()) REQUIRE(std::abs(v) <= a);
  // Same seed, same weights.
  Rng r1(4), r2(4);
  Linear l1(3, 3, true, r1), l2(3, 3, true, r2);
  REQUIRE(l1.weight().value.to_vector() == l2.weight().value.to_vector());
}

TEST_CASE("the fused GRU and LSTM cells equal the composed ops, values and gradients", "[nn]") {
  for (CellKind kind : {CellKind::gru, CellKind::lstm}) {
    const int64_t b = 3, h = 5, g = gate_count(kind) * h;
    Rng rng(11);
    Tensor gx = rng.uniform_tensor({b, g}, -2, 2, DType::f64);
    Tensor w = rng.uniform_tensor({g, h}, -1, 1, DType::f64);
    Tensor bias = rng.uniform_tensor({g}, -1, 1, DType::f64);
    Tensor h0 = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    Tensor c0 = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    Tensor seed_h = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    Tensor seed_c = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    auto run = [&](bool fused) {
      Tape tape;
      std::vector<Var> in{tape.leaf(gx), tape.leaf(w), tape.leaf(bias), tape.leaf(h0),
                          tape.leaf(c0)};
      RecurrentState s{in[3], kind == CellKind::lstm ? in[4] : Var()};
      RecurrentState out = fused ? cell_step(kind, in[0], s, in[1], in[2])
                                 : cell_step_composed(kind, in[0], s, in[1], in[2]);
      // One scalar from both outputs, so one backward reaches every input.
      Var loss = ops::sum(ops::mul(out.h, seed_h));
      if (kind == CellKind::lstm) loss = ops::add(loss, ops::sum(ops::mul(out.c, seed_c)));
      tape.backward(loss);
      std::vector<std::vector<double>> r{out.h.value().to_vector()};
      if (kind == CellKind::lstm) r.push_back(out.c.value().to_vector());
      for (size_t i = 0; i < in.size(); ++i) {
        Tensor d = tape.grad(in[i]);
        r.push_back(d.defined() ? d.to_vector() : std::vector<double>{});
      }
      return r;
    };
    testing::check_results_close(run(true), run(false), cell_name(kind), 1e-14);
  }
}

TEST_CASE("a cell stepped on a split input equals it stepped on the concatenation", "[nn]") {
  // forward_split(project_head(a), r, weight_tail) against forward([a; r]): state and every
  // parameter's gradient, float64, for each cell kind.
  for (CellKind kind : {CellKind::rnn, CellKind::gru, CellKind::lstm}) {
    const int64_t b = 3, na = 4, nr = 5, h = 6;
    Rng rng(5);
    Cell cell(kind, na + nr, h, rng, DType::f64);
    Tensor a = rng.uniform_tensor({b, na}, -1, 1, DType::f64);
    Tensor r = rng.uniform_tensor({b, nr}, -1, 1, DType::f64);
    Tensor h0 = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    Tensor c0 = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    Tensor seed = rng.uniform_tensor({b, h}, -1, 1, DType::f64);
    auto run = [&](bool split) {
      for (Parameter* p : cell.parameters()) p->grad.zero();
      Tape tape;
      Var av = tape.leaf(a), rv = tape.leaf(r);
      RecurrentState s{Var(h0), kind == CellKind::lstm ? Var(c0) : Var()};
      RecurrentState out = split ? cell.forward_split(tape, cell.project_head(tape, av, na), rv,
                                                      cell.weight_tail(tape, na), s)
                                 : cell.forward(tape, ops::concat({av, rv}, 1), s);
      Var loss = ops::sum(ops::mul(out.h, seed));
      if (kind == CellKind::lstm) loss = ops::add(loss, ops::sum(ops::mul(out.c, seed)));
      tape.backward(loss);
      std::vector<std::vector<double>> res{out.h.value().to_vector(), tape.grad(av).to_vector(),
                                           tape.grad(rv).to_vector()};
      for (Parameter* p : cell.parameters()) res.push_back(p->grad.to_vector());
      return res;
    };
    testing::check_results_close(run(true), run(false), cell_name(kind), 1e-14);
  }
  Rng rng(1);
  Cell cell(CellKind::gru, 9, 6, rng, DType::f64);
  Tape tape;
  REQUIRE_THROWS_AS(cell.project_head(tape, Tensor::zeros({3, 5}, DType::f64), 4), ShapeError);
  REQUIRE_THROWS_AS(cell.weight_tail(tape, 9), ShapeError);
  REQUIRE_THROWS_AS(cell.weight_head(tape, 0), ShapeError);
  REQUIRE_THROWS_AS(cell.weight_head(tape, 9), ShapeError);
  // project_head with a block of W_ih: a of the block's width, the block (3H, split < in).
  const Var head = cell.weight_head(tape, 4);
  REQUIRE(head.shape() == Shape{18, 4});
  REQUIRE_THROWS_AS(cell.project_head(tape, Tensor::zeros({3, 5}, DType::f64), head), ShapeError);
  REQUIRE_THROWS_AS(cell.project_head(tape, Tensor::zeros({3, 4}, DType::f64),
                                      Var(Tensor::zeros({17, 4}, DType::f64))),
                    ShapeError);
  REQUIRE_THROWS_AS(cell.project_head(tape, Tensor::zeros({3, 9}, DType::f64),
                                      Var(Tensor::zeros({18, 9}, DType::f64))),
                    ShapeError);
  REQUIRE(cell.project_head(tape, Tensor::zeros({3, 4}, DType::f64), head).shape() == Shape{3, 18});
}
