// Packing: the real positions of a padded batch as the rows of one matrix, so that the
// position-wise work of a Transformer (projections, feed-forward block, norms) skips the padding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tapestry/core/tape.h"

namespace tapestry::nn {

// A batch of B rows padded to L positions, row r's first lengths[r] real. Packed row i is padded
// position rows[i] = r*L + j, in row-major order; slots maps each padded position to the packed
// row it reads when unpacked: its own at real positions, and at padding the first real position
// of the same batch row (packed row 0 if that has none). Padding only needs finite values there:
// the attention masks it as a key, and its query rows are dropped again by pack.
struct Packing {
  int64_t b = 0, l = 0;
  std::vector<int32_t> rows;   // N
  std::vector<int32_t> slots;  // B*L
  int64_t n() const { return static_cast<int64_t>(rows.size()); }
  // Lengths past L count as L. Keeps the lists' capacity: no heap allocation once they have grown.
  void assign(std::span<const int64_t> lengths, int64_t length);
  // (B,L) in `dtype`: 1 at the real positions, 0 at the padding (the key mask attention needs).
  Tensor valid(DType dtype) const;
};

// y = x[rows]:  x (B,L,w) -> (N,w);  dx[rows] += dy, 0 at padding
Var pack(const Var& x, const Packing& p);
// y = x[slots]:  x (N,w) -> (B,L,w), padding a copy of a real row;  dx[slots] += dy
Var unpack(const Var& x, const Packing& p);

}  // namespace tapestry::nn
