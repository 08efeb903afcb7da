// Training end to end: a small attention model learns to reverse short sequences, runs are
// reproducible from their seeds, and bad training options are refused.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "tapestry/core/parallel.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/metrics.h"
#include "tapestry/models/train.h"

using namespace tapestry;
using namespace tapestry::models;

namespace {

// Reversal of random sequences of `shortest` to shortest + 3 symbols (ids 4..11).
std::vector<EncodedPair> reversal(int64_t n, uint64_t seed, int64_t shortest = 3) {
  Rng rng(seed);
  std::vector<EncodedPair> out;
  for (int64_t i = 0; i < n; ++i) {
    EncodedPair p;
    const int64_t len = shortest + rng.randint(4);
    for (int64_t t = 0; t < len; ++t) p.src.push_back(static_cast<int32_t>(4 + rng.randint(8)));
    p.tgt.assign(p.src.rbegin(), p.src.rend());
    out.push_back(p);
  }
  return out;
}

// One batch of every pair, in order.
Batch whole_batch(const std::vector<EncodedPair>& pairs) {
  std::vector<int64_t> rows(pairs.size());
  std::iota(rows.begin(), rows.end(), 0);
  return make_batch(pairs, rows);
}

// Every parameter's value (or gradient, with &nn::Parameter::grad) joined into one list.
std::vector<double> joined(Seq2Seq& model, Tensor nn::Parameter::*field = &nn::Parameter::value) {
  std::vector<double> out;
  for (auto* p : model.parameters()) {
    const auto v = (p->*field).to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

Seq2SeqConfig reversal_config() {
  Seq2SeqConfig c;
  c.src_vocab = c.tgt_vocab = 12;
  c.emb = 16;
  c.hidden = 32;
  c.attention = nn::AttentionKind::bahdanau;
  return c;
}

}  // namespace

TEST_CASE("an attention model learns to reverse short sequences", "[train]") {
  auto train = reversal(3000, 1), test = reversal(200, 2);
  Seq2Seq model(reversal_config());
  TrainOptions o;
  o.batch_size = 32;
  o.lr = 3e-3;
  Trainer trainer(model, o);
  const double before = evaluate_loss(model, test, 64).loss;
  for (int e = 0; e < 3; ++e) trainer.epoch(train, e);
  const double after = evaluate_loss(model, test, 64).loss;
  auto hyps = translate(model, test, 64, {});
  MatchCounts m;
  for (size_t i = 0; i < test.size(); ++i) m.add(hyps[i][0].tokens, test[i].tgt);
  WARN(fmt::format("reversal: loss {:.3f} -> {:.4f}, exact match {:.3f}, token accuracy {:.3f}",
                   before, after, m.exact_match(), m.token_accuracy()));
  CHECK(after < 0.05 * before);
  CHECK(m.exact_match() >= 0.95);
}

TEST_CASE("training is reproducible from the seeds", "[train]") {
  auto train = reversal(200, 3);
  auto run = [&](uint64_t batch_seed) {
    Seq2SeqConfig c = reversal_config();
    c.dropout = 0.2;  // dropout draws come from the model's seed
    Seq2Seq model(c);
    TrainOptions o;
    o.batch_size = 16;
    o.seed = batch_seed;
    o.teacher_forcing = 0.5;
    Trainer trainer(model, o);
    EpochResult r = trainer.epoch(train, 0);
    return std::make_pair(r.loss, model.parameters()[0]->value.to_vector());
  };
  auto a = run(1), b = run(1), c = run(2);
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
  CHECK(a.first != c.first);
}

TEST_CASE("bad training options are refused, naming the option", "[train]") {
  Seq2Seq model(reversal_config());
  auto refuse = [&](TrainOptions o, const char* what) {
    REQUIRE_THROWS_WITH(Trainer(model, o), Catch::Contains(what));
  };
  TrainOptions o;
  o.optimizer = "adagrad";
  refuse(o, "unknown optimizer 'adagrad' (valid: adam, adamw, sgd)");
  o = {};
  o.lr = 0;
  refuse(o, "lr must be positive");
  o = {};
  o.teacher_forcing = 1.5;
  refuse(o, "teacher forcing must be in [0, 1]");
  o = {};
  o.schedule = "cosine";
  refuse(o, "unknown schedule 'cosine' (valid: none, step, plateau, noam)");
  o = {};
  o.batch_size = 0;
  refuse(o, "batch size must be at least 1");
  o = {};
  o.warmup = 0;
  refuse(o, "warmup must be at least 1 update, got 0");
  o = {};
  o.adam_beta2 = 1;
  refuse(o, "adam beta2 must be in [0, 1), got 1");
  o = {};
  o.adam_eps = 0;
  refuse(o, "adam eps must be positive, got 0");
  o = {};
  o.label_smoothing = 1;
  refuse(o, "label smoothing must be in [0, 1), got 1");
}

TEST_CASE("the noam schedule sets the lr before every update, from the first", "[train]") {
  auto pairs = reversal(40, 5);
  Seq2Seq model(reversal_config());
  TrainOptions o;
  o.batch_size = 8;
  o.lr = 2e-3;
  o.schedule = "noam";
  o.warmup = 4;
  Trainer trainer(model, o);
  // (update, the lr it took), as on_step sees them after each update.
  std::vector<std::pair<int64_t, double>> seen;
  auto record = [&](const StepProgress&) {
    seen.emplace_back(trainer.steps(), trainer.optimizer().lr());
    return true;
  };
  trainer.epoch(pairs, 0, record);
  const double last = trainer.optimizer().lr();
  trainer.end_epoch(1.0);  // advances the per-epoch schedules only
  CHECK(trainer.optimizer().lr() == last);
  trainer.epoch(pairs, 1, record);
  REQUIRE(seen.size() >= 10);
  REQUIRE(seen.front() == std::make_pair(int64_t{1}, 0.5e-3));  // 2e-3 / warmup
  for (size_t i = 0; i < seen.size(); ++i) {
    const auto [s, lr] = seen[i];
    INFO("update " << s);
    CHECK(s == static_cast<int64_t>(i) + 1);
    const auto x = static_cast<double>(s);
    CHECK(lr == Approx(2e-3 * std::min(x / 4, std::sqrt(4 / x))).epsilon(1e-15));
  }
  CHECK(seen[3].second == 2e-3);  // the peak, at update 4
}

TEST_CASE("adam_beta2 and adam_eps reach the optimizer", "[train]") {
  const Batch batch = whole_batch(reversal(16, 6));
  auto run = [&](double beta2, double eps) {
    Seq2Seq model(reversal_config(), DType::f64);
    TrainOptions o;
    o.adam_beta2 = beta2;
    o.adam_eps = eps;
    Trainer trainer(model, o);
    for (int i = 0; i < 2; ++i) trainer.step(batch);
    return model.parameters()[0]->value.to_vector();
  };
  const auto base = run(0.999, 1e-8);
  CHECK(run(0.999, 1e-8) == base);
  CHECK(run(0.98, 1e-8) != base);
  CHECK(run(0.999, 1e-3) != base);
}

TEST_CASE("a batch cut into shards gives the whole batch's loss and gradient", "[train]") {
  Batch batch = whole_batch(reversal(40, 4));
  auto run = [&](int64_t shards) {
    Seq2Seq model(reversal_config(), DType::f64);
    TrainOptions o;
    o.shards = shards;
    o.clip = 0;  // compare the raw gradients
    Trainer trainer(model, o);
    trainer.optimizer().set_zero_grads_on_step(false);  // the gradients are read after the step
    const double loss = trainer.step(batch);
    return std::make_pair(loss, joined(model, &nn::Parameter::grad));
  };
  auto one = run(1), three = run(3);
  CHECK(three.first == Approx(one.first).epsilon(1e-12));
  REQUIRE(one.second.size() == three.second.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < one.second.size(); ++i) {
    worst = std::max(worst, std::abs(one.second[i] - three.second[i]));
    scale = std::max(scale, std::abs(one.second[i]));
  }
  REQUIRE(scale > 0);
  CHECK(worst <= 1e-12 * scale);
}

TEST_CASE("the trainer's steps are the same whether the optimizer or the trainer zeroes",
          "[train]") {
  // Shards redirect their gradients into buffers summed after backward; the optimizer zeroes
  // the parameters' gradients as it reads them, or the trainer does before the next backward.
  // Were either zeroing missed, gradients would pile up over the steps and the values part.
  Batch batch = whole_batch(reversal(40, 4));
  auto run = [&](bool optimizer_zeroes) {
    Seq2Seq model(reversal_config(), DType::f64);
    TrainOptions o;
    o.shards = 3;
    Trainer trainer(model, o);
    trainer.optimizer().set_zero_grads_on_step(optimizer_zeroes);
    std::vector<double> losses;
    for (int i = 0; i < 4; ++i) losses.push_back(trainer.step(batch));
    return std::make_pair(losses, joined(model));
  };
  const auto on = run(true), off = run(false);
  CHECK(on.first == off.first);
  CHECK(on.second == off.second);
  // By default the optimizer zeroes: every gradient is zero after each step.
  Seq2Seq model(reversal_config(), DType::f64);
  TrainOptions o;
  o.shards = 3;
  Trainer trainer(model, o);
  for (int i = 0; i < 4; ++i) {
    trainer.step(batch);
    for (auto* p : model.parameters())
      REQUIRE(p->grad.to_vector() == std::vector<double>(p->grad.numel(), 0.0));
  }
}

TEST_CASE("several steps in shards equal the same steps on the whole batch", "[train]") {
  // The summing after backward empties the shards' buffers for their next step; left full, a
  // shard's gradients would pile up from step to step and the weights part from one shard's.
  Batch batch = whole_batch(reversal(40, 4));
  auto run = [&](int64_t shards) {
    Seq2Seq model(reversal_config(), DType::f64);
    TrainOptions o;
    o.shards = shards;
    Trainer trainer(model, o);
    for (int i = 0; i < 4; ++i) trainer.step(batch);
    return joined(model);
  };
  const auto one = run(1), three = run(3);
  REQUIRE(one.size() == three.size());
  double worst = 0;
  for (size_t i = 0; i < one.size(); ++i) worst = std::max(worst, std::abs(one[i] - three[i]));
  CHECK(worst <= 1e-10);
}

TEST_CASE("training gives the same result on one core and on several", "[train]") {
  // Also with targets of 2 to 5 steps, where a shard reads its per-step weights fewer times than
  // the two shards together do (the choice of a product's kernel must not see the other shard).
  const int64_t shortest = GENERATE(3, 1);
  auto train = reversal(300, 5, shortest);
  INFO("sequences of " << shortest << " to " << shortest + 3 << " symbols");
  auto run = [&](int threads) {
    set_parallel_threads(threads);
    Seq2SeqConfig c = reversal_config();
    c.dropout = 0.1;
    Seq2Seq model(c);
    TrainOptions o;
    o.batch_size = 16;
    Trainer trainer(model, o);
    EpochResult r = trainer.epoch(train, 0);
    set_parallel_threads(0);
    return std::make_pair(r.loss, model.parameters()[3]->value.to_vector());
  };
  auto a = run(1), b = run(2);
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
}

TEST_CASE("each step's forward reads the weights as the last update left them", "[train]") {
  // The trainer packs the weights for its products once a step; packs kept from the step before
  // would show the old weights. Big SGD steps make the difference plain.
  Batch batch = whole_batch(reversal(32, 6));
  Seq2Seq model(reversal_config());
  TrainOptions o;
  o.optimizer = "sgd";
  o.lr = 0.5;
  o.clip = 0;
  Trainer trainer(model, o);
  double before = 0;
  for (int step = 0; step < 3; ++step) {
    Tape tape;  // no packs: the weights as they are now
    model.train();
    const double fresh = model.loss(tape, batch).value().item();
    const double trained = trainer.step(batch);  // the loss before this step's update
    INFO("step " << step << ": fresh " << fresh << ", trainer " << trained);
    CHECK(trained == Approx(fresh).epsilon(1e-5));
    if (step > 0) CHECK(std::abs(fresh - before) > 1e-3);  // the weights did move
    before = fresh;
  }
}
