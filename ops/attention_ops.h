// Fused attention kernels: the additive score, the dot score and the weighted sum of the values,
// each one op over the whole batch instead of a chain of reshapes, broadcasts and tiny products.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// e[b,s] = sum_a v[a] tanh(p[b,s,a] + q[b,a])
//   p (B,S,A) (the projected keys U h_j), q (B,A) (the projected query W s + b), v (A) -> (B,S)
Var additive_scores(const Var& p, const Var& q, const Var& v);

// e[b,s] = sum_k keys[b,s,k] q[b,k]:   keys (B,S,K), q (B,K) -> (B,S)
Var dot_scores(const Var& keys, const Var& q);

// c[b,k] = sum_s a[b,s] values[b,s,k]:   a (B,S), values (B,S,K) -> (B,K)
Var weighted_sum(const Var& a, const Var& values);

// Each throws ShapeError naming the op and every shape when they do not fit.

}  // namespace tapestry::ops
