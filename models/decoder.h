// Decoders with attention: Bahdanau-style (attend with s_{t-1}, context into the RNN) and
// Luong-style (attend with h_t, attentional vector h~_t = tanh(W_c [c_t; h_t]), input feeding).
#pragma once

#include <memory>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/core/small_vec.h"
#include "tapestry/models/config.h"
#include "tapestry/nn/attention.h"
#include "tapestry/nn/embedding.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/rnn.h"

namespace tapestry::models {

struct DecoderState {
  SmallVec<nn::RecurrentState, 8> layers;  // (B,H) per layer (h, and c for an LSTM)
  Var feed;                                // Luong's input feeding: h~_{t-1} (B,H)
  // The first cell's W_ih split at E (nn::Cell::weight_head and weight_tail), made at the first
  // step decoded (no teacher inputs, nothing recorded): each such step then computes
  // gx = (e W_head^T + b_ih) + r W_tail^T, the arithmetic of teacher forcing, so a decoded step is
  // the step training computed (to the bit where the products read weight packs, whose rows do
  // not depend on the rows beside them). A recorded step without teacher inputs (explain's
  // graph) keeps the one product of [e; r], the textbook form.
  Var w_head, w_tail;
};

// Under full teacher forcing every step's input token is known before the first step, so the
// embeddings, their dropout and their part of the first cell's input projection are computed
// once for all steps (Decoder::teacher_inputs) and each step reads its slice.
struct TeacherInputs {
  Var e;     // (T,B,E): the embedded previous tokens, step-major, after dropout
  Var head;  // (T,B,G*H): e W_ih[:, :E]^T + b_ih of the first cell
  Var tail;  // (G*H, in-E): the rest of the first cell's W_ih
};

struct DecoderStep {
  Var features;  // (B,F): what the output layer reads
  Var weights;   // (B,S): this step's attention weights (undefined for `none`)
};

// Bahdanau:  a_t = attend(s_{t-1}),  s_t = RNN([E y_{t-1}; c_t], s_{t-1}),
//            features = [s_t; c_t; E y_{t-1}] (deep output) or s_t
// Luong:     h_t = RNN([E y_{t-1}; h~_{t-1}], h_{t-1}),  a_t = attend(h_t),
//            h~_t = tanh(W_c [c_t; h_t]),  features = h~_t
// Both start from s_0 = tanh(W_b summary + b_b) in every layer (LSTM cells from c_0 = 0).
// Parameters: embedding, bridge, attention, cells.<l>, (Luong) combine, out.
class Decoder : public nn::Module {
 public:
  Decoder(const Seq2SeqConfig& config, Rng& rng, DType dtype);

  DecoderState start(Tape& tape, const Var& summary);
  // One step from the previous target tokens y_prev (B ids) at target position t.
  // With `teacher` (from teacher_inputs over the same targets), the embedding of y_prev and its
  // projection are read from it instead of computed: the same step, with fewer, larger products.
  DecoderStep step(Tape& tape, const nn::AttentionMemory& memory, DecoderState& state,
                   std::span<const int32_t> y_prev, int64_t t, Rng& dropout_rng,
                   const TeacherInputs* teacher = nullptr);
  // tgt_in (B,T) row-major: the previous token at every step.
  TeacherInputs teacher_inputs(Tape& tape, std::span<const int32_t> tgt_in, int64_t b,
                               int64_t steps, Rng& dropout_rng);
  // The output layer: (N,F) -> (N,V), or (B,T,F) -> (B,T,V).
  Var logits(Tape& tape, const Var& features, Rng& dropout_rng);

  int64_t feature_size() const;
  nn::Attention& attention() { return *attention_; }
  nn::Embedding& embedding() { return embedding_; }

 private:
  Seq2SeqConfig config_;
  nn::Embedding embedding_;
  nn::Linear bridge_;
  std::unique_ptr<nn::Attention> attention_;
  std::vector<std::unique_ptr<nn::Cell>> cells_;
  std::unique_ptr<nn::Linear> combine_;  // Luong's W_c
  nn::Linear out_;
};

}  // namespace tapestry::models
