// Encoder: source embedding, then a (multi-layer, bidirectional) recurrent layer over the padded
// batch, giving every hidden state h_1..h_S (the annotations) and a summary of the sentence.
#pragma once

#include "tapestry/core/random.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/config.h"
#include "tapestry/nn/embedding.h"
#include "tapestry/nn/rnn.h"

namespace tapestry::models {

class Encoder : public nn::Module {
 public:
  Encoder(const Seq2SeqConfig& config, Rng& rng, DType dtype);

  struct Output {
    Var states;   // (B,S,K): h_j, the top layer's directions concatenated; 0 at padding
    Var summary;  // (B,K): the top layer's final state of each direction, concatenated (for a
                  // bidirectional encoder the backward part is h_1's backward state)
  };
  // src (B,S) ids with their lengths. `dropout_rng` drives dropout in training mode.
  Output forward(Tape& tape, std::span<const int32_t> src, int64_t batch, int64_t src_len,
                 std::span<const int64_t> lengths, Rng& dropout_rng);

  nn::Embedding& embedding() { return embedding_; }
  nn::RNN& rnn() { return rnn_; }

 private:
  Seq2SeqConfig config_;
  nn::Embedding embedding_;
  nn::RNN rnn_;
};

}  // namespace tapestry::models
