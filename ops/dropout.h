// Inverted dropout: random zeroing in training, the identity in evaluation.
#pragma once

#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"

namespace tapestry::ops {

// In training, y = x * m with m_i = (u_i >= p) / (1 - p) for u_i uniform in [0, 1) drawn from
// `rng` (one 64-bit draw per call names a stream; u_i = counter_hash32(stream, i) / 2^32 for the
// i-th element in row-major order), so E[y] = x and the same seed gives the same mask. The hash
// takes the low 32 bits of i: a tensor of 2^32 elements or more would repeat its mask. When
// !training or p == 0, returns x itself (same tensor, nothing recorded). Throws ValueError unless 0
// <= p < 1.
Var dropout(const Var& x, double p, Rng& rng, bool training);

// The keep test of dropout's i-th element under a stream key: kept where counter_hash32(key, i)
// >= dropout_cut(p), i.e. u_i >= p. Ops that drop inside a fused kernel (scaled_dot_attention)
// draw their masks with it, bit for bit as dropout would. Throws ValueError unless 0 <= p < 1.
uint32_t dropout_cut(double p);

}  // namespace tapestry::ops
