// Dropout module: forwards to ops::dropout with the module's mode and generator.
#include "tapestry/nn/dropout.h"

#include "tapestry/ops/dropout.h"

namespace tapestry::nn {

Var Dropout::forward(const Var& x) {
  return ops::dropout(x, p_, rng_, training());
}

}  // namespace tapestry::nn
