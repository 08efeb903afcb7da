// LayerNorm: normalisation over the last axis with a learned scale and shift, as
// torch.nn.LayerNorm.
#pragma once

#include "tapestry/nn/module.h"

namespace tapestry::nn {

class LayerNorm : public Module {
 public:
  // weight = 1 and bias = 0 (d each), as PyTorch initialises them.
  explicit LayerNorm(int64_t d, double eps = 1e-5, DType dtype = DType::f32);
  // (..., d) -> (..., d)
  Var forward(Tape& tape, const Var& x);
  Parameter& weight() { return *weight_; }
  Parameter& bias() { return *bias_; }
  double eps() const { return eps_; }

 private:
  Parameter* weight_;
  Parameter* bias_;
  double eps_;
};

}  // namespace tapestry::nn
