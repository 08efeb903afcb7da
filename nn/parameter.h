// Parameter: a trainable tensor with its gradient, bound to a tape once per step.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::nn {

class Parameter {
 public:
  Parameter() = default;
  explicit Parameter(Tensor value) : value(std::move(value)) {
    grad = Tensor::zeros(this->value.shape(), this->value.dtype());
  }

  Tensor value;
  Tensor grad;  // accumulates over backward passes until zero_grad() (or a step that zeroes it)

  // The parameter as a leaf of `tape`: bound on first use in a recording and reused after, so a
  // recurrent layer that reads its weights at every time step adds one leaf, not one per step.
  // Its gradient accumulates into `grad` (or where the tape redirects it).
  Var var(Tape& tape);

  const Shape& shape() const { return value.shape(); }
  int64_t numel() const { return value.numel(); }
};

}  // namespace tapestry::nn
