// Seq2Seq: encoding a batch and the teacher-forced training loss.
#include "tapestry/models/seq2seq.h"

#include <fmt/format.h>

#include "tapestry/core/scratch.h"
#include "tapestry/ops/ops.h"

namespace tapestry::models {

namespace {
const Seq2SeqConfig& validated(const Seq2SeqConfig& c) {
  c.validate();
  return c;
}
}  // namespace

Seq2Seq::Seq2Seq(const Seq2SeqConfig& config, DType dtype)
    : config_(validated(config)), dtype_(dtype), init_rng_(config.seed), rng_(0) {
  if (config_.transformer()) {
    transformer_ = std::make_unique<TransformerModel>(config_, init_rng_, dtype);
    add_module("", *transformer_);  // its names are the PyTorch model's: src_emb, transformer...
  } else {
    encoder_ = std::make_unique<Encoder>(config_, init_rng_, dtype);
    decoder_ = std::make_unique<Decoder>(config_, init_rng_, dtype);
    add_module("encoder", *encoder_);
    add_module("decoder", *decoder_);
  }
  rng_ = init_rng_.split();
}

Encoder& Seq2Seq::encoder() {
  if (!encoder_) throw ValueError("seq2seq: a transformer has no RNN encoder");
  return *encoder_;
}

Decoder& Seq2Seq::decoder() {
  if (!decoder_) throw ValueError("seq2seq: a transformer has no RNN decoder");
  return *decoder_;
}

TransformerModel& Seq2Seq::transformer() {
  if (!transformer_) throw ValueError("seq2seq: this model is an RNN, not a transformer");
  return *transformer_;
}

nn::AttentionMemory Seq2Seq::encode(Tape& tape, const Batch& batch, Rng* rng) {
  Encoder& enc = encoder();
  for (int32_t id : batch.src)
    if (id < 0 || id >= config_.src_vocab)
      throw IndexError(fmt::format("seq2seq: source id {} outside the vocabulary [0, {})", id,
                                   config_.src_vocab));
  Encoder::Output out =
      enc.forward(tape, batch.src, batch.size, batch.src_len, batch.src_lengths, rng ? *rng : rng_);
  return decoder_->attention().prepare(tape, out.states, batch.src_lengths, out.summary);
}

Var Seq2Seq::loss(Tape& tape, const Batch& batch, double teacher_forcing, Rng* rng_in,
                  double label_smoothing) {
  Rng& rng = rng_in ? *rng_in : rng_;
  if (transformer_) return transformer_->loss(tape, batch, rng, label_smoothing);
  Decoder& dec = decoder();
  const int64_t b = batch.size, steps = batch.tgt_len;
  nn::AttentionMemory memory = encode(tape, batch, &rng);
  DecoderState state = dec.start(tape, memory.summary);
  // Per-thread lists whose capacity survives from step to step (no heap allocation once warm).
  std::vector<int32_t>& y_prev = scratch_list<int32_t, struct LossTokens>();
  y_prev.resize(static_cast<size_t>(b));
  auto gold = [&](int64_t t) {
    for (int64_t r = 0; r < b; ++r) y_prev[r] = batch.tgt_in[r * steps + t];
  };
  std::vector<Var>& features = scratch_list<Var, struct LossFeatures>();
  std::vector<Var>& logits = scratch_list<Var, struct LossLogits>();
  // Full teacher forcing knows every input token now: embed and project them all at once.
  const bool forced = teacher_forcing >= 1.0;
  TeacherInputs teacher;
  if (forced) teacher = dec.teacher_inputs(tape, batch.tgt_in, b, steps, rng);
  for (int64_t t = 0; t < steps; ++t) {
    const bool own = t > 0 && !forced && rng.uniform() >= teacher_forcing;
    if (own) {  // feed the previous step's prediction (argmax; no gradient flows through it)
      const Tensor& z = logits.back().value();
      const int64_t v = z.dim(1);
      for (int64_t r = 0; r < b; ++r) {
        int64_t best = 0;
        for (int64_t j = 1; j < v; ++j)
          if (z.at(r * v + j) > z.at(r * v + best)) best = j;
        y_prev[r] = static_cast<int32_t>(best);
      }
    } else {
      gold(t);
    }
    DecoderStep s = dec.step(tape, memory, state, y_prev, t, rng, forced ? &teacher : nullptr);
    if (!forced)
      logits.push_back(dec.logits(tape, s.features, rng));  // needed for the next input
    else
      features.push_back(s.features);
  }
  if (!forced) {
    Var z;
    {
      Region region(tape, "output");
      z = ops::stack(logits, 1);  // (B,T,V)
      logits.clear();
    }
    Region region(tape, "loss");
    return ops::cross_entropy(ops::reshape(z, Shape{b * steps, config_.tgt_vocab}), batch.tgt_out,
                              Vocab::kPad, label_smoothing);
  }
  // With full teacher forcing, one output product over every real target position at once:
  // (B,T,F) -> the N real rows (N,F) -> (N,V); padded positions are never projected.
  std::vector<int32_t>& rows = scratch_list<int32_t, struct LossRows>();
  std::vector<int32_t>& targets = scratch_list<int32_t, struct LossTargets>();
  for (int64_t i = 0; i < b * steps; ++i)
    if (batch.tgt_out[i] != Vocab::kPad) {
      rows.push_back(static_cast<int32_t>(i));
      targets.push_back(batch.tgt_out[i]);
    }
  Var z;
  {
    Region region(tape, "output");
    Var f = ops::reshape(ops::stack(features, 1), Shape{b * steps, dec.feature_size()});
    features.clear();
    z = dec.logits(tape, ops::gather(f, rows), rng);
  }
  Region region(tape, "loss");
  return ops::cross_entropy(z, targets, Vocab::kPad, label_smoothing);
}

}  // namespace tapestry::models
