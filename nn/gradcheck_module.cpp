// Gradient check of a module of your own: its parameters and its inputs as checked tensors.
#include "tapestry/nn/gradcheck_module.h"

#include <fmt/format.h>

namespace tapestry::nn {

namespace {

// Checks a module that the caller owns: the fixture only points at it.
class BorrowedModule : public GradcheckFixture {
 public:
  BorrowedModule(Module& m, std::vector<Tensor> xs,
                 std::function<Var(Tape&, std::span<const Var>)> fn)
      : m_(m), xs_(std::move(xs)), fn_(std::move(fn)) {
    for (auto& x : xs_) dxs_.push_back(Tensor::zeros(x.shape(), x.dtype()));
  }
  std::vector<CheckedTensor> checked() override {
    std::vector<CheckedTensor> out;
    for (size_t i = 0; i < xs_.size(); ++i)
      out.push_back({fmt::format("x{}", i), &xs_[i], &dxs_[i]});
    for (auto& [name, p] : m_.named_parameters()) out.push_back({name, &p->value, &p->grad});
    return out;
  }
  Var forward(Tape& tape) override {
    std::vector<Var> vs;
    for (size_t i = 0; i < xs_.size(); ++i) vs.push_back(tape.bind(xs_[i], dxs_[i]));
    return fn_(tape, vs);
  }

 private:
  Module& m_;
  std::vector<Tensor> xs_, dxs_;
  std::function<Var(Tape&, std::span<const Var>)> fn_;
};

}  // namespace

GradcheckResult gradcheck_module(Module& module,
                                 const std::function<Var(Tape&, std::span<const Var>)>& fn,
                                 std::vector<Tensor> inputs, const GradcheckOptions& options) {
  if (!fn) throw ValueError("gradcheck_module: no function given");
  for (auto& [name, p] : module.named_parameters())
    if (p->value.dtype() != DType::f64)
      throw DTypeError(fmt::format(
          "gradcheck_module: parameter '{}' is {}; build the module with DType::f64 to check it",
          name, dtype_name(p->value.dtype())));
  inputs = checked_inputs(std::move(inputs), options, "gradcheck_module");
  GradcheckCase c = options_case("module", options);
  c.make = [&module, &inputs, &fn](Rng&) -> std::unique_ptr<GradcheckFixture> {
    return std::make_unique<BorrowedModule>(module, inputs, fn);
  };
  GradcheckResult r = run_gradcheck(c);
  r.c = nullptr;
  return r;
}

}  // namespace tapestry::nn
