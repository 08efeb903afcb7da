// TransformerModel: embeddings with positions, the encoder and decoder stacks, the output layer;
// the training loss and the cached decoding step.
#include "tapestry/models/transformer.h"

#include <fmt/format.h>

#include <cmath>

#include "tapestry/core/scratch.h"
#include "tapestry/nn/init.h"
#include "tapestry/ops/ops.h"

namespace tapestry::models {

namespace {

const Seq2SeqConfig& checked(const Seq2SeqConfig& c) {
  c.validate();
  if (!c.transformer()) throw ValueError("transformer: the config's arch is not transformer");
  return c;
}

// (B,S) 1 at each row's first `lengths[r]` positions, 0 after.
Tensor length_mask(std::span<const int64_t> lengths, int64_t b, int64_t s, DType dtype) {
  Tensor valid = Tensor::zeros({b, s}, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = valid.data<T>();
    for (int64_t r = 0; r < b; ++r)
      for (int64_t j = 0; j < std::min(lengths[r], s); ++j) p[r * s + j] = T(1);
  });
  return valid;
}

}  // namespace

TransformerModel::Generator::Generator(int64_t d, int64_t v, bool own_weight, Rng& rng,
                                       DType dtype) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(d));
  if (own_weight) {
    Tensor w = Tensor::empty({v, d}, dtype);
    nn::init::uniform(w, -bound, bound, rng);
    weight = &add_parameter("weight", w);
  }
  Tensor b = Tensor::empty({v}, dtype);
  nn::init::uniform(b, -bound, bound, rng);
  bias = &add_parameter("bias", b);
}

TransformerModel::TransformerModel(const Seq2SeqConfig& config, Rng& rng, DType dtype)
    : config_(checked(config)),
      dtype_(dtype),
      src_emb_(config.src_vocab, config.d_model, rng, -1, dtype),
      tgt_emb_(config.tgt_vocab, config.d_model, rng, -1, dtype),
      encoder_(config.layer_config(), config.enc_layers, rng, dtype),
      decoder_(config.layer_config(), config.dec_layers, rng, dtype),
      stacks_(encoder_, decoder_),
      generator_(config.d_model, config.tgt_vocab, !config.share_embeddings, rng, dtype) {
  add_module("src_emb", src_emb_);
  add_module("tgt_emb", tgt_emb_);
  if (config_.positions == Positions::learned) {
    src_pos_ =
        std::make_unique<nn::Embedding>(config_.max_positions, config_.d_model, rng, -1, dtype);
    tgt_pos_ =
        std::make_unique<nn::Embedding>(config_.max_positions, config_.d_model, rng, -1, dtype);
    add_module("src_pos", *src_pos_);
    add_module("tgt_pos", *tgt_pos_);
  }
  add_module("transformer", stacks_);
  add_module("generator", generator_);
  for (nn::Parameter* p : parameters())
    if (p->value.ndim() > 1) nn::init::xavier_uniform(p->value, rng);
  if (config_.positions == Positions::sinusoidal)
    sinusoids_ = nn::sinusoidal_positions(0, kCachedPositions, config_.d_model, dtype_);
}

// ---------------------------------------------------------------------------------------------
// embedding:  x = dropout(E[ids] sqrt(d) + P[start .. start+L])
//   ids (B,L) -> (B,L,d); with a packing of the batch, only its N real positions -> (N,d)
Var TransformerModel::embed(Tape& tape, bool target, std::span<const int32_t> ids, int64_t b,
                            int64_t l, int64_t start, Rng& rng, const nn::Packing* packing) {
  const int64_t vocab = target ? config_.tgt_vocab : config_.src_vocab;
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      throw IndexError(fmt::format("transformer: {} id {} outside the vocabulary [0, {})",
                                   target ? "target" : "source", id, vocab));
  if (start + l > config_.position_limit())
    throw ValueError(
        fmt::format("transformer: a {} of {} positions is longer than the {} learned positions",
                    target ? "target" : "source", start + l, config_.max_positions));
  nn::Embedding& table = target ? tgt_emb_ : src_emb_;
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  if (!packing) {
    const Var e = ops::scale(table.forward(tape, ids, Shape{b, l}), scale);
    return ops::dropout(e + positions(tape, target, start, l, {}), config_.dropout, rng,
                        training());  // (B,L,d) + (L,d)
  }
  if (static_cast<int64_t>(ids.size()) != b * l || packing->b != b || packing->l != l)
    throw ShapeError(
        fmt::format("transformer: {} ids for (B,L) = ({},{}) and a packing of ({},{}) do not fit",
                    ids.size(), b, l, packing->b, packing->l));
  // (An empty list of offsets would ask positions() for all L rows.)
  if (packing->n() == 0)
    throw ValueError(fmt::format("transformer: the {} packing of ({},{}) has no real positions",
                                 target ? "target" : "source", b, l));
  // Only the real positions: ids and positions of the packed rows, (N,d) + (N,d).
  std::vector<int32_t>& real = scratch_list<int32_t, struct TransformerPackedIds>();
  std::vector<int32_t>& offsets = scratch_list<int32_t, struct TransformerPackedOffsets>();
  for (int32_t r : packing->rows) {
    real.push_back(ids[static_cast<size_t>(r)]);
    offsets.push_back(static_cast<int32_t>(r % l));
  }
  const Var e = ops::scale(table.forward(tape, real, Shape{packing->n()}), scale);
  return ops::dropout(e + positions(tape, target, start, l, offsets), config_.dropout, rng,
                      training());
}

// P[start + j] for each j of `offsets` -> (N,d), or for j = 0 .. L-1 when it is empty -> (L,d)
Var TransformerModel::positions(Tape& tape, bool target, int64_t start, int64_t l,
                                std::span<const int32_t> offsets) {
  if (config_.positions == Positions::sinusoidal) {
    // Row p of the cached table is position p; later positions are computed for this call, from
    // start on. The same values either way.
    const bool cached = start + l <= kCachedPositions;
    const Tensor table =
        cached ? sinusoids_ : nn::sinusoidal_positions(start, l, config_.d_model, dtype_);
    const int64_t first = cached ? start : 0;
    if (offsets.empty()) return Var(table.rows(first, l));
    std::vector<int32_t>& rows = scratch_list<int32_t, struct TransformerSinusoidRows>();
    for (int32_t j : offsets) rows.push_back(static_cast<int32_t>(first + j));
    return ops::gather(Var(table), rows);
  }
  std::vector<int32_t>& pos = scratch_list<int32_t, struct TransformerPositions>();
  if (offsets.empty())
    for (int64_t j = 0; j < l; ++j) pos.push_back(static_cast<int32_t>(start + j));
  else
    for (int32_t j : offsets) pos.push_back(static_cast<int32_t>(start + j));
  const auto n = static_cast<int64_t>(pos.size());
  return (target ? *tgt_pos_ : *src_pos_).forward(tape, pos, Shape{n});
}

TransformerModel::Memory TransformerModel::encode(Tape& tape, const Batch& batch, Rng& rng,
                                                  Weights* weights) {
  const int64_t b = batch.size, s = batch.src_len;
  Memory m;
  m.valid = length_mask(batch.src_lengths, b, s, dtype_);
  Region region(tape, "encoder");
  const Var x = embed(tape, false, batch.src, b, s, 0, rng);
  m.states = encoder_.forward(tape, x, m.valid, rng, weights ? &weights->encoder : nullptr);
  return m;
}

Var TransformerModel::decode(Tape& tape, const Memory& memory, const Batch& batch, Rng& rng,
                             Weights* weights) {
  const int64_t b = batch.size, t = batch.tgt_len;
  Region region(tape, "decoder");
  const Tensor valid = length_mask(batch.tgt_lengths, b, t, dtype_);
  const Var y = embed(tape, true, batch.tgt_in, b, t, 0, rng);
  return decoder_.forward(tape, y, memory.states, valid, memory.valid, rng,
                          weights ? &weights->decoder : nullptr);
}

// logits = x W^T + b, W the generator's weight or the target embedding
Var TransformerModel::logits(Tape& tape, const Var& features) {
  nn::Parameter& w = generator_.weight ? *generator_.weight : tgt_emb_.weight();
  return ops::affine(features, w.var(tape), generator_.bias->var(tape), tape.weight_packs());
}

Var TransformerModel::loss(Tape& tape, const Batch& batch, Rng& rng, double label_smoothing) {
  const int64_t b = batch.size, s = batch.src_len, t = batch.tgt_len;
  // Per thread (training splits a batch over threads that share the model), and kept from call
  // to call so that their lists keep their capacity.
  thread_local nn::Packing src_packing, tgt_packing;
  src_packing.assign(batch.src_lengths, s);
  tgt_packing.assign(batch.tgt_lengths, t);
  // Only the real target tokens are projected: their packed rows of the decoder's output.
  std::vector<int32_t>& rows = scratch_list<int32_t, struct TransformerLossRows>();
  std::vector<int32_t>& targets = scratch_list<int32_t, struct TransformerLossTargets>();
  for (int64_t i = 0; i < b * t; ++i)
    if (batch.tgt_out[i] != Vocab::kPad) {
      if (i % t >= batch.tgt_lengths[static_cast<size_t>(i / t)])
        throw ValueError(fmt::format(
            "transformer: target token at row {}, position {} lies past the row's length {}", i / t,
            i % t, batch.tgt_lengths[static_cast<size_t>(i / t)]));
      rows.push_back(tgt_packing.slots[static_cast<size_t>(i)]);
      targets.push_back(batch.tgt_out[i]);
    }
  // No key masks: on packed rows the attention masks each packing's padding itself.
  Var memory, h;  // (Ns,d), (Nt,d)
  {
    Region region(tape, "encoder");
    const Var x = embed(tape, false, batch.src, b, s, 0, rng, &src_packing);  // (Ns,d)
    memory = encoder_.forward(tape, x, Tensor(), rng, nullptr, &src_packing);
  }
  {
    Region region(tape, "decoder");
    const Var y = embed(tape, true, batch.tgt_in, b, t, 0, rng, &tgt_packing);  // (Nt,d)
    h = decoder_.forward(tape, y, memory, Tensor(), Tensor(), rng, nullptr, &tgt_packing,
                         &src_packing);
  }
  // Usually every packed row, in order (rows increase): then h (N,d) is used as it is.
  const bool all_rows = static_cast<int64_t>(rows.size()) == tgt_packing.n();
  Var z;
  {
    Region region(tape, "output");
    z = logits(tape, all_rows ? h : ops::gather(h, rows));  // (N,V)
  }
  Region region(tape, "loss");
  return ops::cross_entropy(z, targets, Vocab::kPad, label_smoothing);
}

// ---------------------------------------------------------------------------------------------
// decoding

TransformerModel::DecodeState TransformerModel::start(Tape& tape, const Batch& batch,
                                                      std::span<const int32_t> rows,
                                                      int64_t capacity) {
  DecodeState st;
  start(tape, batch, rows, capacity, st);
  return st;
}

void TransformerModel::start(Tape& tape, const Batch& batch, std::span<const int32_t> rows,
                             int64_t capacity, DecodeState& st) {
  Rng unused(0);  // eval mode: no dropout draws
  st.memory = encode(tape, batch, unused);
  if (!rows.empty()) {
    st.memory.states = ops::gather(st.memory.states, rows);
    st.memory.valid = ops::gather(Var(st.memory.valid), rows).value();
  }
  decoder_.start(tape, st.memory.states, st.memory.valid,
                 std::min(capacity, config_.position_limit()), st.caches);
  st.t = 0;
}

Var TransformerModel::step(Tape& tape, DecodeState& state, std::span<const int32_t> y_prev,
                           std::vector<nn::TransformerDecoderLayer::Weights>* weights) {
  Rng unused(0);
  const auto b = static_cast<int64_t>(y_prev.size());
  const Var x =
      ops::reshape(embed(tape, true, y_prev, b, 1, state.t, unused), {b, config_.d_model});
  ++state.t;
  return decoder_.step(tape, x, state.caches, weights);
}

void TransformerModel::select_rows(DecodeState& state, std::span<const int32_t> rows) {
  state.caches.select_rows(rows);
}

}  // namespace tapestry::models
