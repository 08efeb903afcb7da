// MultiheadAttention: scaled dot-product attention over h heads, as torch.nn.MultiheadAttention
// (batch_first), with key-padding and causal masks, per-head weights, and a key/value cache for
// decoding one position at a time.
#pragma once

#include <array>
#include <span>

#include "tapestry/core/random.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/module.h"
#include "tapestry/nn/packing.h"
#include "tapestry/ops/scaled_dot_attention.h"

namespace tapestry::nn {

// Keys and values kept across decoding steps, already split into heads: (B*h, capacity, dk) each.
// A self-attention cache grows by one position per step; a cross-attention cache holds the
// encoder memory's keys and values, projected once, with the memory's padding in `valid`.
struct KVCache {
  Tensor k, v;         // (B*h, capacity, dk), positions [0, length) filled
  Tensor valid;        // (B, capacity): 1 at real positions (undefined: every filled one is real)
  int64_t length = 0;  // positions filled
  int64_t heads = 0;
  // Keeps rows `rows` of the batch (beam search's parents), in that order: row i of the result is
  // row rows[i] of the cache, its h heads and every filled position.
  void select_rows(std::span<const int32_t> rows);
};

// Masks for attention over (B,T,S) scores, as the `valid` tensor ops::softmax takes (1 where the
// query may attend, 0 where not), in the scores' per-head layout (B,1,T,S) or (B,1,1,S):
//   key_valid (B,S), 1 at real keys (undefined: all real); causal: query t sees keys j <= t.
// Returns an undefined tensor when nothing is masked.
Tensor attention_valid(const Tensor& key_valid, int64_t b, int64_t t, int64_t s, bool causal,
                       DType dtype);

// How forward() and self_attention() record the attention between the projections:
//   steps  op by op (scale, matmul, softmax, dropout, matmul, the reshapes and permutes that split
//          and merge the heads), so that Output's weights and parts carry gradients: what
//          `tapestry explain`, the gradient checks and the PyTorch comparisons read;
//   fused  one ops::scaled_dot_attention over every head: the same bits, some twenty fewer nodes
//          a call, and the heads read in place; Output's weights hold values only, parts are
//          left undefined. The Transformer layers take it unless asked for the weights.
enum class AttentionPath { steps, fused };

class MultiheadAttention : public Module {
 public:
  // d = embed_dim, split into `heads` heads of dk = d / h (ValueError unless h divides d).
  // packed: one in_proj_weight (3d,d) as PyTorch holds it when keys and values have the query's
  // size; otherwise q_proj_weight, k_proj_weight and v_proj_weight (d,d). Either way in_proj_bias
  // (3d) and out_proj (Linear d -> d). Initialised as PyTorch does: projections Xavier-uniform,
  // in_proj_bias and out_proj.bias zero, out_proj.weight U(-1/sqrt(d), 1/sqrt(d)).
  MultiheadAttention(int64_t d, int64_t heads, double dropout, Rng& rng, DType dtype = DType::f32,
                     bool packed = true);

  // The inner values of forward() and self_attention(), each head a block of the first dimension
  // (row r's head i at r*h + i): what `tapestry explain` reads values and gradients from (a tape
  // that keeps gradients gives dL/dx for each through tape.grad). Left undefined by step().
  struct Parts {
    Var q, k, v;  // (B*h,T,dk), (B*h,S,dk), (B*h,S,dk): projected and split into heads
    Var scores;   // (B*h,T,S): q k^T / sqrt(dk), before the mask
    Var context;  // (B*h,T,dk): the weights (after dropout) times v, before the heads merge
  };
  struct Output {
    Var y;        // (B,T,d)
    Var weights;  // (B,h,T,S): each head's weights (before dropout), 0 at masked keys
    Parts parts;
  };
  // y = concat_h(softmax(q_h k_h^T / sqrt(dk) | mask) v_h) W_o^T + b_o, with q = query W_q^T + b_q,
  // k = key W_k^T + b_k, v = value W_v^T + b_v.
  //   query (B,T,d), key and value (B,S,d) -> y (B,T,d)
  // key_valid (B,S) in the dtype (1 real, 0 padding; undefined: all real). causal: query t sees
  // keys j <= t. Dropout (training mode) on the weights, drawn from `rng`. Throws ShapeError
  // naming every shape unless they fit.
  // Packed rows (the fused path only): with q_packing and kv_packing, query is (Nq,d), the real
  // positions of q_packing's (B,T) batch, key and value (Nk,d) of kv_packing's (B,S), and y is
  // (Nq,d); the projections skip the padding, the attention between them runs on (B,T,S) with
  // kv_packing's padding masked (key_valid may mask more).
  Output forward(Tape& tape, const Var& query, const Var& key, const Var& value,
                 const Tensor& key_valid, bool causal, Rng& rng,
                 AttentionPath path = AttentionPath::steps, const Packing* q_packing = nullptr,
                 const Packing* kv_packing = nullptr);
  // forward(x, x, x, ...): one product for q, k and v together; x (N,d) with a packing.
  Output self_attention(Tape& tape, const Var& x, const Tensor& valid, bool causal, Rng& rng,
                        AttentionPath path = AttentionPath::steps,
                        const Packing* packing = nullptr);

  // ---- decoding, one position at a time (no gradient: call under NoGrad)
  // An empty self-attention cache for b rows and up to `capacity` positions.
  KVCache empty_cache(int64_t b, int64_t capacity) const;
  // The keys and values of `memory` (B,S,d) with its padding (B,S), for cross-attention.
  KVCache memory_cache(Tape& tape, const Var& memory, const Tensor& valid);
  // One new query position x (B,d). self: x's key and value are appended to the cache first, and x
  // attends to every position so far (causal by construction); otherwise x attends to the
  // memory in the cache. Returns y (B,d) and the weights (B,h,L) over the cache's L positions.
  Output step(Tape& tape, const Var& x, KVCache& cache, bool self);

  int64_t d_model() const { return d_; }
  int64_t heads() const { return heads_; }
  double dropout() const { return dropout_; }
  bool packed() const { return packed_; }
  Linear& out_proj() { return out_proj_; }

 private:
  // The rows [part*d, part*d + d) of the packed projection (part 0 q, 1 k, 2 v), or the separate
  // weight; and the bias's part.
  Var weight(Tape& tape, int part, int parts = 1);
  Var bias(Tape& tape, int part, int parts = 1);
  // x (...,d) -> the parts' projections (...,parts*d): x W^T + b with those rows, read through the
  // tape's pack of the packed in-projection where there is one.
  Var project(Tape& tape, const Var& x, int part, int parts = 1);
  // (B,L,n*d) -> n <= 3 tensors (B*h,L,dk), one copy for all of them (a fixed array: no heap
  // allocation in a training step).
  std::array<Var, 3> split_heads(const Var& x, int n) const;
  // forward() and self_attention() on packed rows; self: query, key and value are one input, and
  // one product makes q, k and v.
  Output forward_packed(Tape& tape, const Var& query, const Var& key, const Var& value,
                        const Tensor& key_valid, bool causal, Rng& rng, AttentionPath path,
                        const Packing* q_packing, const Packing* kv_packing, bool self);
  Output attend(Tape& tape, const Var& q, const Var& k, const Var& v, int64_t b, int64_t t,
                int64_t s, const Tensor& key_valid, bool causal, Rng& rng);
  // The fused path from the projections on: q (B,T,*), k and v (B,S,*) with their heads from
  // columns `cols`; with q_packing, the merged heads are packed to (Nq,d) before out_proj.
  Output attend_fused(Tape& tape, const Var& q, const Var& k, const Var& v, ops::HeadColumns cols,
                      const Tensor& key_valid, bool causal, Rng& rng,
                      const Packing* q_packing = nullptr);

  int64_t d_, heads_, dk_;
  double dropout_;
  bool packed_;
  Parameter* in_proj_weight_ = nullptr;
  Parameter* q_proj_weight_ = nullptr;
  Parameter* k_proj_weight_ = nullptr;
  Parameter* v_proj_weight_ = nullptr;
  Parameter* in_proj_bias_ = nullptr;
  Linear out_proj_;
};

}  // namespace tapestry::nn
