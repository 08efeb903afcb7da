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

// The forward loops of the three ops on raw row-major arrays, for an inference path that records
// nothing (models/rnn_inference.h): the ops call these same functions, so both give the same
// bits. Instantiated for float and double.
namespace forward {
template <class T>
void additive_scores(const T* p, const T* q, const T* v, T* e, int64_t b, int64_t s, int64_t a);
template <class T>
void dot_scores(const T* keys, const T* q, T* e, int64_t b, int64_t s, int64_t k);
template <class T>
void weighted_sum(const T* a, const T* values, T* c, int64_t b, int64_t s, int64_t k);
}  // namespace forward

}  // namespace tapestry::ops
