// Encoder: embedding, dropout and the recurrent layer; the summary from its final states.
#include "tapestry/models/encoder.h"

#include "tapestry/ops/ops.h"

namespace tapestry::models {

Encoder::Encoder(const Seq2SeqConfig& config, Rng& rng, DType dtype)
    : config_(config),
      embedding_(config.src_vocab, config.emb, rng, Vocab::kPad, dtype),
      rnn_(config.cell, config.emb, config.hidden, config.layers, config.bidirectional, rng, dtype,
           config.dropout) {
  add_module("embedding", embedding_);
  add_module("rnn", rnn_);
}

Encoder::Output Encoder::forward(Tape& tape, std::span<const int32_t> src, int64_t batch,
                                 int64_t src_len, std::span<const int64_t> lengths,
                                 Rng& dropout_rng) {
  Region region(tape, "encoder");
  Var x = embedding_.forward(tape, src, Shape{batch, src_len});  // (B,S,E)
  x = ops::dropout(x, config_.dropout, dropout_rng, training());
  nn::RNN::Output o = rnn_.forward(tape, x, lengths, Var(), Var(), &dropout_rng);
  // h_n is (L*D,B,H), layer-major: the top layer's directions are its last D entries.
  const int64_t d = rnn_.directions();
  const int64_t top = static_cast<int64_t>(config_.layers - 1) * d;
  Var finals[2];
  for (int64_t k = 0; k < d; ++k)
    finals[k] = ops::reshape(ops::slice(o.h_n, 0, top + k, 1), Shape{batch, config_.hidden});
  Var summary =
      d == 1 ? finals[0] : ops::concat(std::span<const Var>(finals, static_cast<size_t>(d)), 1);
  return {o.y, summary};
}

}  // namespace tapestry::models
