// Embedding: a gather whose backward skips the padding row.
#include "tapestry/nn/embedding.h"

#include <fmt/format.h>

#include "tapestry/nn/init.h"
#include "tapestry/ops/index.h"

namespace tapestry::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Rng& rng, int32_t padding_idx,
                     DType dtype)
    : padding_idx_(padding_idx) {
  if (padding_idx >= num_embeddings)
    throw ValueError(
        fmt::format("embedding: padding index {} is not below the number of embeddings {}",
                    padding_idx, num_embeddings));
  Tensor w = Tensor::empty({num_embeddings, dim}, dtype);
  init::normal(w, 0.0, 1.0, rng);
  if (padding_idx >= 0) w.rows(padding_idx, 1).zero();
  weight_ = &add_parameter("weight", w);
}

Var Embedding::forward(Tape& tape, std::span<const int32_t> ids, const Shape& shape) {
  return ops::gather(weight_->var(tape), ids, shape, padding_idx_);
}

}  // namespace tapestry::nn
