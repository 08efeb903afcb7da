// Decoders: one step of either style, the bridge from the encoder, and the output layer.
#include "tapestry/models/decoder.h"

#include <fmt/format.h>

#include "tapestry/core/scratch.h"
#include "tapestry/models/vocab.h"
#include "tapestry/ops/ops.h"

namespace tapestry::models {

namespace {
int64_t features_of(const Seq2SeqConfig& c) {
  if (c.decoder == DecoderKind::luong || !c.deep_output) return c.hidden;
  return c.hidden + c.key_size() + c.emb;
}

int64_t cell_input(const Seq2SeqConfig& c, int layer) {
  if (layer > 0) return c.hidden;
  return c.emb + (c.decoder == DecoderKind::bahdanau ? c.key_size() : c.hidden);
}

nn::AttentionConfig attention_config(const Seq2SeqConfig& c) {
  return {c.attention, c.hidden,         c.key_size(), c.attn_size > 0 ? c.attn_size : c.hidden,
          c.window,    c.fused_attention};
}
}  // namespace

Decoder::Decoder(const Seq2SeqConfig& config, Rng& rng, DType dtype)
    : config_(config),
      embedding_(config.tgt_vocab, config.emb, rng, Vocab::kPad, dtype),
      bridge_(config.key_size(), config.hidden * config.layers, true, rng, dtype),
      attention_(nn::Attention::make(attention_config(config), rng, dtype)),
      out_(features_of(config), config.tgt_vocab, true, rng, dtype) {
  add_module("embedding", embedding_);
  add_module("bridge", bridge_);
  add_module("attention", *attention_);
  for (int l = 0; l < config.layers; ++l)
    cells_.push_back(
        std::make_unique<nn::Cell>(config.cell, cell_input(config, l), config.hidden, rng, dtype));
  for (int l = 0; l < config.layers; ++l)
    add_module(fmt::format("cells.{}", l), *cells_[static_cast<size_t>(l)]);
  if (config.decoder == DecoderKind::luong) {
    combine_ = std::make_unique<nn::Linear>(config.key_size() + config.hidden, config.hidden, false,
                                            rng, dtype);
    add_module("combine", *combine_);
  }
  add_module("out", out_);
}

int64_t Decoder::feature_size() const {
  return features_of(config_);
}

DecoderState Decoder::start(Tape& tape, const Var& summary) {
  Region region(tape, "decoder");
  const int64_t b = summary.dim(0), h = config_.hidden;
  Var s0 = ops::tanh(bridge_.forward(tape, summary));  // (B,K) -> (B,L*H)
  DecoderState state;
  for (int l = 0; l < config_.layers; ++l) {
    nn::RecurrentState s;
    s.h = config_.layers == 1 ? s0 : ops::slice(s0, 1, l * h, h);
    if (config_.cell == nn::CellKind::lstm) s.c = Tensor::zeros({b, h}, summary.dtype());
    state.layers.push_back(s);
  }
  if (config_.decoder == DecoderKind::luong) state.feed = Tensor::zeros({b, h}, summary.dtype());
  return state;
}

TeacherInputs Decoder::teacher_inputs(Tape& tape, std::span<const int32_t> tgt_in, int64_t b,
                                      int64_t steps, Rng& dropout_rng) {
  if (static_cast<int64_t>(tgt_in.size()) != b * steps)
    throw ShapeError(fmt::format("decoder: {} target tokens for a batch of {} x {} steps",
                                 tgt_in.size(), b, steps));
  std::vector<int32_t>& ids = scratch_list<int32_t, struct TeacherIds>();
  ids.resize(static_cast<size_t>(b * steps));
  for (int64_t t = 0; t < steps; ++t)  // step-major, so each step's rows are one slice
    for (int64_t r = 0; r < b; ++r) ids[t * b + r] = tgt_in[r * steps + t];
  TeacherInputs in;
  {
    Region region(tape, "decoder.embedding");
    in.e = embedding_.forward(tape, ids, Shape{steps, b});  // (T,B,E)
    in.e = ops::dropout(in.e, config_.dropout, dropout_rng, training());
  }
  Region region(tape, "decoder.rnn");
  in.head = cells_[0]->project_head(tape, in.e, config_.emb);  // (T,B,G*H)
  in.tail = cells_[0]->weight_tail(tape, config_.emb);
  return in;
}

DecoderStep Decoder::step(Tape& tape, const nn::AttentionMemory& memory, DecoderState& state,
                          std::span<const int32_t> y_prev, int64_t t, Rng& dropout_rng,
                          const TeacherInputs* teacher) {
  const int64_t b = static_cast<int64_t>(y_prev.size());
  auto step_slice = [&](const Var& all) {  // (T,B,X) -> (B,X), a view
    return ops::reshape(ops::slice(all, 0, t, 1), Shape{b, all.dim(2)});
  };
  Var e;
  {
    Region region(tape, "decoder.embedding");
    if (teacher) {
      e = step_slice(teacher->e);
    } else {
      e = embedding_.forward(tape, y_prev, Shape{b});  // (B,E)
      e = ops::dropout(e, config_.dropout, dropout_rng, training());
    }
  }
  // The cells' input is [e; r]: r is the context (Bahdanau) or the fed-back h~ (Luong).
  auto run_cells = [&](const Var& r) {
    Region region(tape, "decoder.rnn");
    Var x;
    for (size_t l = 0; l < cells_.size(); ++l) {
      if (l > 0) {
        x = ops::dropout(x, config_.dropout, dropout_rng, training());
        state.layers[l] = cells_[l]->forward(tape, x, state.layers[l]);
      } else if (teacher) {
        state.layers[0] = cells_[0]->forward_split(tape, step_slice(teacher->head), r,
                                                   teacher->tail, state.layers[0]);
      } else if (!tape.recording()) {  // decoding: the teacher-forced step's arithmetic
        if (!state.w_tail.value().defined()) {
          state.w_head = cells_[0]->weight_head(tape, config_.emb);
          state.w_tail = cells_[0]->weight_tail(tape, config_.emb);
        }
        state.layers[0] = cells_[0]->forward_split(
            tape, cells_[0]->project_head(tape, e, state.w_head), r, state.w_tail, state.layers[0]);
      } else {  // a recorded step without teacher inputs (explain's graph): one product of [e; r]
        state.layers[0] = cells_[0]->forward(tape, ops::concat({e, r}, 1), state.layers[0]);
      }
      x = state.layers[l].h;
    }
    return x;
  };
  DecoderStep out;
  if (config_.decoder == DecoderKind::bahdanau) {
    nn::AttentionResult a = attention_->attend(tape, memory, state.layers.back().h, t);
    Var s = run_cells(a.context);
    out.weights = a.weights;
    Region region(tape, "output");
    out.features = config_.deep_output ? ops::concat({s, a.context, e}, 1) : s;
  } else {
    Var h = run_cells(state.feed);
    nn::AttentionResult a = attention_->attend(tape, memory, h, t);
    Region region(tape, "decoder.combine");
    state.feed = ops::tanh(combine_->forward(tape, ops::concat({a.context, h}, 1)));
    out.weights = a.weights;
    out.features = state.feed;
  }
  return out;
}

Var Decoder::logits(Tape& tape, const Var& features, Rng& dropout_rng) {
  Region region(tape, "output");
  return out_.forward(tape, ops::dropout(features, config_.dropout, dropout_rng, training()));
}

}  // namespace tapestry::models
