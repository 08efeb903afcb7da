// The safety nets: a second backward on one recording is refused (unless retain_graph asked for
// it), and anomaly mode stops at the first op whose value or gradient holds a NaN or an infinity.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "tapestry/models/train.h"
#include "tapestry/nn/linear.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using Catch::Matchers::Contains;

namespace {
Tensor vec(std::initializer_list<double> v) {
  return Tensor::from(v, {static_cast<int64_t>(v.size())}, DType::f64);
}
}  // namespace

TEST_CASE("a second backward on the same recording throws instead of doubling", "[safety]") {
  Tape tape;
  Var x = tape.leaf(vec({2.0, -1.0}));
  Var y = ops::sum(x * x + x * 3.0);  // dy/dx = 2x + 3
  tape.backward(y);
  REQUIRE(tape.grad(x).to_vector() == std::vector<double>{7.0, 1.0});
  REQUIRE_THROWS_AS(tape.backward(y), TapeError);
  REQUIRE_THROWS_WITH(tape.backward(y), Contains("already run backward") &&
                                            Contains("tape.clear()") && Contains("retain_graph"));
  REQUIRE(tape.grad(x).to_vector() == std::vector<double>{7.0, 1.0});  // nothing added

  // A new recording after clear() runs backward again.
  tape.clear();
  Var x2 = tape.leaf(vec({1.0}));
  Var y2 = ops::sum(x2 * x2);
  tape.backward(y2);
  REQUIRE(tape.grad(x2).item() == 2.0);
}

TEST_CASE("retain_graph allows another backward, which adds on purpose", "[safety]") {
  Tape tape;
  Var x = tape.leaf(vec({2.0, -1.0}));
  Var y = x * x + x * 3.0;
  Tensor ones = Tensor::full(y.shape(), 1.0, y.dtype());
  tape.backward(y, ones, {.retain_graph = true});
  tape.backward(y, ones);  // allowed by the one before; the leaf accumulates, as PyTorch's does
  REQUIRE(tape.grad(x).to_vector() == std::vector<double>{14.0, 2.0});
  REQUIRE_THROWS_AS(tape.backward(y, ones), TapeError);  // that one did not retain
}

TEST_CASE("anomaly mode names the op whose forward value is NaN, and records nothing", "[safety]") {
  Tape tape;
  DetectAnomaly anomaly(tape);
  Var x = tape.leaf(vec({1.0, -1.0}));
  tape.set_label(x.node(), "x");
  Var ok = ops::exp(x);  // finite: recorded as usual
  const size_t before = tape.size();
  {
    Region region(tape, "loss");
    REQUIRE_THROWS_AS(ops::log(x), AnomalyError);
    REQUIRE_THROWS_WITH(ops::log(x), Contains("forward value of log") && Contains("node #2") &&
                                         Contains("region 'loss'") && Contains("1 NaN") &&
                                         Contains("input 0 (#0 leaf 'x'): (2) min -1 max 1"));
  }
  REQUIRE(tape.size() == before);
  // Off, the same op gives its NaN quietly (the default, and what training checks afterwards).
  tape.set_detect_anomaly(false);
  REQUIRE(std::isnan(ops::log(x).value().at(1)));
}

TEST_CASE("anomaly mode names the op whose backward makes an infinite gradient", "[safety]") {
  Tape tape;
  tape.set_detect_anomaly(true);
  Var x = tape.leaf(vec({0.0, 4.0}));
  Var y;
  {
    Region region(tape, "norm");
    y = ops::sqrt(x);  // sqrt(0) = 0 is fine; its derivative 1 / (2 sqrt(0)) is not
    tape.set_label(y.node(), "r");
  }
  Var loss = ops::sum(y);
  REQUIRE_THROWS_WITH(tape.backward(loss),
                      Contains("backward of sqrt") && Contains("node #1") &&
                          Contains("region 'norm'") && Contains("label 'r'") &&
                          Contains("gave input 0 a gradient holding an infinity: (2) min 0.25 "
                                   "max 0.25, 1 +inf") &&
                          Contains("input 0 (#0 leaf): (2) min 0 max 4"));
  // The failed backward added part of the gradients: another one on this recording is refused.
  REQUIRE_THROWS_AS(tape.backward(loss), TapeError);
}

TEST_CASE("anomaly mode lets an op write infinities that it writes by design", "[safety]") {
  Tape tape;
  DetectAnomaly anomaly(tape);
  Var e = tape.leaf(Tensor::from({0.5, 1.0, -0.5}, {1, 3}, DType::f64));
  Tensor pad = Tensor::from({0, 0, 1}, {1, 3}, DType::f64);
  Var a = ops::softmax(ops::masked_fill(e, pad, -INFINITY));  // a mask before a softmax
  REQUIRE(a.value().at(2) == 0.0);
  Var l = ops::log_softmax(e, -1, Tensor::from({1, 1, 0}, {1, 3}, DType::f64));
  REQUIRE(std::isinf(l.value().at(2)));
  tape.backward(ops::sum(a * a));  // and their gradients are finite
  REQUIRE(std::isfinite(tape.grad(e).at(0)));
  // An infinity from an op that does not make them on purpose is still an anomaly.
  REQUIRE_THROWS_AS(ops::exp(e * 1000.0), AnomalyError);
}

TEST_CASE("anomaly mode off changes nothing, on it changes no value", "[safety]") {
  Rng rng(3);
  nn::Linear layer(3, 2, true, rng, DType::f64);
  Tensor x = rng.uniform_tensor({4, 3}, -1, 1, DType::f64);
  std::vector<double> grads[2];
  for (int on = 0; on < 2; ++on) {
    Tape tape;
    tape.set_detect_anomaly(on == 1);
    layer.zero_grad();
    tape.backward(ops::sum(ops::tanh(layer.forward(tape, x))));
    grads[on] = layer.weight().grad.to_vector();
  }
  REQUIRE(grads[0] == grads[1]);
}

TEST_CASE("training with detect_anomaly stops at a NaN weight, naming epoch, step and op",
          "[safety]") {
  models::Seq2SeqConfig c;
  c.src_vocab = c.tgt_vocab = 8;
  c.emb = 4;
  c.hidden = 6;
  models::Seq2Seq model(c);
  std::vector<models::EncodedPair> pairs;
  for (int i = 0; i < 8; ++i) pairs.push_back({{4, 5, static_cast<int32_t>(4 + i % 4)}, {6, 7}});
  // The decoder's output bias holds one NaN: every logit of that token is NaN.
  nn::Parameter* bias = nullptr;
  for (auto& [name, p] : model.named_parameters())
    if (name == "decoder.out.bias") bias = p;
  REQUIRE(bias != nullptr);
  bias->value.set(5, NAN);

  models::TrainOptions o;
  o.batch_size = 4;
  // Without anomaly mode the steps are skipped (their gradient norm is not finite).
  models::Trainer quiet(model, o);
  models::EpochResult r = quiet.epoch(pairs, 1);
  REQUIRE(r.skipped == r.steps);

  o.detect_anomaly = true;
  models::Trainer trainer(model, o);
  REQUIRE_THROWS_AS(trainer.epoch(pairs, 1), AnomalyError);
  REQUIRE_THROWS_WITH(trainer.epoch(pairs, 1),
                      Contains("epoch 1, step 1 of 2: anomaly: the forward value of affine") &&
                          Contains("region 'output'") && Contains("holds NaN") &&
                          Contains("'decoder.out.bias'): (8) min ") && Contains(", 1 NaN"));
}
