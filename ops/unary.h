// Elementwise nonlinearities: exp, log, sqrt, pow, tanh, sigmoid, relu, gelu.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

Var exp(const Var& x);
Var log(const Var& x);
Var sqrt(const Var& x);
Var pow(const Var& x, double p);  // y = x^p for a constant exponent p
Var tanh(const Var& x);
Var sigmoid(const Var& x);
Var relu(const Var& x);
Var gelu(const Var& x);  // exact: x Phi(x) with the normal cdf Phi (erf), as torch.nn.GELU()

}  // namespace tapestry::ops
