// Losses: cross-entropy over logits with integer targets, fused with its softmax.
#pragma once

#include <cstdint>
#include <span>

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// loss = mean over the rows i whose target is not ignore_index of
//        (1 - eps) (logsumexp(logits_i) - logits_i[targets_i])
//        + eps mean_j (logsumexp(logits_i) - logits_ij),   eps = label_smoothing
//   logits (N,V), targets N ints in [0,V) or ignore_index -> loss ()
// With eps > 0 the target distribution is (1 - eps) onehot + eps / V (Szegedy et al.'s label
// smoothing, as PyTorch's F.cross_entropy(..., label_smoothing=eps)). Fused and numerically
// stable; backward gives dlogits_i = dloss * (softmax(logits_i) - (1 - eps) onehot(targets_i) -
// eps / V) / count, and nothing to ignored rows. If every row is ignored (or N = 0) the loss is 0
// and the gradient 0 (PyTorch would give NaN), so a batch of padding is harmless.
// Throws ShapeError (naming the shapes) if logits is not 2-D or targets has not N entries,
// IndexError (naming the row, the target and V) for a target outside [0,V) other than ignore_index,
// and ValueError (naming the value) unless 0 <= label_smoothing < 1.
Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index = -100,
                  double label_smoothing = 0);

}  // namespace tapestry::ops
