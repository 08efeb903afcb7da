// Optimizers: hand-computed steps of SGD, Adam and AdamW, their state, small trainings (clipping
// and lr schedules are in test_clip_schedule.cpp).
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
// Single steps against the update rules, computed by hand.

TEST_CASE("Adam: two steps match the update rule by hand", "[optim][adam]") {
  Parameter p(vec({1.0, -2.0}));
  Adam opt({&p}, 0.1);  // beta1 0.9, beta2 0.999, eps 1e-8
  // Step 1, element 0: p=1, g=0.5 -> m = 0.1*0.5 = 0.05, v = 0.001*0.25 = 0.00025;
  // bc1 = 1-0.9 = 0.1, bc2 = 1-0.999 = 0.001 -> m_hat = 0.5, v_hat = 0.25;
  // p = 1 - 0.1 * 0.5 / (sqrt(0.25) + 1e-8) = 1 - 0.05/(0.5+1e-8) ~ 0.9.
  // Element 1 has g = 0: m = v = 0, so p stays -2 (0 / eps = 0).
  set_grad(p, {0.5, 0.0});
  opt.step();
  REQUIRE(opt.steps() == 1);
  const double p1 = 1 - 0.1 * 0.5 / (0.5 + 1e-8);
  REQUIRE(p.value.at(0) == Approx(p1).epsilon(1e-14));
  REQUIRE(p.value.at(1) == -2.0);

  // Step 2, element 0: g=0.25 -> m = 0.9*0.05 + 0.1*0.25 = 0.07,
  // v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225; bc1 = 1-0.81 = 0.19, bc2 = 1-0.998001 =
  // 0.001999; p = p1 - 0.1 * (0.07/0.19) / (sqrt(0.00031225/0.001999) + 1e-8) ~ p1 - 0.0932.
  set_grad(p, {0.25, 0.0});
  opt.step();
  const double p2 = p1 - 0.1 * (0.07 / 0.19) / (std::sqrt(0.00031225 / 0.001999) + 1e-8);
  REQUIRE(p.value.at(0) == Approx(p2).epsilon(1e-12));
  REQUIRE(p.value.at(1) == -2.0);
}

TEST_CASE("Adam: L2 weight decay enters the gradient", "[optim][adam]") {
  Parameter p(vec({1.0}));
  Adam opt({&p}, 0.1, 0.9, 0.999, 1e-8, 0.1);
  // g = 0.5 + 0.1*1 = 0.6 -> m_hat = 0.6, v_hat = 0.36; p = 1 - 0.1 * 0.6/(0.6 + 1e-8).
  set_grad(p, {0.5});
  opt.step();
  REQUIRE(p.value.at(0) == Approx(1 - 0.1 * 0.6 / (0.6 + 1e-8)).epsilon(1e-14));
}

TEST_CASE("AdamW: decoupled weight decay shrinks the parameter, two steps", "[optim][adamw]") {
  Parameter p(vec({1.0}));
  AdamW opt({&p}, 0.1);  // weight_decay defaults to 0.01
  // Step 1: p = 1 * (1 - 0.1*0.01) = 0.999, then the plain Adam step with g = 0.5 (the decay
  // does not enter m or v): p = 0.999 - 0.1 * 0.5/(0.5 + 1e-8) ~ 0.899.
  set_grad(p, {0.5});
  opt.step();
  const double p1 = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8);
  REQUIRE(p.value.at(0) == Approx(p1).epsilon(1e-14));
  // Step 2, g = 0.25: p = p1 * 0.999, then the Adam step of the previous test's second step.
  set_grad(p, {0.25});
  opt.step();
  const double p2 = p1 * 0.999 - 0.1 * (0.07 / 0.19) / (std::sqrt(0.00031225 / 0.001999) + 1e-8);
  REQUIRE(p.value.at(0) == Approx(p2).epsilon(1e-12));
}

TEST_CASE("SGD: plain, momentum, Nesterov and weight decay match the rule by hand",
          "[optim][sgd]") {
  SECTION("plain, with weight decay") {
    Parameter p(vec({1.0}));
    SGD opt({&p}, 0.1, 0, 0.1);
    // g = 0.5 + 0.1*1 = 0.6 -> p = 1 - 0.1*0.6 = 0.94
    set_grad(p, {0.5});
    opt.step();
    REQUIRE(p.value.at(0) == Approx(0.94).epsilon(1e-15));
    REQUIRE(opt.state().size() == 2);  // "step" and "lr": no buffer without momentum
  }
  SECTION("momentum 0.9, two steps") {
    Parameter p(vec({1.0}));
    SGD opt({&p}, 0.1, 0.9);
    // Step 1: the buffer starts as the gradient, buf = 0.5; p = 1 - 0.1*0.5 = 0.95.
    set_grad(p, {0.5});
    opt.step();
    REQUIRE(p.value.at(0) == Approx(0.95).epsilon(1e-15));
    // Step 2: g = 0.25 -> buf = 0.9*0.5 + 0.25 = 0.7; p = 0.95 - 0.1*0.7 = 0.88.
    set_grad(p, {0.25});
    opt.step();
    REQUIRE(p.value.at(0) == Approx(0.88).epsilon(1e-15));
  }
  SECTION("Nesterov momentum 0.9, two steps") {
    Parameter p(vec({1.0}));
    SGD opt({&p}, 0.1, 0.9, 0, true);
    // Step 1: buf = 0.5; g = 0.5 + 0.9*0.5 = 0.95; p = 1 - 0.095 = 0.905.
    set_grad(p, {0.5});
    opt.step();
    REQUIRE(p.value.at(0) == Approx(0.905).epsilon(1e-15));
    // Step 2: buf = 0.9*0.5 + 0.25 = 0.7; g = 0.25 + 0.9*0.7 = 0.88; p = 0.905 - 0.088 = 0.817.
    set_grad(p, {0.25});
    opt.step();
    REQUIRE(p.value.at(0) == Approx(0.817).epsilon(1e-15));
  }
}

TEST_CASE("float32 parameters step in float32 with the same rule", "[optim]") {
  Parameter p(vec({1.0}, DType::f32));
  SGD opt({&p}, 0.1, 0.9);
  set_grad(p, {0.5});
  opt.step();
  set_grad(p, {0.25});
  opt.step();
  REQUIRE(p.value.dtype() == DType::f32);
  REQUIRE(p.value.at(0) == Approx(0.88).epsilon(1e-6));
  REQUIRE(opt.state()[2].second.dtype() == DType::f32);  // the buffer follows the parameter
}

TEST_CASE("zero_grad zeroes every gradient; step by default does not touch gradients", "[optim]") {
  Parameter a(vec({1.0, 2.0})), b(vec({3.0}));
  Adam opt({&a, &b});
  set_grad(a, {1.0, -1.0});
  set_grad(b, {2.0});
  opt.step();
  REQUIRE(a.grad.to_vector() == std::vector<double>{1.0, -1.0});
  opt.zero_grad();
  REQUIRE(a.grad.to_vector() == std::vector<double>{0.0, 0.0});
  REQUIRE(b.grad.to_vector() == std::vector<double>{0.0});
}

TEST_CASE("step(grad_scale) equals scaling the gradients first, and leaves them unchanged",
          "[optim][clip]") {
  // What the trainer does (the clipping factor applied as the optimizer reads each gradient)
  // against what clip_grad_norm then step() do, for every optimizer and both weight decays.
  const std::vector<double> x0{0.5, -1.5, 2.0}, g1{3.0, -4.0, 12.0}, g2{-1.0, 2.5, 0.5};
  for (int kind = 0; kind < 4; ++kind) {
    auto make = [&](Parameter& p) -> std::unique_ptr<Optimizer> {
      if (kind == 0)
        return std::make_unique<SGD>(std::vector<Parameter*>{&p}, 0.1, 0.9, 0.01, true);
      if (kind == 1) return std::make_unique<Adam>(std::vector<Parameter*>{&p}, 0.01);
      if (kind == 2)
        return std::make_unique<Adam>(std::vector<Parameter*>{&p}, 0.01, 0.9, 0.98, 1e-8, 0.1);
      return std::make_unique<AdamW>(std::vector<Parameter*>{&p}, 0.01);
    };
    Parameter fused(Tensor::from(x0, {3}, DType::f64)), plain(Tensor::from(x0, {3}, DType::f64));
    auto opt_fused = make(fused), opt_plain = make(plain);
    for (const auto& g : {g1, g2, g1}) {
      fused.grad.copy_from(Tensor::from(g, {3}, DType::f64));
      plain.grad.copy_from(Tensor::from(g, {3}, DType::f64));
      std::vector<Parameter*> fp{&fused}, pp{&plain};
      const double norm = grad_norm(fp);
      REQUIRE(norm == clip_grad_norm(pp, 2.0));
      const double factor = clip_factor(norm, 2.0);
      REQUIRE(factor < 1);  // every gradient here is clipped
      opt_fused->step(factor);
      opt_plain->step();
      INFO(opt_fused->name() << " kind " << kind);
      REQUIRE(fused.grad.to_vector() == g);
      for (int64_t j = 0; j < 3; ++j)
        REQUIRE(fused.value.at(j) == Approx(plain.value.at(j)).epsilon(1e-14));
    }
  }
  Parameter p(vec({1.0}));
  Adam opt({&p});
  REQUIRE_THROWS_WITH(opt.step(-0.5),
                      Contains("adam") && Contains("grad_scale") && Contains("-0.5"));
  REQUIRE_THROWS_AS(opt.step(std::nan("")), ValueError);
  REQUIRE(opt.steps() == 0);
  REQUIRE(clip_factor(3.0, INFINITY) == 1.0);
  REQUIRE(clip_factor(0.0, 1.0) == 1.0);
  REQUIRE(std::isnan(clip_factor(INFINITY, 1.0)));  // a step Optimizer::step refuses
  REQUIRE(std::isnan(clip_factor(std::nan(""), 1.0)));
  REQUIRE_THROWS_AS(clip_factor(1.0, -1.0), ValueError);
}

TEST_CASE("zero_grads_on_step: the same steps, each gradient zeroed once read", "[optim]") {
  const std::vector<double> x0{0.5, -1.5, 2.0}, g1{3.0, -4.0, 12.0}, g2{-1.0, 2.5, 0.5};
  for (DType dt : {DType::f64, DType::f32})
    for (int kind = 0; kind < 3; ++kind) {
      auto make = [&](Parameter& p) -> std::unique_ptr<Optimizer> {
        if (kind == 0)
          return std::make_unique<SGD>(std::vector<Parameter*>{&p}, 0.1, 0.9, 0.01, true);
        if (kind == 1) return std::make_unique<Adam>(std::vector<Parameter*>{&p}, 0.01);
        return std::make_unique<AdamW>(std::vector<Parameter*>{&p}, 0.01);
      };
      // 37 elements: the AVX-512 Adam's whole vectors and its tail
      std::vector<double> x(37), a(37), b(37);
      for (size_t j = 0; j < x.size(); ++j)
        x[j] = x0[j % 3] + 0.01 * double(j), a[j] = g1[j % 3], b[j] = g2[j % 3] * double(j);
      Parameter zeroing(Tensor::from(x, {37}, dt)), plain(Tensor::from(x, {37}, dt));
      auto opt_zeroing = make(zeroing), opt_plain = make(plain);
      opt_zeroing->set_zero_grads_on_step(true);
      REQUIRE_FALSE(opt_plain->zero_grads_on_step());
      for (const auto& g : {a, b, a}) {
        zeroing.grad.copy_from(Tensor::from(g, {37}, dt));
        plain.grad.copy_from(Tensor::from(g, {37}, dt));
        opt_zeroing->step(0.5);
        opt_plain->step(0.5);
        INFO(opt_plain->name() << " " << dtype_name(dt));
        REQUIRE(zeroing.grad.to_vector() == std::vector<double>(37, 0.0));
        REQUIRE(plain.grad.to_vector() == Tensor::from(g, {37}, dt).to_vector());
        REQUIRE(zeroing.value.to_vector() == plain.value.to_vector());
      }
    }
}

TEST_CASE("bad optimizer arguments throw ValueError naming the optimizer and the value",
          "[optim][errors]") {
  Parameter p(vec({1.0}));
  REQUIRE_THROWS_AS(SGD({}, 0.1), ValueError);
  REQUIRE_THROWS_WITH(SGD({&p}, -0.1), Contains("sgd") && Contains("lr") && Contains("-0.1"));
  REQUIRE_THROWS_WITH(SGD({&p}, 0.1, -0.5),
                      Contains("sgd") && Contains("momentum") && Contains("-0.5"));
  REQUIRE_THROWS_WITH(SGD({&p}, 0.1, 0, 0, true), Contains("sgd") && Contains("nesterov"));
  REQUIRE_THROWS_WITH(SGD({&p, &p}, 0.1), Contains("sgd") && Contains("more than once"));
  REQUIRE_THROWS_WITH(SGD({&p, nullptr}, 0.1),
                      Contains("sgd") && Contains("parameter 1") && Contains("null"));
  REQUIRE_THROWS_WITH(Adam({&p}, 1e-3, 1.5),
                      Contains("adam") && Contains("beta1") && Contains("1.5"));
  REQUIRE_THROWS_WITH(Adam({&p}, 1e-3, 0.9, 1.0),
                      Contains("adam") && Contains("beta2") && Contains("1"));
  REQUIRE_THROWS_WITH(Adam({&p}, 1e-3, 0.9, 0.999, -1e-8), Contains("adam") && Contains("eps"));
  REQUIRE_THROWS_WITH(AdamW({&p}, 1e-3, 0.9, 0.999, 1e-8, -0.01),
                      Contains("adamw") && Contains("weight_decay") && Contains("-0.01"));
  Adam opt({&p}, 0.1);
  REQUIRE_THROWS_WITH(opt.set_lr(std::nan("")),
                      Contains("adam") && Contains("lr") && Contains("nan"));
  REQUIRE(opt.lr() == 0.1);
  // A gradient that no longer fits its value is caught before anything is updated.
  p.grad = Tensor::zeros({2}, DType::f64);
  REQUIRE_THROWS_WITH(opt.step(), Contains("adam") && Contains("parameter 0") && Contains("(2)"));
  REQUIRE(opt.steps() == 0);
  REQUIRE(p.value.at(0) == 1.0);
}

// ---------------------------------------------------------------------------------------------
// State: created once, saved and restored.

TEST_CASE("state tensors are created once and reused by every later step", "[optim][memory]") {
  Parameter a(vec({1.0, 2.0, 3.0})), b(Tensor::zeros({2, 2}, DType::f64));
  Adam adam({&a, &b}, 0.01);
  SGD sgd({&a, &b}, 0.01, 0.9);
  REQUIRE(adam.state().size() == 2);  // "step", "lr": nothing allocated before the first step
  for (Optimizer* opt : {static_cast<Optimizer*>(&adam), static_cast<Optimizer*>(&sgd)}) {
    a.grad.fill(0.1);
    b.grad.fill(-0.2);
    opt->step();
    std::vector<const double*> first;
    for (const auto& [name, t] : opt->state())
      if (name != "step" && name != "lr") first.push_back(t.data<double>());
    REQUIRE(first.size() == (opt == &adam ? 4u : 2u));

    MemoryStats before = memory_stats();
    for (int i = 0; i < 100; ++i) opt->step();
    MemoryStats after = memory_stats();
    // No tensor memory taken during the 100 steps, not even from the pool.
    REQUIRE(after.system_allocations == before.system_allocations);
    REQUIRE(after.pool_hits == before.pool_hits);
    REQUIRE(after.bytes_in_use == before.bytes_in_use);

    std::vector<const double*> later;
    for (const auto& [name, t] : opt->state())
      if (name != "step" && name != "lr") later.push_back(t.data<double>());
    REQUIRE(later == first);
    REQUIRE(opt->steps() == 101);
  }
}

TEST_CASE("state names follow the optimizer, slot and parameter index", "[optim][state]") {
  Parameter a(vec({1.0})), b(vec({1.0, 2.0}));
  Adam opt({&a, &b}, 0.01);
  opt.step();
  std::vector<std::string> names;
  for (const auto& [name, t] : opt.state()) names.push_back(name);
  REQUIRE(names ==
          std::vector<std::string>{"step", "lr", "adam.m.0", "adam.m.1", "adam.v.0", "adam.v.1"});
  REQUIRE(opt.state()[0].second.item() == 1);
  REQUIRE(opt.state()[1].second.item() == 0.01);
}

TEST_CASE("load_state resumes exactly where the saved optimizer was", "[optim][state]") {
  for (int kind = 0; kind < 3; ++kind) {
    Rng rng(7);
    Parameter a(rng.normal_tensor({3, 2}, 0, 1, DType::f64)),
        b(rng.normal_tensor({4}, 0, 1, DType::f64));
    auto make = [&](Parameter& x, Parameter& y) -> std::unique_ptr<Optimizer> {
      if (kind == 0) return std::make_unique<Adam>(std::vector<Parameter*>{&x, &y}, 0.05);
      if (kind == 1) return std::make_unique<AdamW>(std::vector<Parameter*>{&x, &y}, 0.05);
      return std::make_unique<SGD>(std::vector<Parameter*>{&x, &y}, 0.05, 0.9, 1e-3, true);
    };
    auto original = make(a, b);
    auto random_grads = [&] {
      rng.fill_normal(a.grad, 0, 1);
      rng.fill_normal(b.grad, 0, 1);
    };
    for (int i = 0; i < 3; ++i) {
      random_grads();
      original->step();
    }
    original->set_lr(0.02);  // as a schedule would
    OptimizerState saved;
    for (const auto& [name, t] : original->state()) saved.emplace_back(name, t.clone());

    Parameter a2(a.value.clone()), b2(b.value.clone());
    auto resumed = make(a2, b2);
    resumed->load_state(saved);
    REQUIRE(resumed->steps() == 3);
    REQUIRE(resumed->lr() == 0.02);
    for (int i = 0; i < 2; ++i) {
      random_grads();
      a2.grad.copy_from(a.grad);
      b2.grad.copy_from(b.grad);
      original->step();
      resumed->step();
    }
    REQUIRE(a2.value.to_vector() == a.value.to_vector());
    REQUIRE(b2.value.to_vector() == b.value.to_vector());
  }
}

TEST_CASE("load_state rejects mismatched state and changes nothing", "[optim][state][errors]") {
  Parameter a(vec({1.0, 2.0})), b(vec({3.0}));
  Adam source({&a, &b}, 0.01);
  source.step();
  const OptimizerState saved = source.state();

  Parameter c(vec({1.0, 2.0})), d(vec({3.0, 4.0}));
  Adam target({&c, &d}, 0.5);
  REQUIRE_THROWS_WITH(target.load_state(saved), Contains("adam") && Contains("adam.m.1") &&
                                                    Contains("(1)") && Contains("(2)"));
  REQUIRE(target.steps() == 0);
  REQUIRE(target.lr() == 0.5);
  REQUIRE(target.state().size() == 2);

  Parameter e(vec({1.0, 2.0})), f(vec({3.0}));
  Adam same({&e, &f}, 0.5);
  OptimizerState missing = saved;
  missing.erase(missing.begin() + 5);  // adam.v.1
  REQUIRE_THROWS_WITH(same.load_state(missing), Contains("missing") && Contains("adam.v.1"));
  OptimizerState no_step(saved.begin() + 1, saved.end());
  REQUIRE_THROWS_WITH(same.load_state(no_step), Contains("missing") && Contains("'step'"));
  OptimizerState extra = saved;
  extra.emplace_back("adam.m.2", vec({0.0}));
  REQUIRE_THROWS_WITH(same.load_state(extra), Contains("unexpected") && Contains("adam.m.2"));

  // Another optimizer's state does not fit.
  SGD sgd({&e, &f}, 0.1, 0.9);
  REQUIRE_THROWS_WITH(sgd.load_state(saved),
                      Contains("sgd") && Contains("unexpected") && Contains("adam.m.0"));
  AdamW adamw({&e, &f});
  REQUIRE_THROWS_WITH(adamw.load_state(saved), Contains("adamw") && Contains("adam.m.0"));
  REQUIRE(same.steps() == 0);

  // A fresh state (step 0, no slots) loads into a used optimizer and resets it.
  Adam fresh({&e, &f}, 0.01);
  source.load_state(fresh.state());
  REQUIRE(source.steps() == 0);
  REQUIRE(source.state().size() == 2);
}

// ---------------------------------------------------------------------------------------------
// Training small problems to a stated loss.

namespace {
// y = X w* + b* + noise for 64 samples and 3 features; `floor` is the MSE of the true parameters.
struct Regression {
  Tensor x, y;
  double floor = 0;
};

Regression make_regression(DType dt, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = 64;
  const double w[3] = {1.5, -2.0, 0.5}, b = 0.3;
  Regression d;
  d.x = rng.normal_tensor({n, 3}, 0, 1, dt);
  d.y = Tensor::empty({n, 1}, dt);
  for (int64_t i = 0; i < n; ++i) {
    const double noise = rng.normal(0, 0.01);
    d.y.set(i,
            d.x.at(3 * i) * w[0] + d.x.at(3 * i + 1) * w[1] + d.x.at(3 * i + 2) * w[2] + b + noise);
    d.floor += noise * noise / n;
  }
  return d;
}

double mse(const Tensor& yhat, const Tensor& y) {
  double sum = 0;
  for (int64_t i = 0; i < y.numel(); ++i) sum += (yhat.at(i) - y.at(i)) * (yhat.at(i) - y.at(i));
  return sum / y.numel();
}

// Trains yhat = X w + b (w, b from zero) for `steps` steps of `opt`; returns the final MSE.
double train_regression(const Regression& d, Parameter& w, Parameter& b, Optimizer& opt,
                        int steps) {
  Tape tape;
  const int64_t n = d.y.numel();
  Tensor dyhat = Tensor::empty(d.y.shape(), d.y.dtype());
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Var yhat = ops::add(ops::matmul(d.x, w.var(tape)), b.var(tape));
    // loss = mean((yhat - y)^2), so the seed is dloss/dyhat = 2 (yhat - y) / N.
    for (int64_t i = 0; i < n; ++i) dyhat.set(i, 2 * (yhat.value().at(i) - d.y.at(i)) / n);
    tape.backward(yhat, dyhat);
    opt.step();
    tape.clear();
  }
  return mse(ops::add(ops::matmul(d.x, w.value), b.value).value(), d.y);
}
}  // namespace

TEST_CASE("Adam trains linear regression to the noise floor", "[optim][train]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Regression d = make_regression(dt, 42);
    Parameter w(Tensor::zeros({3, 1}, dt)), b(Tensor::zeros({1}, dt));
    Adam opt({&w, &b}, 0.05);
    const double start = mse(Tensor::zeros(d.y.shape(), dt), d.y);
    const double loss = train_regression(d, w, b, opt, 500);
    WARN("Adam " << dtype_name(dt) << ": MSE " << start << " -> " << loss
                 << " after 500 steps (noise floor " << d.floor << ")");
    REQUIRE(loss < d.floor + 1e-5);
    REQUIRE(w.value.at(0) == Approx(1.5).margin(0.01));
    REQUIRE(b.value.at(0) == Approx(0.3).margin(0.01));
  }
}

TEST_CASE("SGD with momentum trains linear regression to the noise floor", "[optim][train]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Regression d = make_regression(dt, 42);
    Parameter w(Tensor::zeros({3, 1}, dt)), b(Tensor::zeros({1}, dt));
    SGD opt({&w, &b}, 0.05, 0.9);
    const double start = mse(Tensor::zeros(d.y.shape(), dt), d.y);
    const double loss = train_regression(d, w, b, opt, 200);
    WARN("SGD " << dtype_name(dt) << ": MSE " << start << " -> " << loss
                << " after 200 steps (noise floor " << d.floor << ")");
    REQUIRE(loss < d.floor + 1e-5);
    REQUIRE(w.value.at(1) == Approx(-2.0).margin(0.01));
  }
}

TEST_CASE("SGD trains a 2-class logistic regression", "[optim][train]") {
  // Two Gaussian blobs (std 0.5) centred at (-1,-1) (class 0) and (1,1) (class 1).
  Rng rng(3);
  const int64_t n = 100;
  Tensor x = Tensor::empty({n, 2}, DType::f64), y = Tensor::empty({n, 1}, DType::f64);
  for (int64_t i = 0; i < n; ++i) {
    const double label = i % 2, centre = label == 1 ? 1.0 : -1.0;
    x.set(2 * i, rng.normal(centre, 0.5));
    x.set(2 * i + 1, rng.normal(centre, 0.5));
    y.set(i, label);
  }
  Parameter w(Tensor::zeros({2, 1}, DType::f64)), b(Tensor::zeros({1}, DType::f64));
  SGD opt({&w, &b}, 0.5);
  Tape tape;
  Tensor dz = Tensor::empty({n, 1}, DType::f64);
  double loss = 0;
  int correct = 0;
  for (int s = 0; s <= 200; ++s) {
    opt.zero_grad();
    Var z = ops::add(ops::matmul(x, w.var(tape)), b.var(tape));
    Var p = ops::sigmoid(z);
    // loss = -mean(y log p + (1-y) log(1-p)); its gradient with respect to the logit z is (p -
    // y)/N.
    loss = 0;
    correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double pi = p.value().at(i), yi = y.at(i);
      loss -= (yi * std::log(pi) + (1 - yi) * std::log(1 - pi)) / n;
      correct += (pi > 0.5) == (yi == 1);
      dz.set(i, (pi - yi) / n);
    }
    if (s == 200) break;  // the loss and accuracy of the parameters after 200 steps
    tape.backward(z, dz);
    opt.step();
    tape.clear();
  }
  WARN("logistic regression: loss " << loss << ", " << correct << "/" << n
                                    << " correct after 200 steps");
  REQUIRE(loss < 0.1);
  REQUIRE(correct >= 98);
}
