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
      TensorCheck tc;
      tc.name = t.name;
      tc.shape = t.value->shape();
      double max_abs = 0, scale = 0;
      for (int64_t i = 0; i < t.value->numel(); ++i) {
        const double x0 = t.value->at(i);
        // Puts the element back however the evaluations end: a checked tensor may be the
        // caller's own parameter (nn::gradcheck_module), and the forward may throw.
        struct Restore {
          Tensor* t;
          int64_t i;
          double x0;
          ~Restore() { t->set(i, x0); }
        } restore{t.value, i, x0};
        auto loss_at = [&](double x) {
          t.value->set(i, x);
          return evaluate(*f, r);
        };
        const double h = c.eps;
        const double d1 = loss_at(x0 + h) - loss_at(x0 - h);
        const double numeric =
            c.fourth_order ? (8 * d1 - (loss_at(x0 + 2 * h) - loss_at(x0 - 2 * h))) / (12 * h)
                           : d1 / (2 * h);
        const double analytic = t.grad->at(i);
        const double err = std::isfinite(analytic) && std::isfinite(numeric)
                               ? std::abs(analytic - numeric)
                               : INFINITY;
        if (i == 0 || err > max_abs) {
          tc.worst = i;
          tc.analytic = analytic;
          tc.numeric = numeric;
        }
        max_abs = std::max(max_abs, err);
        scale = std::max({scale, std::abs(analytic), std::abs(numeric)});
      }
      const double rel = scale > 0 ? max_abs / scale : max_abs;
      tc.max_abs = max_abs;
      tc.max_rel = rel;
      tc.pass = rel < c.tol;
      res.tensors.push_back(tc);
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

// ---------------------------------------------------------------------------------------------
// Checking a function of your own

GradcheckCase options_case(std::string op, const GradcheckOptions& o) {
  GradcheckCase c;
  c.op = std::move(op);
  c.eps = o.eps;
  c.fourth_order = o.fourth_order;
  c.tol = o.tol;
  c.seed = o.seed;
  return c;
}

std::vector<Tensor> checked_inputs(std::vector<Tensor> inputs, const GradcheckOptions& options,
                                   const char* who) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].defined()) throw ValueError(fmt::format("{}: input x{} is undefined", who, k));
    inputs[k] = inputs[k].to(DType::f64);
    for (int64_t i = 0; i < inputs[k].numel(); ++i)
      for (double kink : options.avoid)
        if (std::abs(inputs[k].at(i) - kink) < options.margin)
          throw ValueError(
              fmt::format("{}: input x{} element {} is {}, within {} of {} (a point to avoid)", who,
                          k, i, inputs[k].at(i), options.margin, kink));
  }
  return inputs;
}

GradcheckResult gradcheck(const std::function<Var(std::span<const Var>)>& fn,
                          std::vector<Tensor> inputs, const GradcheckOptions& options) {
  if (!fn) throw ValueError("gradcheck: no function given");
  if (inputs.empty()) throw ValueError("gradcheck: no inputs to check");
  inputs = checked_inputs(std::move(inputs), options, "gradcheck");
  // The case owns the function and its inputs; run_gradcheck keeps a pointer to the case, which
  // the result outlives: the returned result has c = nullptr.
  GradcheckCase c = options_case("function", options);
  for (size_t k = 0; k < inputs.size(); ++k)
    c.shapes.append(k ? " " : "").append(inputs[k].shape().str());
  c.make = [inputs, fn](Rng&) -> std::unique_ptr<GradcheckFixture> {
    std::vector<Tensor> xs;
    for (const auto& t : inputs) xs.push_back(t.clone());
    return std::make_unique<OpFixture>(std::move(xs), fn);
  };
  GradcheckResult r = run_gradcheck(c);
  r.c = nullptr;
  return r;
}

GradcheckResult gradcheck(const std::function<Var(std::span<const Var>)>& fn,
                          const std::vector<Shape>& shapes, const GradcheckOptions& options) {
  if (!fn) throw ValueError("gradcheck: no function given");
  if (shapes.empty()) throw ValueError("gradcheck: no inputs to check");
  std::vector<InputSpec> specs;
  for (const auto& s : shapes)
    specs.push_back({s, options.lo, options.hi, options.avoid, options.margin});
  GradcheckCase c = options_case("function", options);
  GradcheckCase sampled = op_case("function", "", std::move(specs), fn, options.eps);
  c.shapes = sampled.shapes;
  c.make = sampled.make;
  GradcheckResult r = run_gradcheck(c);
  r.c = nullptr;
  return r;
}

std::string gradcheck_table(const GradcheckResult& r) {
  std::string out =
      fmt::format("{:<10} {:<12} {:>10} {:>10}  {:<12} {:>13} {:>13}  {}\n", "input", "shape",
                  "max abs", "max rel", "worst at", "analytic", "numeric", "result");
  size_t failed = 0;
  for (const auto& t : r.tensors) {
    std::vector<int64_t> dims;
    for (int i = 0; i < t.shape.ndim(); ++i) dims.push_back(t.shape.dim(i));
    // The worst element's index, "[i,j]"
    std::string at = "[";
    int64_t rest = t.worst;
    std::vector<int64_t> idx(dims.size());
    for (size_t d = dims.size(); d-- > 0;) {
      idx[d] = dims[d] ? rest % dims[d] : 0;
      rest = dims[d] ? rest / dims[d] : 0;
    }
    for (size_t d = 0; d < idx.size(); ++d) at += fmt::format("{}{}", d ? "," : "", idx[d]);
    at += "]";
    out += fmt::format("{:<10} {:<12} {:>10.2e} {:>10.2e}  {:<12} {:>13.6e} {:>13.6e}  {}\n",
                       t.name, t.shape.str(), t.max_abs, t.max_rel, at, t.analytic, t.numeric,
                       t.pass ? "ok" : "FAIL");
    failed += !t.pass;
  }
  if (!r.error.empty()) return out + "error: " + r.error + "\n";
  out += fmt::format("{} input{} checked, {} failed; worst relative error {:.2e}: {}\n",
                     r.tensors.size(), r.tensors.size() == 1 ? "" : "s", failed, r.max_rel,
                     r.pass ? "PASS" : "FAIL");
  return out;
}

}  // namespace tapestry
