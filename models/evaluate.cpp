// Evaluation loops: no tape recording, eval mode, results mapped back to input order.
#include "tapestry/models/evaluate.h"

#include <cmath>

#include "tapestry/core/packed.h"
#include "tapestry/ops/ops.h"

namespace tapestry::models {

namespace {
class EvalMode {
 public:
  explicit EvalMode(nn::Module& m) : m_(m), was_(m.training()) { m.eval(); }
  ~EvalMode() { m_.train(was_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  nn::Module& m_;
  bool was_;
};
}  // namespace

LossResult evaluate_loss(Seq2Seq& model, std::span<const EncodedPair> pairs, int64_t batch_size) {
  EvalMode eval(model);
  LossResult r;
  double total = 0;
  WeightPacks packs;  // the model stays as it is for every batch
  for (const auto& rows : make_batches(pairs, batch_size, nullptr)) {
    Batch batch = make_batch(pairs, rows);
    Tape tape;
    NoGrad no_grad(tape);
    tape.set_weight_packs(&packs);
    const int64_t tokens = batch.target_tokens();
    total += model.loss(tape, batch).value().item() * static_cast<double>(tokens);
    r.tokens += tokens;
  }
  r.loss = r.tokens > 0 ? total / static_cast<double>(r.tokens) : 0;
  r.perplexity = std::exp(r.loss);
  return r;
}

std::vector<std::vector<Hypothesis>> translate(Seq2Seq& model, std::span<const EncodedPair> pairs,
                                               int64_t batch_size, const DecodeOptions& options) {
  std::vector<std::vector<Hypothesis>> out(pairs.size());
  // The model stays as it is for the whole corpus: its weights are packed once for all batches.
  WeightPacks packs;
  DecodeWorkspace workspace;
  DecodeOptions o = options;
  if (!o.packs) o.packs = &packs;
  if (!o.workspace) o.workspace = &workspace;
  std::vector<Hypothesis> greedy;
  for (const auto& rows : make_batches(pairs, batch_size, nullptr)) {
    Batch batch = make_batch(pairs, rows);
    if (o.beam == 1) {
      greedy_decode_into(model, batch, o, greedy);
      for (int64_t r = 0; r < batch.size; ++r)
        out[static_cast<size_t>(batch.index[r])] = {greedy[static_cast<size_t>(r)]};
      continue;
    }
    auto hyps = decode(model, batch, o);
    for (int64_t r = 0; r < batch.size; ++r) out[static_cast<size_t>(batch.index[r])] = hyps[r];
  }
  return out;
}

std::vector<std::vector<float>> reference_attention(Seq2Seq& model,
                                                    std::span<const EncodedPair> pairs,
                                                    int64_t batch_size) {
  EvalMode eval(model);
  std::vector<std::vector<float>> out(pairs.size());
  if (model.is_transformer()) {
    // The last decoder layer's cross-attention, averaged over its heads: (B,h,T,S) -> (B,T,S).
    for (const auto& rows : make_batches(pairs, batch_size, nullptr)) {
      Batch batch = make_batch(pairs, rows);
      Tape tape;
      NoGrad no_grad(tape);
      TransformerModel& t = model.transformer();
      TransformerModel::Weights w;
      t.decode(tape, t.encode(tape, batch, model.rng()), batch, model.rng(), &w);
      const Var a = ops::mean(w.decoder.back().cross, {1});
      const int64_t steps = batch.tgt_len, s = batch.src_len;
      for (int64_t r = 0; r < batch.size; ++r) {
        auto& out_r = out[static_cast<size_t>(batch.index[r])];
        for (int64_t i = 0; i < batch.tgt_lengths[r]; ++i)
          for (int64_t j = 0; j < batch.src_lengths[r]; ++j)
            out_r.push_back(static_cast<float>(a.value().at((r * steps + i) * s + j)));
      }
    }
    return out;
  }
  if (model.config().attention == nn::AttentionKind::none) return out;
  for (const auto& rows : make_batches(pairs, batch_size, nullptr)) {
    Batch batch = make_batch(pairs, rows);
    Tape tape;
    NoGrad no_grad(tape);
    nn::AttentionMemory memory = model.encode(tape, batch);
    DecoderState state = model.decoder().start(tape, memory.summary);
    const int64_t b = batch.size, steps = batch.tgt_len, s = batch.src_len;
    std::vector<int32_t> y(static_cast<size_t>(b));
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t r = 0; r < b; ++r) y[r] = batch.tgt_in[r * steps + t];
      DecoderStep step = model.decoder().step(tape, memory, state, y, t, model.rng());
      for (int64_t r = 0; r < b; ++r) {
        if (t >= batch.tgt_lengths[r]) continue;
        auto& a = out[static_cast<size_t>(batch.index[r])];
        for (int64_t j = 0; j < batch.src_lengths[r]; ++j)
          a.push_back(static_cast<float>(step.weights.value().at(r * s + j)));
      }
    }
  }
  return out;
}

}  // namespace tapestry::models
