// Optimizers: SGD (momentum, Nesterov), Adam and AdamW with PyTorch's update rules, and their
// state.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tapestry/nn/parameter.h"

namespace tapestry::nn {

// Named tensors that let a run resume where it stopped: "step", "lr" and one entry per
// parameter and state kind, e.g. "adam.m.3" (the first moment of parameter 3).
using OptimizerState = std::vector<std::pair<std::string, Tensor>>;

// Updates parameters in place from their accumulated gradients. A step reads Parameter::grad
// (and zeroes it with set_zero_grads_on_step) and writes Parameter::value with plain loops (nothing
// is recorded on a tape). State tensors are allocated once, on the first step, so later steps
// allocate nothing. The optimizer keeps pointers to the parameters, which must outlive it.
class Optimizer {
 public:
  // `name` prefixes error messages and state entries. Throws ValueError on an empty or
  // duplicated parameter list, a null or undefined parameter, or a negative or non-finite lr.
  explicit Optimizer(std::vector<Parameter*> params, double lr, std::string name = "optimizer");
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter from its gradient times grad_scale (>= 0 and finite): 1 takes the
  // gradient as it is; a clipping factor (nn::clip_factor) here gives what clip_grad_norm and
  // step() give, without the pass that scales every gradient. Gradients are left unchanged
  // unless set_zero_grads_on_step(true), when each is zeroed once read.
  void step(double grad_scale = 1);
  void zero_grad();
  // With on, step() zeroes each gradient once it has read it (as zero_grad() after the step
  // would), in the same pass over the gradients: a training loop that zeroes before every
  // backward can skip that pass after a step. Off by default, as in PyTorch.
  void set_zero_grads_on_step(bool on) { zero_grads_on_step_ = on; }
  bool zero_grads_on_step() const { return zero_grads_on_step_; }

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }
  const std::string& name() const { return name_; }
  const std::vector<Parameter*>& params() const { return params_; }

  // "step", "lr", then "<name>.<slot>.<i>" for every slot and parameter once the state exists.
  // The slot tensors share storage with the optimizer's: clone them to keep a snapshot.
  OptimizerState state() const;
  // Restores what state() returned (from this optimizer or one built over parameters of the
  // same shapes). Checks every name and shape before changing anything; throws ValueError naming
  // the first missing, unexpected or misshapen entry. A step-0 state without slot entries resets
  // the slots, so the next step starts afresh as the first one does.
  void load_state(const OptimizerState& state);

 protected:
  // Names the per-parameter state kinds ("m", "v"); subclasses call this from their constructor.
  void declare_slots(std::vector<std::string> slots) { slot_names_ = std::move(slots); }
  // Allocates every slot tensor (zeros, the parameter's shape and dtype) unless they exist;
  // returns whether it did, which marks the first step after construction or a reset.
  bool ensure_slots();
  Tensor& slot(size_t k, size_t param) { return slots_[k * params_.size() + param]; }
  // One update with gradients scale * grad; step() has checked the gradients and counted it.
  virtual void update(double scale) = 0;
  // Throws ValueError "<name>: <what> must be <rule>, got <value>" unless `ok`.
  void require(bool ok, const char* what, const char* rule, double value) const;

 private:
  std::vector<Parameter*> params_;
  double lr_;
  std::string name_;
  int64_t steps_ = 0;
  std::vector<std::string> slot_names_;
  std::vector<Tensor> slots_;  // slot k of parameter i at k * params_.size() + i; empty until used
  bool zero_grads_on_step_ = false;
};

// torch.optim.SGD with dampening 0: g += wd * p; buf = momentum * buf + g (buf = g on the first
// step); g = nesterov ? g + momentum * buf : buf; p -= lr * g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Parameter*> params, double lr, double momentum = 0, double weight_decay = 0,
      bool nesterov = false);

 protected:
  void update(double scale) override;

 private:
  double momentum_, weight_decay_;
  bool nesterov_;
};

// torch.optim.Adam: g += wd * p (L2 through the gradient); m = b1 m + (1-b1) g;
// v = b2 v + (1-b2) g^2; p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Parameter*> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0);

 protected:
  void update(double scale) override;
  // decoupled: weight decay shrinks p directly (AdamW) instead of entering the gradient.
  Adam(std::vector<Parameter*> params, double lr, double beta1, double beta2, double eps,
       double weight_decay, bool decoupled, std::string name);

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
};

// torch.optim.AdamW: p *= 1 - lr * wd, then the Adam step without L2 in the gradient.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Parameter*> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2);
};

}  // namespace tapestry::nn
