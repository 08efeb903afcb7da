// Attention, every classic variant behind one interface: from a query (the decoder state), the
// encoder states and the source mask, the weights a (B,S) and the context c = sum_j a_j h_j.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/core/small_vec.h"
#include "tapestry/nn/module.h"

namespace tapestry::nn {

enum class AttentionKind {
  none,
  bahdanau,
  dot,
  general,
  concat,
  scaled_dot,
  cosine,
  local_m,
  local_p
};

const char* attention_name(AttentionKind kind);        // "bahdanau", "scaled-dot", "local-m", ...
AttentionKind parse_attention(std::string_view name);  // throws ValueError listing the valid names
const std::vector<AttentionKind>& all_attention_kinds();
// True for the variants whose weights sum to 1 over the real source positions (all but none and
// the local ones, whose Gaussian makes the sum at most 1).
bool weights_sum_to_one(AttentionKind kind);

struct AttentionConfig {
  AttentionKind kind = AttentionKind::bahdanau;
  int64_t query_size = 0;  // Hq: the decoder state's size
  int64_t key_size = 0;    // K: the encoder states' size (2H for a bidirectional encoder)
  int64_t attn_size = 0;   // A: the hidden size of the additive, concat and local-p layers (0: Hq)
  int64_t window = 2;      // D: the half width of the local variants' window
  // The scores and the weighted sum as fused kernels (ops/attention_ops.h); false composes them
  // from elementary ops (matmul, add, tanh, reshape), which `tapestry explain` shows one by one.
  // Both give the same values and gradients (tested).
  bool fused = true;
};

// What does not depend on the query, computed once per batch by prepare().
struct AttentionMemory {
  Var keys;                        // (B,S,K) the encoder states h_j ("annotations")
  Tensor valid;                    // (B,S) 1 at real source positions, 0 at padding
  SmallVec<int64_t, 256> lengths;  // B real lengths (inline for batches up to 256 rows)
  Var summary;                     // (B,K) the encoder's final state (the context of `none`)
  Var precomputed;                 // per variant: U h_j (B,S,A) for bahdanau and concat, the key
                                   // norms |h_j| (B,S) for cosine; undefined for the others
};

// The memory of the given batch rows, in that order (beam search runs k rows per sentence).
// Throws IndexError for a row outside [0, B).
AttentionMemory select_rows(const AttentionMemory& memory, std::span<const int32_t> rows);

struct AttentionResult {
  Var weights;  // (B,S): exactly 0 at padding; undefined for `none`
  Var context;  // (B,K)
};

// Scores e_j, from which a = softmax(e) over the real positions:
//   none        no weights; the context is the encoder's final state at every step
//   bahdanau    e_j = v . tanh(W s + b + U h_j)          (Bahdanau et al. 2015, additive)
//   dot         e_j = s . h_j                            (Luong et al. 2015; needs Hq = K)
//   general     e_j = s^T W h_j                          (Luong)
//   concat      e_j = v . tanh(W [s; h_j])               (Luong; W's columns split into s and h)
//   scaled-dot  e_j = s . h_j / sqrt(K)                  (Vaswani et al. 2017; needs Hq = K)
//   cosine      e_j = beta cos(s, h_j), beta learned     (Graves et al. 2014); needs Hq = K
//   local-m     general scores inside the window |j - p_t| <= D, p_t = min(t, S_b - 1)
//   local-p     the same around p_t = (S_b - 1) sigmoid(v_p . tanh(W_p s)), predicted
//               For both local variants a_j = softmax(e)_j exp(-(j - p_t)^2 / (2 (D/2)^2)), as in
//               Luong et al., so their weights sum to at most 1.
// Parameters are named as in these equations: W, b, U, v, beta, W_p, v_p.
class Attention : public Module {
 public:
  // Throws ValueError for sizes that do not fit the variant (dot with Hq != K, ...).
  static std::unique_ptr<Attention> make(const AttentionConfig& config, Rng& rng,
                                         DType dtype = DType::f32);

  // Once per batch: keys (B,S,K), the B real lengths, summary (B,K). Throws ShapeError naming every
  // shape when they disagree, ValueError for a length outside [0, S].
  AttentionMemory prepare(Tape& tape, const Var& keys, std::span<const int64_t> lengths,
                          const Var& summary);
  // One decoder step: query (B,Hq); `step` is the target position t (local-m centres on it).
  // Records its work under the regions "attention.scores", "attention.softmax" and
  // "attention.context". Throws ShapeError naming the shapes if the query does not fit.
  AttentionResult attend(Tape& tape, const AttentionMemory& memory, const Var& query, int64_t step);

  AttentionKind kind() const { return config_.kind; }
  const AttentionConfig& config() const { return config_; }

 protected:
  explicit Attention(const AttentionConfig& config) : config_(config) {}
  // What the variant computes from the keys alone, once per batch (AttentionMemory::precomputed).
  virtual Var precompute(Tape&, const Var&) { return Var(); }
  // The step's weights a (B,S) from the query.
  virtual Var weights(Tape& tape, const AttentionMemory& memory, const Var& query,
                      int64_t step) = 0;
  // A parameter drawn from U(-bound, bound).
  Parameter& param(const char* name, const Shape& shape, double bound, Rng& rng, DType dtype);

  AttentionConfig config_;
};

}  // namespace tapestry::nn
