// The encoder of RNN decoding on raw buffers (nn::RNN::forward in eval mode, the ops' kernels in
// the ops' order), and the model's parameters by name.
#include "tapestry/models/rnn_inference_encoder.h"

#include <fmt/format.h>

#include <algorithm>

#include "tapestry/core/errors.h"

namespace tapestry::models::detail {

ParamsByName::ParamsByName(Seq2Seq& model) {
  for (auto& [name, p] : model.named_parameters()) params_[name] = p;
}

nn::Parameter& ParamsByName::operator()(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end())
    throw ValueError(fmt::format("rnn inference: the model has no parameter {}", name));
  return *it->second;
}

CellWeights ParamsByName::cell(const std::string& prefix, const std::string& suffix) const {
  const ParamsByName& param = *this;
  CellWeights c;
  c.ih = Product::of(&param(prefix + "weight_ih" + suffix), &param(prefix + "bias_ih" + suffix));
  c.hh = Product::of(&param(prefix + "weight_hh" + suffix), nullptr);
  c.b_hh = param(prefix + "bias_hh" + suffix).value.data<float>();
  return c;
}

EncoderRun::EncoderRun(const Seq2SeqConfig& config, const ParamsByName& params)
    : config_(config), kind_(config.cell) {
  const int directions = config_.bidirectional ? 2 : 1;
  for (int l = 0; l < config_.layers; ++l)
    for (int d = 0; d < directions; ++d)
      cells_.push_back(params.cell("encoder.rnn.", fmt::format("_l{}{}", l, d ? "_reverse" : "")));
  embedding_ = &params("encoder.embedding.weight");
  for (int d = 0; d < directions; ++d)
    tables_[d].reset(config_.src_vocab, cells_[static_cast<size_t>(d)].ih.out());
}

void EncoderRun::resolve(WeightPacks& packs, bool tables_stale) {
  for (auto& c : cells_) {
    c.ih.resolve(packs);
    c.hh.resolve(packs);
  }
  if (tables_stale)
    for (TokenTable& t : tables_) t.invalidate();
}

void EncoderRun::encode(const Batch& batch, const Product* keys_product) {
  const int64_t b = batch.size, s = batch.src_len, e = config_.emb, hs = config_.hidden;
  const int64_t d_count = config_.bidirectional ? 2 : 1, k = config_.key_size();
  const int64_t g = nn::gate_count(kind_) * hs;
  if (b == 0) throw ValueError("rnn inference: an empty batch");
  int64_t full = s;  // steps real in every row
  for (int64_t r = 0; r < b; ++r) full = std::min(full, batch.src_lengths[r]);
  for (int64_t i = 0; i < b * s; ++i)
    if (batch.src[i] < 0 || batch.src[i] >= config_.src_vocab)
      throw IndexError(fmt::format("seq2seq: source id {} outside the vocabulary [0, {})",
                                   batch.src[i], config_.src_vocab));
  const float* embedding = embedding_->value.data<float>();
  const bool tables = b == 1 && tables_[0].on();  // the first layer's gx from the tables
  if (!tables) {
    float* x = sized(layer_in_, b * s * e);
    for (int64_t r = 0; r < b; ++r)
      for (int64_t t = 0; t < s; ++t) {
        float* row = x + (r * s + t) * e;
        if (full == s || t < batch.src_lengths[r])
          copy(embedding + batch.src[r * s + t] * e, row, e);
        else
          std::fill(row, row + e, 0.0f);
      }
  }
  sized(summary, b * k);
  for (int l = 0; l < config_.layers; ++l) {
    float* out = sized(layer_out_, b * s * d_count * hs);
    for (int64_t d = 0; d < d_count; ++d) {
      const CellWeights& w = cells_[static_cast<size_t>(l * d_count + d)];
      float* gx = sized(gx_, b * s * g);
      if (l == 0 && tables) {
        // A padded position's input is 0, and the product's row there is the bias alone.
        const float* b_ih = w.ih.bias->value.data<float>();
        for (int64_t r = 0; r < b; ++r)
          for (int64_t t = 0; t < s; ++t) {
            const bool real = full == s || t < batch.src_lengths[r];
            copy(real ? tables_[d].row(batch.src[r * s + t], embedding, w.ih) : b_ih,
                 gx + (r * s + t) * g, g);
          }
      } else {
        w.ih.run(layer_in_.data(), b * s, gx);
      }
      float* h = sized(h_, b * hs);
      float* c = sized(c_, b * hs);
      float* h2 = sized(h2_, b * hs);
      float* c2 = sized(c2_, b * hs);
      std::fill(h, h + b * hs, 0.0f);
      std::fill(c, c + b * hs, 0.0f);
      float* hw = sized(hw_, b * g);
      for (int64_t i = 0; i < s; ++i) {
        const int64_t t = d ? s - 1 - i : i;
        if (b == 1)
          w.hh.run_halves(h, hw, i % 2 == 1);
        else
          w.hh.run(h, b, hw);
        cell_step(kind_, config_.hidden, w, gx + t * g, s * g, hw, h, c, h2, c2, b, cell_scratch_);
        for (int64_t r = 0; r < b; ++r) {
          float* y = out + (r * s + t) * d_count * hs + d * hs;
          if (t < batch.src_lengths[r]) {  // every row is real before `full`
            copy(h2 + r * hs, h + r * hs, hs);
            if (kind_ == nn::CellKind::lstm) copy(c2 + r * hs, c + r * hs, hs);
            copy(h2 + r * hs, y, hs);
          } else {
            std::fill(y, y + hs, 0.0f);
          }
        }
      }
      if (l == config_.layers - 1)
        for (int64_t r = 0; r < b; ++r) copy(h + r * hs, summary.data() + r * k + d * hs, hs);
    }
    layer_in_.swap(layer_out_);
  }
  // The top layer's outputs are the keys; the attention's projection of them, once per batch.
  keys.swap(layer_in_);
  if (keys_product) {
    float* p = sized(projected, b * s * keys_product->out());
    keys_product->run(keys.data(), b * s, p);
  }
}

}  // namespace tapestry::models::detail
