// The steppers that decode through the ops (an RNN's decoder, a Transformer's cached step), and
// the choice between them and the raw RNN path of models/rnn_inference.h.
#include "tapestry/models/stepper.h"

#include <memory>

#include "tapestry/models/rnn_inference.h"
#include "tapestry/ops/ops.h"

namespace tapestry::models {

namespace {

class RnnStepper : public Stepper {
 public:
  RnnStepper(Seq2Seq& model, Tape& tape) : model_(model), tape_(tape) {}
  void start(const Batch& batch, std::span<const int32_t> rows, int64_t) override {
    memory_ = model_.encode(tape_, batch);
    if (!rows.empty()) memory_ = nn::select_rows(memory_, rows);
    state_ = model_.decoder().start(tape_, memory_.summary);
  }
  Var step(std::span<const int32_t> y_prev, int64_t t, Var& weights) override {
    DecoderStep s = model_.decoder().step(tape_, memory_, state_, y_prev, t, model_.rng());
    weights = s.weights;
    return model_.decoder().logits(tape_, s.features, model_.rng());
  }
  void select_rows(std::span<const int32_t> rows) override {
    for (auto& layer : state_.layers) {
      layer.h = ops::gather(layer.h, rows);
      if (layer.c.value().defined()) layer.c = ops::gather(layer.c, rows);
    }
    if (state_.feed.value().defined()) state_.feed = ops::gather(state_.feed, rows);
  }
  void release() override {
    memory_ = {};
    state_ = {};
  }

 private:
  Seq2Seq& model_;
  Tape& tape_;
  nn::AttentionMemory memory_;
  DecoderState state_;
};

// The Transformer's step reads and extends its key/value caches: each step computes only the new
// position's queries, keys and values. The attention kept with a hypothesis is the last decoder
// layer's cross-attention, averaged over its heads.
class TransformerStepper : public Stepper {
 public:
  TransformerStepper(Seq2Seq& model, Tape& tape) : model_(model.transformer()), tape_(tape) {}
  void start(const Batch& batch, std::span<const int32_t> rows, int64_t capacity) override {
    model_.start(tape_, batch, rows, capacity, state_);
  }
  Var step(std::span<const int32_t> y_prev, int64_t, Var& weights) override {
    layer_weights_.clear();
    const Var h = model_.step(tape_, state_, y_prev, &layer_weights_);
    weights = ops::mean(layer_weights_.back().cross, {1});  // (B,h,S) -> (B,S)
    return model_.logits(tape_, h);
  }
  void select_rows(std::span<const int32_t> rows) override { model_.select_rows(state_, rows); }
  void release() override {
    state_.memory = {};
    state_.caches.self.clear();  // the lists keep their capacity
    state_.caches.cross.clear();
    layer_weights_.clear();
  }

 private:
  TransformerModel& model_;
  Tape& tape_;
  TransformerModel::DecodeState state_;
  std::vector<nn::TransformerDecoderLayer::Weights> layer_weights_;
};

}  // namespace

std::unique_ptr<Stepper> make_stepper(Seq2Seq& model, Tape& tape, bool through_ops) {
  if (model.is_transformer()) return std::make_unique<TransformerStepper>(model, tape);
  if (!through_ops && rnn_inference_supported(model))
    return make_rnn_inference_stepper(model, tape);
  return std::make_unique<RnnStepper>(model, tape);
}

}  // namespace tapestry::models
