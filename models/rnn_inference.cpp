// RNN decoding on raw buffers: the encoder's recurrence, the attention and the decoder's cells,
// each computation the one its op runs (packed products, ops::forward and ops::detail kernels).
#include "tapestry/models/rnn_inference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/packed.h"
#include "tapestry/core/parallel.h"
#include "tapestry/models/rnn_inference_encoder.h"
#include "tapestry/models/rnn_inference_parts.h"
#include "tapestry/models/vocab.h"
#include "tapestry/ops/attention_ops.h"
#include "tapestry/ops/kernels.h"
#include "tapestry/ops/ops.h"
#include "tapestry/ops/softmax.h"

namespace tapestry::models {

namespace {

using detail::Buffer;
using detail::cell_step;
using detail::CellWeights;
using detail::copy;
using detail::EncoderRun;
using detail::ParamsByName;
using detail::Product;
using detail::sized;
using detail::TokenTable;
using nn::AttentionKind;
using nn::CellKind;

class RnnInference final : public Stepper {
 public:
  RnnInference(Seq2Seq& model, Tape& tape) : RnnInference(model, tape, ParamsByName(model)) {}
  RnnInference(Seq2Seq& model, Tape& tape, const ParamsByName& param)
      : config_(model.config()),
        tape_(tape),
        kind_(config_.cell),
        attention_(config_.attention),
        encoder_(config_, param) {
    for (int l = 0; l < config_.layers; ++l)
      decoder_.push_back(param.cell(fmt::format("decoder.cells.{}.", l), ""));
    bridge_ = Product::of(&param("decoder.bridge.weight"), &param("decoder.bridge.bias"));
    out_ = Product::of(&param("decoder.out.weight"), &param("decoder.out.bias"));
    if (config_.decoder == DecoderKind::luong)
      combine_ = Product::of(&param("decoder.combine.weight"), nullptr);
    if (attention_ == AttentionKind::bahdanau) {
      query_ = Product::of(&param("decoder.attention.W"), &param("decoder.attention.b"));
      keys_product_ = Product::of(&param("decoder.attention.U"), nullptr);
      v_ = &param("decoder.attention.v");
    }
    if (attention_ == AttentionKind::general) general_ = &param("decoder.attention.W");
    tgt_embedding_ = &param("decoder.embedding.weight");
    // The first decoder cell's input [e; r] in two blocks, as nn::Cell::forward_split takes it.
    const CellWeights& first = decoder_.front();
    head_ = Product::of(first.ih.weight, first.ih.bias, {0, config_.emb});
    tail_ = Product::of(first.ih.weight, nullptr, {config_.emb, -1});
    head_table_.reset(config_.tgt_vocab, head_.out());
  }

  void start(const Batch& batch, std::span<const int32_t> rows, int64_t) override {
    resolve_packs();
    encoder_.encode(batch, attention_ == AttentionKind::bahdanau ? &keys_product_ : nullptr);
    src_len_ = batch.src_len;
    batch_rows_ = batch.size;
    lengths_.assign(batch.src_lengths.begin(), batch.src_lengths.end());
    select_memory(rows);
    start_decoder();
  }

  Var step(std::span<const int32_t> y_prev, int64_t t, Var& weights) override {
    const int64_t n = rows_, e = config_.emb, h = config_.hidden, k = config_.key_size();
    if (static_cast<int64_t>(y_prev.size()) != n)
      throw ShapeError(
          fmt::format("rnn inference: {} previous tokens for {} rows", y_prev.size(), n));
    for (int64_t i = 0; i < n; ++i)
      if (y_prev[i] < 0 || y_prev[i] >= config_.tgt_vocab)
        throw IndexError(fmt::format("rnn inference: target id {} at row {} outside [0, {})",
                                     y_prev[i], i, config_.tgt_vocab));
    // The first cell's gx = (e W_head^T + b_ih) + r W_tail^T, r the context (Bahdanau) or h~
    // (Luong): Decoder::step's split, the head from the table where there is one.
    const float* embedding = tgt_embedding_->value.data<float>();
    const int64_t g = head_.out();
    float* gx0 = sized(gx0_, n * g);
    float* emb = nullptr;  // the embedded tokens, where needed
    const bool table = n == 1 && head_table_.on();
    if (!table || (config_.decoder == DecoderKind::bahdanau && config_.deep_output)) {
      emb = sized(emb_, n * e);
      for (int64_t i = 0; i < n; ++i) copy(embedding + y_prev[i] * e, emb + i * e, e);
    }
    // One row from the table is added to the tail's product as the kernel adds a bias (tail_
    // has none); otherwise the head is made first and the tail's product added to it.
    const float* head_row = table ? head_table_.row(y_prev[0], embedding, head_) : nullptr;
    if (!table) head_.run(emb, n, gx0);
    float* a = attention_ == AttentionKind::none ? nullptr : weights_out(n);
    // gx0 = head + r W_tail^T, added after the product as ops::add adds it.
    auto add_tail = [&](const float* r) {
      if (head_row) return tail_.run_adding(r, gx0, head_row);
      float* t = sized(tail_out_, n * g);
      tail_.run(r, n, t);
      for (int64_t i = 0; i < n * g; ++i) gx0[i] += t[i];
    };
    // One sentence with a second core free: the first cell's W_hh product, which needs only
    // s_{t-1}, runs on that core while this one makes the cell's input (the attention and the
    // tail's product); the two write apart (hw_; the attention's buffers and gx0). That core reads
    // the product's halves in alternate orders, for the half it read last to be in its L1.
    const CellWeights& w0 = decoder_[0];
    const bool beside = n == 1 && parallel_threads() >= 2 && !in_parallel_region();
    auto input_beside_hidden = [&](auto&& input) {
      float* hw = sized(hw_, w0.hh.out());
      parallel_run(2, [&](int job) {
        if (job == 1) return w0.hh.run_halves(h_[0].data(), hw, t % 2 == 1);
        input();
      });
    };
    if (config_.decoder == DecoderKind::bahdanau) {
      const float* ctx = nullptr;
      auto input = [&] {
        ctx = attend(h_[config_.layers - 1].data(), a);
        add_tail(ctx);
      };
      // On one core the product is the last before the cell at even steps and the first of the
      // step at odd ones, its halves in opposite orders (Product::run_halves), so that an odd step
      // reads the half the step before it read last from L1 (the output layer's product between
      // them is small).
      const bool hh_first = beside || (n == 1 && t % 2 == 1);
      if (beside) {
        input_beside_hidden(input);
      } else {
        if (hh_first) w0.hh.run_halves(h_[0].data(), sized(hw_, w0.hh.out()), true);
        input();
      }
      run_cells(gx0, hh_first);
      const float* s = h_[config_.layers - 1].data();
      const float* features = s;
      if (config_.deep_output) {  // [s_t; c_t; E y_{t-1}]
        const int64_t f = h + k + e;
        float* feat = sized(features_, n * f);
        for (int64_t i = 0; i < n; ++i) {
          copy(s + i * h, feat + i * f, h);
          copy(ctx + i * k, feat + i * f + h, k);
          copy(emb + i * e, feat + i * f + h + k, e);
        }
        features = feat;
      }
      out_.run(features, n, logits_out(n));
    } else {
      auto input = [&] { add_tail(feed_.data()); };
      if (beside)
        input_beside_hidden(input);
      else
        input();
      run_cells(gx0, beside);
      const float* top = h_[config_.layers - 1].data();
      const float* ctx = attend(top, a);
      // h~_t = tanh(W_c [c_t; h_t])
      float* both = sized(combine_in_, n * (k + h));
      for (int64_t i = 0; i < n; ++i) {
        copy(ctx + i * k, both + i * (k + h), k);
        copy(top + i * h, both + i * (k + h) + k, h);
      }
      float* pre = sized(pre_, n * h);
      combine_.run(both, n, pre);
      cpu::kernels().tanh(pre, feed_.data(), n * h);
      out_.run(feed_.data(), n, logits_out(n));
    }
    weights = a ? Var(weights_) : Var();
    return Var(logits_);
  }

  void select_rows(std::span<const int32_t> rows) override {
    const int64_t n = static_cast<int64_t>(rows.size()), h = config_.hidden;
    for (const int32_t r : rows)
      if (r < 0 || r >= rows_)
        throw IndexError(fmt::format("rnn inference: row {} outside [0, {})", r, rows_));
    auto gather = [&](Buffer& b) {
      if (b.empty()) return;
      float* g = sized(gathered_, n * h);
      for (int64_t i = 0; i < n; ++i) copy(b.data() + rows[i] * h, g + i * h, h);
      b.swap(gathered_);
    };
    for (int l = 0; l < config_.layers; ++l) {
      gather(h_[l]);
      gather(c_[l]);
    }
    gather(feed_);
    rows_ = n;
  }

  void release() override {
    logits_ = Tensor();
    weights_ = Tensor();
  }

 private:
  // The packs of this batch's weights (the tape's, made now if missing or out of date).
  void resolve_packs() {
    WeightPacks* packs = tape_.weight_packs();
    if (!packs) {
      own_packs_.invalidate();
      packs = &own_packs_;
    }
    for (size_t l = 0; l < decoder_.size(); ++l) {
      if (l > 0) decoder_[l].ih.resolve(*packs);  // the first cell's reads head_ and tail_
      decoder_[l].hh.resolve(*packs);
    }
    for (Product* p : {&bridge_, &out_, &combine_, &query_, &keys_product_, &head_, &tail_})
      p->resolve(*packs);
    const bool tables_stale = packs->generation() != tables_generation_;
    if (tables_stale) head_table_.invalidate();
    tables_generation_ = packs->generation();
    encoder_.resolve(*packs, tables_stale);
  }

  // The memory of the rows to decode: the batch's rows, or (beam search) rows[i] for row i.
  void select_memory(std::span<const int32_t> rows) {
    const int64_t b = batch_rows_, s = src_len_, k = config_.key_size();
    const int64_t a = attention_ == AttentionKind::bahdanau ? keys_product_.out() : 0;
    const int64_t n = rows.empty() ? b : static_cast<int64_t>(rows.size());
    auto source = [&](int64_t i) -> int64_t {
      const int64_t r = rows.empty() ? i : rows[i];
      if (r < 0 || r >= b)
        throw IndexError(fmt::format("attention memory: row {} outside [0, {})", r, b));
      return r;
    };
    float* valid = sized(valid_, n * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) valid[i * s + j] = j < lengths_[source(i)] ? 1.0f : 0.0f;
    if (rows.empty()) {  // each row once: the encoder's buffers are the memory (the swapped-out
                         // ones keep their capacity for the next batch's encoder)
      keys_.swap(encoder_.keys);
      summary_.swap(encoder_.summary);
      projected_.swap(encoder_.projected);
    } else {
      float* keys = sized(keys_, n * s * k);
      float* summary = sized(summary_, n * k);
      float* projected = sized(projected_, n * s * a);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = source(i);
        copy(encoder_.keys.data() + r * s * k, keys + i * s * k, s * k);
        copy(encoder_.summary.data() + r * k, summary + i * k, k);
        copy(encoder_.projected.data() + r * s * a, projected + i * s * a, s * a);
      }
    }
    rows_ = n;
  }

  // s_0 = tanh(W_b summary + b_b) in every layer, c_0 = 0, h~_0 = 0.
  void start_decoder() {
    const int64_t n = rows_, hs = config_.hidden, layers = config_.layers;
    float* pre = sized(pre_, n * layers * hs);
    bridge_.run(summary_.data(), n, pre);
    float* s0 = sized(s0_, n * layers * hs);
    cpu::kernels().tanh(pre, s0, n * layers * hs);
    h_.resize(static_cast<size_t>(layers));
    c_.resize(static_cast<size_t>(layers));
    for (int64_t l = 0; l < layers; ++l) {
      float* h = sized(h_[l], n * hs);
      for (int64_t i = 0; i < n; ++i) copy(s0 + (i * layers + l) * hs, h + i * hs, hs);
      if (kind_ == CellKind::lstm)
        c_[l].assign(static_cast<size_t>(n * hs), 0.0f);
      else
        c_[l].clear();
    }
    if (config_.decoder == DecoderKind::luong)
      feed_.assign(static_cast<size_t>(n * hs), 0.0f);
    else
      feed_.clear();
  }

  // The decoder's cells: layer 0 from its input projection gx0, each later layer over the new h
  // below it. hw0_ready: layer 0's hidden product is in hw_ already.
  void run_cells(const float* gx0, bool hw0_ready = false) {
    const int64_t n = rows_, hs = config_.hidden;
    for (int l = 0; l < config_.layers; ++l) {
      const CellWeights& w = decoder_[static_cast<size_t>(l)];
      const int64_t g = w.ih.out();
      const float* gx = gx0;
      if (l > 0) {
        float* x = sized(gx_, n * g);
        w.ih.run(h_[l - 1].data(), n, x);
        gx = x;
      }
      float* hw = sized(hw_, n * g);
      if (n == 1 && l == 0) {
        if (!hw0_ready) w.hh.run_halves(h_[l].data(), hw, false);
      } else {
        w.hh.run(h_[l].data(), n, hw);
      }
      float* h2 = sized(h2_, n * hs);
      float* c2 = kind_ == CellKind::lstm ? sized(c2_, n * hs) : nullptr;
      cell_step(kind_, hs, w, gx, g, hw, h_[l].data(), c_[l].data(), h2, c2, n, cell_scratch_);
      h_[l].swap(h2_);
      if (c2) c_[l].swap(c2_);
    }
  }

  // The weights a (n,S) into `a` and the context (n,K) for the query (n,Hq); the summary for
  // `none` (a null).
  const float* attend(const float* query, float* a) {
    const int64_t n = rows_, s = src_len_, k = config_.key_size();
    if (attention_ == AttentionKind::none) return summary_.data();
    float* scores = sized(scores_, n * s);
    if (attention_ == AttentionKind::bahdanau) {
      const int64_t at = query_.out();
      float* wq = sized(wq_, n * at);
      query_.run(query, n, wq);
      ops::forward::additive_scores(projected_.data(), wq, v_->value.data<float>(), scores, n, s,
                                    at);
    } else {  // dot, scaled-dot and general: e_j = q . h_j
      const float* q = query;
      Tensor qw;
      if (attention_ == AttentionKind::general) {  // q = s W, the op's own product (not packed)
        Tensor qt = Tensor::empty({n, config_.hidden}, DType::f32);
        copy(query, qt.data<float>(), n * config_.hidden);
        qw = ops::matmul(Var(std::move(qt)), Var(general_->value)).value();
        q = qw.data<float>();
      }
      ops::forward::dot_scores(keys_.data(), q, scores, n, s, k);
      if (attention_ == AttentionKind::scaled_dot) {  // e / sqrt(K), through the op as well
        Tensor e = Tensor::empty({n, s}, DType::f32);
        copy(scores, e.data<float>(), n * s);
        const Tensor scaled =
            ops::scale(Var(std::move(e)), 1.0 / std::sqrt(static_cast<double>(k))).value();
        copy(scaled.data<float>(), scores, n * s);
      }
    }
    for (int64_t i = 0; i < n; ++i)
      ops::forward::softmax_row(scores + i * s, valid_.data() + i * s, a + i * s, s, 1, false);
    float* ctx = sized(context_, n * k);
    ops::forward::weighted_sum(a, keys_.data(), ctx, n, s, k);
    return ctx;
  }

  // The step's outputs, tensors kept from step to step while their shapes stay.
  float* logits_out(int64_t n) {
    const Shape shape{n, config_.tgt_vocab};
    if (!logits_.defined() || logits_.shape() != shape) logits_ = Tensor::empty(shape, DType::f32);
    return logits_.data<float>();
  }
  float* weights_out(int64_t n) {
    const Shape shape{n, src_len_};
    if (!weights_.defined() || weights_.shape() != shape)
      weights_ = Tensor::empty(shape, DType::f32);
    return weights_.data<float>();
  }

  Seq2SeqConfig config_;
  Tape& tape_;
  CellKind kind_;
  AttentionKind attention_;
  WeightPacks own_packs_;  // when the tape has none
  EncoderRun encoder_;
  std::vector<CellWeights> decoder_;
  Product bridge_, out_, combine_, query_, keys_product_;
  Product head_, tail_;             // the first decoder cell's W_ih split at E
  TokenTable head_table_;           // head_'s rows per token
  uint64_t tables_generation_ = 0;  // the packs' generation the tables are of
  const nn::Parameter* v_ = nullptr;
  const nn::Parameter* general_ = nullptr;  // general's W (Hq,K)
  const nn::Parameter* tgt_embedding_ = nullptr;

  // The encoded batch (B rows), then the memory of the rows decoded (n rows).
  int64_t batch_rows_ = 0, rows_ = 0, src_len_ = 0;
  std::vector<int64_t> lengths_;
  Buffer gx_, hw_;
  Buffer keys_, summary_, projected_, valid_;
  // The decoder's state and its step's buffers.
  std::vector<Buffer> h_, c_;
  Buffer feed_, s0_, pre_, gx0_, emb_, tail_out_, h2_, c2_, cell_scratch_, features_, combine_in_,
      scores_, wq_, context_, gathered_;
  Tensor logits_, weights_;
};

}  // namespace

bool rnn_inference_supported(const Seq2Seq& model) {
  const Seq2SeqConfig& c = model.config();
  return !c.transformer() && model.dtype() == DType::f32 && packed_kernel_available() &&
         c.fused_attention &&
         (c.attention == AttentionKind::none || c.attention == AttentionKind::bahdanau ||
          c.attention == AttentionKind::dot || c.attention == AttentionKind::scaled_dot ||
          c.attention == AttentionKind::general);
}

std::unique_ptr<Stepper> make_rnn_inference_stepper(Seq2Seq& model, Tape& tape) {
  if (!rnn_inference_supported(model))
    throw ValueError(
        "rnn inference: this model decodes through the ops (not a float32 RNN with "
        "attention none, bahdanau or dot and the packed kernel)");
  return std::make_unique<RnnInference>(model, tape);
}

}  // namespace tapestry::models
