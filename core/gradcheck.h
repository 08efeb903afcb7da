// Gradient check: analytic gradients from the tape against central finite differences, in float64,
// driven by a registry of cases (one or more per op and per layer).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"

namespace tapestry {

// A tensor whose gradient is checked: the checker perturbs *value in place and reads *grad after
// backward (the fixture binds them with tape.bind, so gradients accumulate into *grad).
struct CheckedTensor {
  std::string name;
  Tensor* value;
  Tensor* grad;
};

// What a case builds: the tensors to check and a forward pass that uses them.
class GradcheckFixture {
 public:
  virtual ~GradcheckFixture() = default;
  virtual std::vector<CheckedTensor> checked() = 0;
  // Must be deterministic (anything random reseeds inside) and must bind every checked tensor.
  virtual Var forward(Tape& tape) = 0;
};

struct GradcheckCase {
  std::string op;      // the op (an OpDef name) or layer this case checks
  std::string name;    // what the case covers: "broadcast rows", "batch of 3", ...
  std::string shapes;  // the input shapes, for the report
  double eps = 1e-6;   // central-difference step
  // Fourth-order central differences, (8 (L(x+h) - L(x-h)) - (L(x+2h) - L(x-2h))) / 12h, whose
  // truncation error is O(h^4) instead of O(h^2): a larger step then keeps the rounding error of L
  // (about 1e-16 |L| / h) far below gradients that are small beside L, as a whole model's loss is
  // beside its attention weights' gradients. Twice the evaluations.
  bool fourth_order = false;
  double tol = 1e-6;  // largest relative error that passes
  uint64_t seed = 1;
  std::function<std::unique_ptr<GradcheckFixture>(Rng&)> make;
};

// One checked tensor's outcome: its largest error, and the element where that error is, with both
// derivatives there.
struct TensorCheck {
  std::string name;
  Shape shape;
  double max_abs = 0;                // max |analytic - numeric| over its elements
  double max_rel = 0;                // max_abs / max(|analytic|, |numeric|) over its elements
  int64_t worst = 0;                 // the flat index of the largest |analytic - numeric|
  double analytic = 0, numeric = 0;  // at `worst`
  bool pass = false;
};

struct GradcheckResult {
  const GradcheckCase* c = nullptr;
  double max_abs = 0;  // max |analytic - numeric| over all checked elements
  double max_rel =
      0;  // max over checked tensors of max|analytic - numeric| / max(|analytic|,|numeric|)
  std::string worst;  // the checked tensor with the largest relative error
  bool pass = false;
  std::string error;                      // an exception thrown by the case, if any
  std::vector<std::string> ops_recorded;  // names of the ops on the tape of the analytic pass
  std::vector<TensorCheck> tensors;       // per checked tensor, in the case's order
};

// Runs one case: one backward with seed r (loss = sum(r * y), r uniform in [-1,1)) against
// (L(x + eps) - L(x - eps)) / 2eps (or the fourth-order difference) for every element of every
// checked tensor. Outputs that are
// not finite (a masked log_softmax's -inf) are left out of L; they must stay so under perturbation.
GradcheckResult run_gradcheck(const GradcheckCase& c);

// ---- building op cases from a shape list and a function of the inputs

struct InputSpec {
  Shape shape;
  double lo = -1, hi = 1;          // uniform range of the random values
  std::vector<double> avoid = {};  // values to keep away from (kinks such as relu's 0)
  double margin = 1e-3;            // minimum distance from any value in `avoid`
};

using OpFn = std::function<Var(std::span<const Var> x)>;
GradcheckCase op_case(std::string op, std::string name, std::vector<InputSpec> inputs, OpFn fn,
                      double eps = 1e-6);

// ---- checking a function of your own

struct GradcheckOptions {
  double eps = 1e-6;          // the finite-difference step h
  bool fourth_order = false;  // (8 (L(x+h) - L(x-h)) - (L(x+2h) - L(x-2h))) / 12h; else central
  double tol = 1e-6;          // largest relative error that passes
  uint64_t seed = 1;          // the random inputs and the weights r of L = sum(r * y)
  // Random inputs are uniform in [lo, hi), kept at least `margin` away from every value in
  // `avoid` (kinks, such as relu's 0); given inputs must keep that distance too.
  double lo = -1, hi = 1;
  std::vector<double> avoid{};
  double margin = 1e-3;
};

// Checks the gradient of fn with respect to each of its inputs, in float64: one backward with
// loss L = sum(r * fn(x)) for random r, against finite differences of L for every element of
// every input. Inputs of another dtype are converted to float64 (fn must work in float64). The
// result's `tensors` has one row per input, named x0, x1, ...; gradcheck_table prints them.
// Throws ValueError for no inputs, or a given input within `margin` of a value to avoid.
GradcheckResult gradcheck(const std::function<Var(std::span<const Var> x)>& fn,
                          std::vector<Tensor> inputs, const GradcheckOptions& options = {});
// The same with random inputs of these shapes.
GradcheckResult gradcheck(const std::function<Var(std::span<const Var> x)>& fn,
                          const std::vector<Shape>& shapes, const GradcheckOptions& options = {});

// The pieces gradcheck is built from, for checkers of other things (nn::gradcheck_module): a case
// named `op` with the options' step, order, tolerance and seed (its `make` left to set), and the
// inputs as float64 copies, each kept `margin` away from the values to avoid. Throws ValueError
// naming `who` and the input.
GradcheckCase options_case(std::string op, const GradcheckOptions& options);
std::vector<Tensor> checked_inputs(std::vector<Tensor> inputs, const GradcheckOptions& options,
                                   const char* who);

// A readable table of a result: one line per checked tensor (shape, largest errors, the worst
// element with both derivatives, ok or FAIL), then a one-line verdict.
std::string gradcheck_table(const GradcheckResult& r);

// ---- the registry

class GradcheckRegistry {
 public:
  void add(GradcheckCase c) { cases_.push_back(std::move(c)); }
  const std::vector<GradcheckCase>& cases() const { return cases_; }
  // Names that must each have a case: every registered op, plus the layers added here.
  void require_layer(std::string name) { layers_.push_back(std::move(name)); }
  const std::vector<std::string>& layers() const { return layers_; }

 private:
  std::vector<GradcheckCase> cases_;
  std::vector<std::string> layers_;
};

}  // namespace tapestry
