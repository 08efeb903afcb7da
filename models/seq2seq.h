// Seq2Seq: a sequence-to-sequence model of either architecture: an RNN encoder, an attention
// network and a decoder, or the Transformer; trained end to end.
#pragma once

#include <memory>

#include "tapestry/models/batch.h"
#include "tapestry/models/config.h"
#include "tapestry/models/decoder.h"
#include "tapestry/models/encoder.h"
#include "tapestry/models/transformer.h"

namespace tapestry::models {

class Seq2Seq : public nn::Module {
 public:
  // Validates the config (ValueError); parameters are drawn from config.seed.
  explicit Seq2Seq(const Seq2SeqConfig& config, DType dtype = DType::f32);

  // (arch rnn) The encoder's states and the attention memory for a batch's sources. Random draws
  // (dropout in training mode) come from `rng` if given, else from rng().
  nn::AttentionMemory encode(Tape& tape, const Batch& batch, Rng* rng = nullptr);

  // Mean cross-entropy over the batch's real target tokens (each row's y_1..y_n and <eos>).
  // With teacher_forcing < 1, each step feeds the gold previous token with that probability and
  // the model's own prediction otherwise (one draw per step for the whole batch). Draws come from
  // `rng` if given (one per thread when batch shards train in parallel), else from rng().
  // The Transformer is always teacher-forced. With label_smoothing eps > 0 the loss is smoothed
  // as torch.nn.functional.cross_entropy's label_smoothing.
  Var loss(Tape& tape, const Batch& batch, double teacher_forcing = 1.0, Rng* rng = nullptr,
           double label_smoothing = 0);

  const Seq2SeqConfig& config() const { return config_; }
  DType dtype() const { return dtype_; }
  bool is_transformer() const { return config_.transformer(); }
  // The parts of each architecture; asking for the other's throws ValueError.
  Encoder& encoder();
  Decoder& decoder();
  TransformerModel& transformer();
  // Drives dropout and teacher forcing; reseed it to replay a run.
  Rng& rng() { return rng_; }

 private:
  Seq2SeqConfig config_;
  DType dtype_;
  Rng init_rng_;
  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<TransformerModel> transformer_;
  Rng rng_;
};

}  // namespace tapestry::models
