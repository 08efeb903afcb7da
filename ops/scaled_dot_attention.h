// Scaled dot-product attention over all heads in one op: what MultiheadAttention composes from
// scale, matmul, softmax, dropout, matmul and the reshapes and permutes that split and merge the
// heads, with the same bits and one node on the tape instead of some twenty.
#pragma once

#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"

namespace tapestry::ops {

// Where each operand's heads start: head j of q is its columns [q + j*dk, q + (j+1)*dk), and so
// on. q, k and v may be one tensor (self-attention's (B,T,3d) projection: columns 0, d and 2d).
struct HeadColumns {
  int64_t q = 0, k = 0, v = 0;
};

// For every row b and head j (c = 1/sqrt(dk)):
//   s = (c q_j) k_j^T (masked);  a = softmax(s);  y_j = dropout(a) v_j;  y = [y_0 .. y_{h-1}]
//   q (B,T,Dq), k (B,S,Dk), v (B,S,Dv), each holding h heads of dk columns from its HeadColumns
//   -> y (B,T,h*dk)
// `valid` (undefined: every key real) is (B,1,R,S) with R = 1 (a key mask) or R = T (a mask per
// query, e.g. causal), 1 at real keys and 0 at masked ones, as nn::attention_valid makes it.
// Dropout (when training and p > 0) draws one stream from `rng`, as ops::dropout does on the
// weights (B*h,T,S). If `weights` is given it receives a (B,h,T,S) before dropout: values only,
// no gradient flows through it, and it is the tensor the op saves for its backward (read it, do
// not write into it). Throws ShapeError naming every shape when they do not fit,
// DTypeError when the dtypes differ, ValueError for a p outside [0, 1).
Var scaled_dot_attention(const Var& q, const Var& k, const Var& v, int64_t heads, int64_t dk,
                         HeadColumns cols, const Tensor& valid, double dropout, Rng& rng,
                         bool training, Tensor* weights = nullptr);

}  // namespace tapestry::ops
