// Indexing and selection ops: gather (embedding lookup), masked_fill and where.
#pragma once

#include <cstdint>
#include <span>

#include "tapestry/core/tape.h"

namespace tapestry::ops {

// Rows of `table` picked by index (an embedding lookup): y[i, ...] = table[indices[i], ...].
//   table (V, ...), indices of shape index_shape -> index_shape + (...), e.g.
//   table (V,E), indices (B,S) -> (B,S,E)
// Throws ShapeError if indices.size() != index_shape.numel() or table is a scalar, and IndexError
// naming the position and the valid range [0, V) for an index outside it. Repeated indices
// accumulate their gradients into the same row. Rows looked up by `no_grad_index` (an embedding's
// padding id; -1 for none) pass no gradient back to the table, as torch.nn.Embedding's padding_idx.
Var gather(const Var& table, std::span<const int32_t> indices, const Shape& index_shape,
           int32_t no_grad_index = -1);
// The same with a 1-D index list: table (V, ...), N indices -> (N, ...).
Var gather(const Var& table, std::span<const int32_t> indices);

// y = mask != 0 ? value : x. The mask (x's dtype) has x's shape or broadcasts to it, e.g. a key
// padding mask (B,1,S) over attention scores (B,T,S); value may be -infinity. Throws ShapeError
// naming both shapes otherwise.
Var masked_fill(const Var& x, const Tensor& mask, double value);

// y = cond != 0 ? a : b. a and b have the same shape; cond (their dtype) has it too or broadcasts
// to it. Throws ShapeError naming every shape otherwise.
Var where(const Tensor& cond, const Var& a, const Var& b);

}  // namespace tapestry::ops
