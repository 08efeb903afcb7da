// Gradient check: one analytic backward against central differences over every checked element.
#include "tapestry/core/gradcheck.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace tapestry {

namespace {

// L = sum over finite y of r * y, accumulated in double.
double weighted_sum(const Tensor& y, const Tensor& r) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = y.at(i);
    if (std::isfinite(v)) s += r.at(i) * v;
  }
  return s;
}

Tensor seed_without_nonfinite(const Tensor& y, Tensor r) {
  for (int64_t i = 0; i < y.numel(); ++i)
    if (!std::isfinite(y.at(i))) r.set(i, 0.0);
  return r;
}

double evaluate(GradcheckFixture& f, const Tensor& r) {
  Tape tape;
  NoGrad no_grad(tape);
  Var y = f.forward(tape);
  return weighted_sum(y.value(), r);
}

}  // namespace

GradcheckResult run_gradcheck(const GradcheckCase& c) {
  GradcheckResult res;
  res.c = &c;
  try {
    Rng rng(c.seed);
    std::unique_ptr<GradcheckFixture> f = c.make(rng);
    std::vector<CheckedTensor> checked = f->checked();
    for (auto& t : checked) {
      if (t.value->dtype() != DType::f64)
        throw DTypeError(fmt::format("gradcheck: {} is {}, cases run in float64", t.name,
                                     dtype_name(t.value->dtype())));
      t.grad->zero();
    }

    // Analytic pass.
    Tape tape;
    Var y = f->forward(tape);
    Tensor r = seed_without_nonfinite(y.value(), rng.uniform_tensor(y.shape(), -1, 1, DType::f64));
    std::set<std::string> seen;
    for (size_t i = 0; i < tape.size(); ++i) seen.insert(tape.node(i).op->name);
    res.ops_recorded.assign(seen.begin(), seen.end());
    tape.backward(y, r);

    // Numeric pass, one element at a time.
    bool all_pass = true;
    for (auto& t : checked) {
      double max_abs = 0, scale = 0;
      for (int64_t i = 0; i < t.value->numel(); ++i) {
        const double x0 = t.value->at(i);
        auto loss_at = [&](double x) {
          t.value->set(i, x);
          return evaluate(*f, r);
        };
        const double h = c.eps;
        const double d1 = loss_at(x0 + h) - loss_at(x0 - h);
        const double numeric =
            c.fourth_order ? (8 * d1 - (loss_at(x0 + 2 * h) - loss_at(x0 - 2 * h))) / (12 * h)
                           : d1 / (2 * h);
        t.value->set(i, x0);
        const double analytic = t.grad->at(i);
        max_abs = std::max(max_abs, std::abs(analytic - numeric));
        scale = std::max({scale, std::abs(analytic), std::abs(numeric)});
        if (!std::isfinite(analytic) || !std::isfinite(numeric)) max_abs = INFINITY;
      }
      const double rel = scale > 0 ? max_abs / scale : max_abs;
      res.max_abs = std::max(res.max_abs, max_abs);
      if (rel >= res.max_rel) {
        res.max_rel = rel;
        res.worst = t.name;
      }
      if (!(rel < c.tol)) all_pass = false;
    }
    res.pass = all_pass;
  } catch (const std::exception& e) {
    res.error = e.what();
    res.pass = false;
  }
  return res;
}

namespace {

class OpFixture : public GradcheckFixture {
 public:
  OpFixture(std::vector<Tensor> xs, OpFn fn) : xs_(std::move(xs)), fn_(std::move(fn)) {
    for (auto& x : xs_) dxs_.push_back(Tensor::zeros(x.shape(), x.dtype()));
  }
  std::vector<CheckedTensor> checked() override {
    std::vector<CheckedTensor> out;
    for (size_t i = 0; i < xs_.size(); ++i)
      out.push_back({fmt::format("x{}", i), &xs_[i], &dxs_[i]});
    return out;
  }
  Var forward(Tape& tape) override {
    std::vector<Var> vs;
    for (size_t i = 0; i < xs_.size(); ++i) vs.push_back(tape.bind(xs_[i], dxs_[i]));
    return fn_(vs);
  }

 private:
  std::vector<Tensor> xs_, dxs_;
  OpFn fn_;
};

double sample(Rng& rng, const InputSpec& s) {
  for (int tries = 0; tries < 1000; ++tries) {
    double v = rng.uniform(s.lo, s.hi);
    bool near = std::any_of(s.avoid.begin(), s.avoid.end(),
                            [&](double k) { return std::abs(v - k) < s.margin; });
    if (!near) return v;
  }
  throw ValueError("gradcheck: could not sample a value away from the kinks");
}

}  // namespace

GradcheckCase op_case(std::string op, std::string name, std::vector<InputSpec> inputs, OpFn fn,
                      double eps) {
  GradcheckCase c;
  c.op = std::move(op);
  c.name = std::move(name);
  c.eps = eps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) c.shapes += ' ';
    c.shapes += inputs[i].shape.str();
  }
  c.make = [inputs = std::move(inputs),
            fn = std::move(fn)](Rng& rng) -> std::unique_ptr<GradcheckFixture> {
    std::vector<Tensor> xs;
    for (const auto& s : inputs) {
      Tensor t = Tensor::empty(s.shape, DType::f64);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, sample(rng, s));
      xs.push_back(std::move(t));
    }
    return std::make_unique<OpFixture>(std::move(xs), fn);
  };
  return c;
}

}  // namespace tapestry
