// Small tensors and gradients written out, for the optimizer and clipping tests.
#pragma once

#include <initializer_list>

#include "tapestry/core/tensor.h"
#include "tapestry/nn/parameter.h"

namespace tapestry::testing {

// A vector of the given values.
inline Tensor vec(std::initializer_list<double> v, DType dt = DType::f64) {
  return Tensor::from(v, {static_cast<int64_t>(v.size())}, dt);
}

// Sets p's gradient to the given values.
inline void set_grad(nn::Parameter& p, std::initializer_list<double> g) {
  p.grad.copy_from(vec(g, p.grad.dtype()));
}

}  // namespace tapestry::testing
