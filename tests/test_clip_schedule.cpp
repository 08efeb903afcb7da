// Gradient clipping (grad_norm, clip_grad_norm) and lr schedules (StepLR, ReduceLROnPlateau,
// InverseSqrtLR): norms against double sums, schedules against their rules by hand.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "optim_values.h"
#include "tapestry/core/memory.h"
#include "tapestry/core/parallel.h"
#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"
#include "tapestry/nn/clip.h"
#include "tapestry/nn/optim.h"
#include "tapestry/nn/schedule.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using namespace tapestry::nn;
using Catch::Contains;
using tapestry::testing::set_grad;
using tapestry::testing::vec;

// ---------------------------------------------------------------------------------------------
// Gradient clipping.

TEST_CASE("grad_norm's prepare runs once on every element, before the norm reads it",
          "[optim][clip]") {
  // Lengths below one lane group (16), around a block (4096) and its lanes, odd halves, and
  // enough elements for both cores.
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> params;
  for (int64_t n : {1, 15, 16, 17, 4095, 4096, 4097, 4111, 8193, 8208, 300001}) {
    owned.push_back(std::make_unique<Parameter>(Tensor::zeros({n}, DType::f32)));
    params.push_back(owned.back().get());
  }
  // prepare writes 1 where the gradient is 0 and marks each element it saw; a second visit
  // would make a 2, and an element read before its prepare would be missing from the norm.
  struct Seen {
    std::vector<Parameter*>* params;
    std::vector<std::vector<int>> times;
  } seen{&params, {}};
  for (Parameter* p : params) seen.times.emplace_back(static_cast<size_t>(p->numel()), 0);
  const auto prepare = [](void* context, size_t i, int64_t begin, int64_t n) {
    auto& s = *static_cast<Seen*>(context);
    float* g = (*s.params)[i]->grad.data<float>();
    for (int64_t j = begin; j < begin + n; ++j) {
      g[j] += 1.0f;
      ++s.times[i][static_cast<size_t>(j)];
    }
  };
  const double norm = grad_norm(params, prepare, &seen);
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    total += params[i]->numel();
    INFO("parameter " << i << " of " << params[i]->numel());
    REQUIRE(std::all_of(seen.times[i].begin(), seen.times[i].end(), [](int t) { return t == 1; }));
  }
  REQUIRE(norm == std::sqrt(static_cast<double>(total)));
  REQUIRE(norm == grad_norm(params));  // the same sum as without a prepare
}

TEST_CASE("grad_norm: the same bits on one core as on two", "[optim][clip]") {
  // On two cores each job sums its half of every gradient; on one the two halves are summed side
  // by side. Lengths around the lanes (16) and blocks (4096), halves of unequal block counts, and
  // enough elements for the second core; float and double.
  Rng rng(7);
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> params;
  for (DType dtype : {DType::f32, DType::f64})
    for (int64_t n : {1, 15, 16, 17, 33, 4095, 4096, 4097, 4111, 8192, 8193, 8208, 12289, 70001}) {
      owned.push_back(std::make_unique<Parameter>(Tensor::zeros({n}, dtype)));
      owned.back()->grad = rng.normal_tensor({n}, 0.0, 1.0, dtype);
      params.push_back(owned.back().get());
    }
  const int threads = parallel_threads();
  set_parallel_threads(1);
  const double one = grad_norm(params);
  set_parallel_threads(2);
  parallel_run(2, [](int) {});  // the worker awake, for the norm to take both cores
  const double two = grad_norm(params);
  set_parallel_threads(threads);
  REQUIRE(std::memcmp(&one, &two, sizeof(double)) == 0);
  double want = 0;
  for (const Parameter* p : params)
    for (int64_t j = 0; j < p->numel(); ++j) {
      const double g =
          p->grad.dtype() == DType::f32 ? p->grad.data<float>()[j] : p->grad.data<double>()[j];
      want += g * g;
    }
  REQUIRE(one == Approx(std::sqrt(want)).epsilon(1e-6));
}

TEST_CASE("clip_grad_norm: global norm, scaling, and the pre-clip norm returned", "[optim][clip]") {
  Parameter a(vec({0.0, 0.0})), b(vec({0.0}, DType::f32));
  std::vector<Parameter*> params{&a, &b};
  auto reset = [&] {
    set_grad(a, {3.0, 4.0});
    set_grad(b, {12.0});
  };
  // sqrt(3^2 + 4^2 + 12^2) = sqrt(169) = 13
  reset();
  REQUIRE(clip_grad_norm(params, 26.0) == Approx(13.0).epsilon(1e-15));
  REQUIRE(a.grad.to_vector() == std::vector<double>{3.0, 4.0});  // below max_norm: unchanged
  REQUIRE(b.grad.at(0) == 12.0);

  reset();
  REQUIRE(clip_grad_norm(params, 6.5) == Approx(13.0).epsilon(1e-15));
  // factor 6.5 / (13 + 1e-6) ~ 0.5: [1.5, 2] and [6], whose norm is 6.5
  const double f = 6.5 / (13 + 1e-6);
  REQUIRE(a.grad.at(0) == Approx(3 * f).epsilon(1e-15));
  REQUIRE(a.grad.at(1) == Approx(4 * f).epsilon(1e-15));
  REQUIRE(b.grad.at(0) == Approx(12 * f).epsilon(1e-6));
  REQUIRE(clip_grad_norm(params, 100.0) == Approx(6.5).epsilon(1e-6));

  // Exactly at max_norm the factor is just below 1 by the 1e-6, so the gradients shrink a hair.
  reset();
  clip_grad_norm(params, 13.0);
  REQUIRE(a.grad.at(0) == Approx(3.0).epsilon(1e-6));
  REQUIRE(a.grad.at(0) < 3.0);
}

TEST_CASE("clip_grad_norm: float32 gradients of every length against a double sum",
          "[optim][clip]") {
  // Lengths around the 16 lanes and the 4096-element blocks of the vectorised sum, split in two
  // halves (one per job): every path of the sum, each against sum x^2 in double.
  Rng rng(11);
  for (const int64_t n : {1, 15, 16, 17, 31, 33, 100, 4095, 4096, 4097, 8192 + 40, 20000}) {
    Parameter p(Tensor::zeros(Shape{n}, DType::f32));
    double want = 0;
    float* d = p.grad.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      d[i] = static_cast<float>(rng.normal());
      want += static_cast<double>(d[i]) * d[i];
    }
    std::vector<Parameter*> params{&p};
    INFO("n = " << n);
    // Float lanes over blocks of at most 4096: a relative error far below 1e-6.
    REQUIRE(clip_grad_norm(params, 1e9) == Approx(std::sqrt(want)).epsilon(1e-6));
  }
}

TEST_CASE("clip_grad_norm: a non-finite norm is returned and gradients left alone",
          "[optim][clip]") {
  Parameter a(vec({0.0, 0.0})), b(vec({0.0}));
  std::vector<Parameter*> params{&a, &b};
  set_grad(a, {3.0, std::numeric_limits<double>::infinity()});
  set_grad(b, {12.0});
  REQUIRE(std::isinf(clip_grad_norm(params, 1.0)));
  REQUIRE(a.grad.at(0) == 3.0);
  REQUIRE(b.grad.at(0) == 12.0);
  set_grad(a, {3.0, std::nan("")});
  REQUIRE(std::isnan(clip_grad_norm(params, 1.0)));
  REQUIRE(b.grad.at(0) == 12.0);

  REQUIRE(clip_grad_norm(std::vector<Parameter*>{}, 1.0) == 0.0);
  REQUIRE_THROWS_WITH(clip_grad_norm(params, -1.0), Contains("clip_grad_norm") && Contains("-1"));
  REQUIRE_THROWS_AS(clip_grad_norm(params, std::nan("")), ValueError);
}

// ---------------------------------------------------------------------------------------------
// Schedules.

TEST_CASE("StepLR multiplies the lr by gamma every step_size epochs", "[optim][schedule]") {
  Parameter p(vec({1.0}));
  SGD opt({&p}, 1.0);
  StepLR sched(opt, 3, 0.5);
  std::vector<double> lrs;
  for (int epoch = 1; epoch <= 7; ++epoch) {
    sched.step();
    lrs.push_back(opt.lr());
  }
  // epoch e: 0.5^(e / 3)
  REQUIRE(lrs == std::vector<double>{1, 1, 0.5, 0.5, 0.5, 0.25, 0.25});
  REQUIRE(sched.epoch() == 7);
  REQUIRE_THROWS_WITH(StepLR(opt, 0, 0.5),
                      Contains("StepLR") && Contains("step_size") && Contains("0"));
  REQUIRE_THROWS_WITH(StepLR(opt, 2, -0.5),
                      Contains("StepLR") && Contains("gamma") && Contains("-0.5"));
}

TEST_CASE("ReduceLROnPlateau reduces after patience bad epochs and stops at min_lr",
          "[optim][schedule]") {
  Parameter p(vec({1.0}));
  SGD opt({&p}, 1.0);
  ReduceLROnPlateau sched(opt, 0.5, 2, 0.1, 0.2);
  // Improvement means metric < best * (1 - 0.1).
  REQUIRE_FALSE(sched.step(10.0));  // first metric: best = 10
  REQUIRE_FALSE(sched.step(9.5));   // not below 9: bad epoch 1
  REQUIRE_FALSE(sched.step(9.2));   // bad epoch 2 (patience 2: still tolerated)
  REQUIRE(sched.num_bad_epochs() == 2);
  REQUIRE(opt.lr() == 1.0);
  REQUIRE(sched.step(9.1));  // bad epoch 3 > patience: lr 1 -> 0.5
  REQUIRE(opt.lr() == 0.5);
  REQUIRE(sched.num_bad_epochs() == 0);
  REQUIRE_FALSE(sched.step(8.0));  // 8 < 9: improvement, best = 8
  REQUIRE(sched.best() == 8.0);
  for (int i = 0; i < 2; ++i) REQUIRE_FALSE(sched.step(8.0));
  REQUIRE(sched.step(8.0));  // lr 0.5 -> 0.25
  REQUIRE(opt.lr() == 0.25);
  for (int i = 0; i < 2; ++i) REQUIRE_FALSE(sched.step(8.0));
  REQUIRE(sched.step(8.0));  // 0.125 is below min_lr: lr 0.25 -> 0.2
  REQUIRE(opt.lr() == 0.2);
  for (int i = 0; i < 2; ++i) REQUIRE_FALSE(sched.step(8.0));
  REQUIRE_FALSE(sched.step(8.0));  // already at min_lr: nothing to reduce
  REQUIRE(opt.lr() == 0.2);

  REQUIRE_THROWS_WITH(ReduceLROnPlateau(opt, 1.0),
                      Contains("ReduceLROnPlateau") && Contains("factor"));
  REQUIRE_THROWS_WITH(ReduceLROnPlateau(opt, 0.1, -1), Contains("patience") && Contains("-1"));
  REQUIRE_THROWS_WITH(ReduceLROnPlateau(opt, 0.1, 10, 1e-4, -1.0),
                      Contains("min_lr") && Contains("-1"));
}

TEST_CASE("InverseSqrtLR warms up linearly to the peak, then decays as 1/sqrt(step)",
          "[optim][schedule]") {
  Parameter p(vec({1.0}));
  SGD opt({&p}, 1e-3);
  const int64_t warmup = 4000;
  InverseSqrtLR sched(opt, warmup);
  REQUIRE(sched.peak() == 1e-3);
  // lrs[s - 1]: the lr update s was taken with.
  std::vector<double> lrs;
  for (int64_t s = 1; s <= 4 * warmup; ++s) {
    sched.step();
    lrs.push_back(opt.lr());
    opt.step();
  }
  REQUIRE(opt.steps() == 4 * warmup);
  const auto lr = [&](int64_t s) { return lrs[static_cast<size_t>(s - 1)]; };
  CHECK(lr(1) == Approx(1e-3 / 4000).epsilon(1e-15));
  CHECK(lr(warmup / 2) == Approx(0.5e-3).epsilon(1e-15));
  CHECK(lr(warmup) == 1e-3);  // exactly the peak
  CHECK(lr(4 * warmup) == Approx(0.5e-3).epsilon(1e-15));
  // Vaswani et al.'s d^-0.5 min(s^-0.5, s warmup^-1.5) for d = 512 is this schedule with
  // peak = d^-0.5 warmup^-0.5.
  Parameter q(vec({1.0}));
  SGD opt_d({&q}, 1 / std::sqrt(512.0 * warmup));
  InverseSqrtLR vaswani(opt_d, warmup);
  for (int64_t s : {1, 17, 999, 3999, 4000, 4001, 12345, 16000}) {
    const auto x = static_cast<double>(s), w = static_cast<double>(warmup);
    INFO("update " << s);
    CHECK(vaswani.lr_at(s) ==
          Approx(std::pow(512.0, -0.5) * std::min(std::pow(x, -0.5), x * std::pow(w, -1.5)))
              .epsilon(1e-14));
    CHECK(vaswani.lr_at(s) == Approx(lr(s) / (std::sqrt(512.0 * w) * 1e-3)).epsilon(1e-14));
  }
  // Strictly up to the peak, strictly down after it.
  for (int64_t s = 2; s <= warmup; ++s) REQUIRE(lr(s) > lr(s - 1));
  for (int64_t s = warmup + 1; s <= 4 * warmup; ++s) REQUIRE(lr(s) < lr(s - 1));
  REQUIRE_THROWS_AS(InverseSqrtLR(opt, 0), ValueError);
  REQUIRE_THROWS_WITH(InverseSqrtLR(opt, -5),
                      Contains("InverseSqrtLR") && Contains("warmup") && Contains("-5"));
}

TEST_CASE("InverseSqrtLR counts the optimizer's steps, so a resumed run continues the schedule",
          "[optim][schedule]") {
  Parameter a(vec({1.0, -1.0}));
  Adam original({&a}, 0.01);
  InverseSqrtLR sched(original, 10);
  for (int i = 0; i < 7; ++i) {
    set_grad(a, {0.5, -0.25});
    sched.step();
    original.step();
  }
  // A skipped update (no optimizer step) leaves the next update's lr as it was.
  sched.step();
  sched.step();
  REQUIRE(original.lr() == Approx(0.01 * 8 / 10).epsilon(1e-15));
  OptimizerState saved;
  for (const auto& [name, t] : original.state()) saved.emplace_back(name, t.clone());

  // Built at the peak, as the run's flags say, then given the checkpoint's state.
  Parameter b(a.value.clone());
  Adam resumed({&b}, 0.01);
  InverseSqrtLR resumed_sched(resumed, 10);
  resumed.load_state(saved);
  for (int i = 0; i < 6; ++i) {
    set_grad(a, {0.5, -0.25});
    set_grad(b, {0.5, -0.25});
    sched.step();
    resumed_sched.step();
    REQUIRE(resumed.lr() == original.lr());
    original.step();
    resumed.step();
  }
  REQUIRE(resumed.steps() == 13);
  REQUIRE(resumed.lr() == Approx(0.01 * std::sqrt(10.0 / 13)).epsilon(1e-15));
  REQUIRE(b.value.to_vector() == a.value.to_vector());
}
