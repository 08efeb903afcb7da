// Softmax and log-softmax along any axis, numerically stable, with an optional mask.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// y = exp(x - max) / sum(exp(x - max)) along `axis` (negative counts from the end), the max and
// the sum taken over the real positions only.
//   (B,T,S) -> (B,T,S)
// `valid`, if given, marks the real positions: a tensor of x's dtype, 1 (any nonzero) for a real
// position and 0 for a masked one, of x's shape or one that broadcasts to it (e.g. (B,1,S) for
// x (B,T,S)). Masked positions get exactly 0 and no gradient. A row with no real position (or
// whose real positions are all -inf) is all zeros and passes back zero gradient; nothing is NaN.
// Throws IndexError for a bad axis, ShapeError (naming both shapes) for a mask that does not
// broadcast to x, DTypeError for a mask of another dtype.
Var softmax(const Var& x, int axis = -1, const Tensor& valid = Tensor());

// y = x - max - log(sum(exp(x - max))) along `axis`, over the real positions as in softmax;
// -infinity at masked positions and over a whole row with no real position. Masked positions
// (and rows with no real position) receive no gradient. Same errors as softmax.
Var log_softmax(const Var& x, int axis = -1, const Tensor& valid = Tensor());

// The forward loop of both ops over one row of len elements `step` apart, with its mask (null:
// every position real), for an inference path that records nothing: the ops call this same
// function, so both give the same bits. Instantiated for float and double.
namespace forward {
template <class T>
void softmax_row(const T* x, const T* mask, T* y, int64_t len, int64_t step, bool log);
}  // namespace forward

// Softmax's backward over one row (y its output, dy its gradient): dx = y * (dy - sum(dy * y)),
// stored (`store`) or added to dx. Ops that take a softmax inside a fused kernel
// (scaled_dot_attention) call it, and so give softmax's bits. Instantiated for float and double.
namespace backward {
template <class T>
void softmax_row(const T* y, const T* dy, T* dx, int64_t len, int64_t step, bool store);
}  // namespace backward

}  // namespace tapestry::ops
