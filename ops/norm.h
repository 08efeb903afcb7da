// Normalisation: layer normalisation over the last axis, one fused op (forward and backward).
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis D of x (..., D), the variance
// biased (divided by D) as torch.nn.LayerNorm takes it; gamma and beta (D). Throws ShapeError
// for a gamma or beta of another length, DTypeError for mixed dtypes.
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps = 1e-5);

}  // namespace tapestry::ops
