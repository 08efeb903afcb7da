// Losses: cross-entropy over logits with integer targets, fused with its softmax.
#pragma once

#include <cstdint>
#include <span>

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// loss = mean over the rows i whose target is not ignore_index of
//        logsumexp(logits_i) - logits_i[targets_i]
//   logits (N,V), targets N ints in [0,V) or ignore_index -> loss ()
// Fused and numerically stable; backward gives dlogits_i = dloss * (softmax(logits_i) -
// onehot(targets_i)) / count, and nothing to ignored rows. If every row is ignored (or N = 0) the
// loss is 0 and the gradient 0 (PyTorch would give NaN), so a batch of padding is harmless.
// Throws ShapeError (naming the shapes) if logits is not 2-D or targets has not N entries, and
// IndexError (naming the row, the target and V) for a target outside [0,V) other than ignore_index.
Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index = -100);

}  // namespace tapestry::ops
