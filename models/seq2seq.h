// Seq2Seq: an RNN encoder, an attention network and a decoder, trained end to end.
#pragma once

#include "tapestry/models/batch.h"
#include "tapestry/models/config.h"
#include "tapestry/models/decoder.h"
#include "tapestry/models/encoder.h"

namespace tapestry::models {

class Seq2Seq : public nn::Module {
 public:
  // Validates the config (ValueError); parameters are drawn from config.seed.
  explicit Seq2Seq(const Seq2SeqConfig& config, DType dtype = DType::f32);

  // The encoder's states and the attention memory for a batch's sources. Random draws (dropout in
  // training mode) come from `rng` if given, else from rng().
  nn::AttentionMemory encode(Tape& tape, const Batch& batch, Rng* rng = nullptr);

  // Mean cross-entropy over the batch's real target tokens (each row's y_1..y_n and <eos>).
  // With teacher_forcing < 1, each step feeds the gold previous token with that probability and
  // the model's own prediction otherwise (one draw per step for the whole batch). Draws come from
  // `rng` if given (one per thread when batch shards train in parallel), else from rng().
  Var loss(Tape& tape, const Batch& batch, double teacher_forcing = 1.0, Rng* rng = nullptr);

  const Seq2SeqConfig& config() const { return config_; }
  DType dtype() const { return dtype_; }
  Encoder& encoder() { return encoder_; }
  Decoder& decoder() { return decoder_; }
  // Drives dropout and teacher forcing; reseed it to replay a run.
  Rng& rng() { return rng_; }

 private:
  Seq2SeqConfig config_;
  DType dtype_;
  Rng init_rng_;
  Encoder encoder_;
  Decoder decoder_;
  Rng rng_;
};

}  // namespace tapestry::models
