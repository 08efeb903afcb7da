// Linear: y = x W^T + b, as torch.nn.Linear (weight (out,in), bias (out)).
#pragma once

#include "tapestry/core/random.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

class Linear : public Module {
 public:
  // W and b ~ U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default.
  Linear(int64_t in, int64_t out, bool bias, Rng& rng, DType dtype = DType::f32);

  // (..., in) -> (..., out) for x of 2 or 3 dimensions.
  Var forward(Tape& tape, const Var& x);

  Parameter& weight() { return *weight_; }
  Parameter* bias() { return bias_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace tapestry::nn
