// Embedding: rows of a (V,E) table looked up by token id, as torch.nn.Embedding.
#pragma once

#include <span>

#include "tapestry/core/random.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

class Embedding : public Module {
 public:
  // weight ~ N(0, 1) as in PyTorch; the padding row (if padding_idx >= 0) starts at zero and
  // never receives a gradient.
  Embedding(int64_t num_embeddings, int64_t dim, Rng& rng, int32_t padding_idx = -1,
            DType dtype = DType::f32);

  // ids of shape `shape` (e.g. (B,S)) -> shape + (E)
  Var forward(Tape& tape, std::span<const int32_t> ids, const Shape& shape);

  Parameter& weight() { return *weight_; }
  int64_t num_embeddings() const { return weight_->shape()[0]; }
  int64_t dim() const { return weight_->shape()[1]; }
  int32_t padding_idx() const { return padding_idx_; }

 private:
  Parameter* weight_;
  int32_t padding_idx_;
};

}  // namespace tapestry::nn
