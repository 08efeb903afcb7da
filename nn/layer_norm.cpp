// LayerNorm as a module over the fused ops::layer_norm.
#include "tapestry/nn/layer_norm.h"

#include "tapestry/ops/norm.h"

namespace tapestry::nn {

LayerNorm::LayerNorm(int64_t d, double eps, DType dtype) : eps_(eps) {
  weight_ = &add_parameter("weight", Tensor::full({d}, 1.0, dtype));
  bias_ = &add_parameter("bias", Tensor::zeros({d}, dtype));
}

Var LayerNorm::forward(Tape& tape, const Var& x) {
  return ops::layer_norm(x, weight_->var(tape), bias_->var(tape), eps_);
}

}  // namespace tapestry::nn
