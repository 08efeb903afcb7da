// Matrix products through BLAS: 2-D, batched 3-D, and 3-D by 2-D, with optional transposes; the
// affine map x W^T + b of a fully connected layer.
#pragma once

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// y = op(a) op(b), where op(m) is m or its transpose (over the last two axes, no copy made).
//   (M,K)   x (K,N)   -> (M,N)
//   (B,M,K) x (B,K,N) -> (B,M,N)
//   (B,M,K) x (K,N)   -> (B,M,N)   (b shared by every batch)
// Throws ShapeError naming both shapes when the inner dimensions or batch sizes differ.
// With `packs`, b must be a weight (a parameter's value) that stays unchanged while they are in
// use: a float32 product a b^T then reads b's pack (core/packed.h) instead of handing b to BLAS,
// and its backward reads the pack of b's transpose for da = dy b (when the tape has the same
// packs). `source` says where b's values live when b is a copy of columns of a weight (a
// decoder cell's W_ih split at the embedding, nn/rnn.h): the packs are then made from that
// weight, which stays alive, rather than from the copy, a temporary.
// For affine, `row0` names a block of the weight's rows (the key and value rows of an attention's
// packed in-projection): whole panels of 16 rows read through the whole weight's pack, other rows
// through BLAS.
struct PackSource {
  const Tensor* weight = nullptr;  // null: b itself
  int64_t col0 = 0;                // b = weight[row0 : row0 + b's rows, col0 : col0 + b's columns]
  int64_t row0 = 0;                // affine only
};
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false,
           WeightPacks* packs = nullptr, PackSource source = {});

// y = x W^T + b, the fully connected layer as one op: x (N,K) or (B,S,K), W (M,K), b (M) or
// undefined (no bias) -> (N,M) or (B,S,M). With `packs`, W is a weight, or a copy of a weight's
// columns that `source` names, as for matmul. Throws ShapeError naming every shape unless they
// fit (and the weight's, for a source whose columns are not W's shape), DTypeError for mixed
// dtypes.
Var affine(const Var& x, const Var& w, const Var& b = Var(), WeightPacks* packs = nullptr,
           PackSource source = {});

}  // namespace tapestry::ops
