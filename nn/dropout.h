// Dropout as a module: active in training mode, the identity in eval mode; seeded.
#pragma once

#include "tapestry/core/random.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

class Dropout : public Module {
 public:
  Dropout(double p, uint64_t seed) : p_(p), rng_(seed) {}
  Var forward(const Var& x);
  double p() const { return p_; }

 private:
  double p_;
  Rng rng_;
};

}  // namespace tapestry::nn
