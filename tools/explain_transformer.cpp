// Explain for the Transformer: records one decoder position, gathers every attention's q, k, v,
// scores, weights and context per head with their gradients, and checks them against fourth-order
// central differences through the tape's record hook.
#include "tools/explain_transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "tapestry/ops/ops.h"

namespace tapestry::cli {

using models::TransformerModel;
using models::Vocab;

std::string HeadExplanation::name() const {
  return fmt::format("layer {} {} head {}", layer + 1, cross ? "cross" : "self", head + 1);
}

double TransformerExplanation::worst_error() const {
  double worst = 0;
  for (const auto& c : checks) worst = std::max(worst, c.rel_error);
  return worst;
}

const HeadExplanation& TransformerExplanation::head(int layer, bool cross, int h) const {
  for (const auto& a : attention)
    if (a.layer == layer && a.cross == cross && a.head == h) return a;
  throw ValueError(fmt::format("explain: no head {} in layer {}", h + 1, layer + 1));
}

models::Seq2SeqConfig tiny_transformer_config() {
  models::Seq2SeqConfig c;
  c.arch = models::Arch::transformer;
  c.d_model = 8;
  c.heads = 2;
  c.ffn = 16;
  c.enc_layers = 1;
  c.dec_layers = 2;
  c.activation = nn::Activation::gelu;
  c.dropout = 0;
  return c;
}

namespace {

// The encoder over the source, the decoder over `inputs` (one sentence), position t = the last
// input's output layer and L_t. The same code runs the recorded pass and every finite difference,
// so each inner node has the same index on every tape.
struct Pass {
  TransformerModel::Weights weights;
  Var memory;  // (1,S,d): the encoder's output h_j, which every cross-attention reads
  Var logits, loss;
};

Pass run_pass(Tape& tape, TransformerModel& tf, const models::Batch& batch, int32_t target) {
  Rng unused(0);  // eval mode: no dropout draws
  Pass p;
  const TransformerModel::Memory memory = tf.encode(tape, batch, unused, &p.weights);
  p.memory = memory.states;
  const Var h = tf.decode(tape, memory, batch, unused, &p.weights);  // (1,t+1,d)
  const int64_t t = batch.tgt_len - 1;
  {
    Region region(tape, "output");
    p.logits = tf.logits(tape, ops::reshape(ops::slice(h, 1, t, 1), {1, h.dim(2)}));
  }
  Region region(tape, "loss");
  p.loss = ops::cross_entropy(p.logits, std::span<const int32_t>(&target, 1), Vocab::kPad);
  return p;
}

// Head `h` of an inner tensor (heads,rows,cols) or (1,heads,rows,cols) (one sentence): its value
// and gradient.
HeadTensor head_block(const Tape& tape, const Var& x, int h) {
  const int64_t rows = x.dim(x.ndim() - 2), cols = x.dim(x.ndim() - 1), size = rows * cols;
  HeadTensor out;
  out.shape = {rows, cols};
  const std::vector<double> v = x.value().to_vector();
  const Tensor g = tape.grad(x);
  const std::vector<double> gv = g.defined() ? g.to_vector() : std::vector<double>(v.size(), 0.0);
  out.value.assign(v.begin() + h * size, v.begin() + (h + 1) * size);
  out.grad.assign(gv.begin() + h * size, gv.begin() + (h + 1) * size);
  return out;
}

// One head tensor to check: the node it lives in, the head's offset there, its gradient.
struct Checked {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<double> analytic;
  int32_t node = -1;
  int64_t offset = 0;
};

// The elements to check: all, or the `max` of largest |gradient| (in index order), so that a
// limited check looks where the gradient is, not at rows the loss never reaches.
std::vector<int64_t> chosen(const std::vector<double>& g, int64_t max) {
  std::vector<int64_t> idx(g.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (max <= 0 || max >= static_cast<int64_t>(g.size())) return idx;
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return std::abs(g[static_cast<size_t>(a)]) > std::abs(g[static_cast<size_t>(b)]);
  });
  idx.resize(static_cast<size_t>(max));
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace

TransformerExplanation explain_transformer_step(ExplainModel& m,
                                                const std::vector<std::string>& target,
                                                int64_t step, const CheckOptions& opt) {
  models::Seq2Seq& model = *m.model;
  if (!model.is_transformer()) throw ValueError("explain: the model is not a transformer");
  if (model.dtype() != DType::f64)
    throw DTypeError("explain: the model must be float64 (the finite differences need it)");
  TransformerModel& tf = model.transformer();
  const models::Seq2SeqConfig& cfg = model.config();
  TransformerExplanation e;
  e.model = cfg.summary();
  e.config_json = cfg.to_json();
  e.heads = cfg.heads;
  e.layers = cfg.dec_layers;
  e.d_k = cfg.d_model / cfg.heads;
  e.src_vocab = m.src.tokens();
  e.tgt_vocab = m.tgt.tokens();
  e.eps = opt.eps;
  e.tolerance = opt.tolerance;
  e.check_max = opt.max_elements;

  models::Batch batch = source_batch(m);  // refuses an empty source first
  check_teacher_forced(m.tgt, target, step);
  e.step = step;
  e.target_sentence = target;
  for (const auto& w : m.source) e.source.push_back(m.src.contains(w) ? w : "<unk>");

  batch.tgt_len = step + 1;
  batch.tgt_lengths = {step + 1};
  e.inputs.push_back("<bos>");
  batch.tgt_in.push_back(Vocab::kBos);
  for (int64_t k = 0; k < step; ++k) {
    e.inputs.push_back(target[static_cast<size_t>(k)]);
    batch.tgt_in.push_back(m.tgt.id(target[static_cast<size_t>(k)]));
  }
  e.previous = e.inputs.back();
  e.target =
      step < static_cast<int64_t>(target.size()) ? target[static_cast<size_t>(step)] : "<eos>";
  e.target_id = m.tgt.id(e.target);
  batch.tgt_out.assign(static_cast<size_t>(step + 1), Vocab::kPad);
  batch.tgt_out.back() = e.target_id;

  // The recorded pass.
  model.zero_grad();
  Tape tape;
  tape.set_keep_grads(true);  // q, k, v, scores and context are inner nodes
  Pass p = run_pass(tape, tf, batch, e.target_id);
  tape.backward(p.loss);
  e.loss = p.loss.value().item();
  if (const Tensor g = tape.grad(p.memory); g.defined()) e.memory_grad = g.to_vector();
  {
    const std::vector<double> z = p.logits.value().to_vector();
    const double mx = *std::max_element(z.begin(), z.end());
    double sum = 0;
    std::vector<std::pair<double, int32_t>> prob;
    for (size_t j = 0; j < z.size(); ++j) {
      prob.emplace_back(std::exp(z[j] - mx), static_cast<int32_t>(j));
      sum += prob.back().first;
    }
    std::sort(prob.begin(), prob.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    // <pad> and <bos> are in the softmax but never written: left out of the list.
    for (size_t k = 0; k < prob.size() && e.top.size() < 5; ++k)
      if (prob[k].second >= Vocab::kEos)
        e.top.emplace_back(m.tgt.token(prob[k].second), prob[k].first / sum);
  }

  // Every head of every decoder layer, self before cross.
  std::vector<Checked> checked;
  for (size_t l = 0; l < p.weights.decoder.size(); ++l) {
    const auto& w = p.weights.decoder[l];
    for (bool cross : {false, true}) {
      const nn::MultiheadAttention::Parts& parts = cross ? w.cross_parts : w.self_parts;
      const Var& weights = cross ? w.cross : w.self;  // (1,h,T,S)
      for (int h = 0; h < cfg.heads; ++h) {
        HeadExplanation a;
        a.layer = static_cast<int>(l);
        a.cross = cross;
        a.head = h;
        a.keys = cross ? e.source : e.inputs;
        a.q = head_block(tape, parts.q, h);
        a.k = head_block(tape, parts.k, h);
        a.v = head_block(tape, parts.v, h);
        a.scores = head_block(tape, parts.scores, h);
        a.context = head_block(tape, parts.context, h);
        a.weights = head_block(tape, weights, h);
        const std::pair<const char*, std::pair<const HeadTensor*, const Var*>> items[] = {
            {"q", {&a.q, &parts.q}},
            {"k", {&a.k, &parts.k}},
            {"v", {&a.v, &parts.v}},
            {"scores", {&a.scores, &parts.scores}},
            {"weights", {&a.weights, &weights}},
            {"context", {&a.context, &parts.context}}};
        for (const auto& [what, ht] : items) {
          const int64_t size = static_cast<int64_t>(ht.first->value.size());
          checked.push_back({fmt::format("{} {}", a.name(), what), ht.first->shape, ht.first->grad,
                             ht.second->node(), h * size});
        }
        e.attention.push_back(std::move(a));
      }
    }
  }
  for (const auto& [name, prm] : model.named_parameters()) {
    ExplainParameter ep;
    ep.name = name;
    for (int i = 0; i < prm->value.ndim(); ++i) ep.shape.push_back(prm->value.dim(i));
    ep.grad = prm->grad.to_vector();
    ep.attention = name.find("attn.") != std::string::npos;
    e.parameters.push_back(std::move(ep));
  }
  model.zero_grad();

  // The check: each element moved where its node is recorded, the whole pass run again.
  auto loss = [&](int32_t node, int64_t element, double delta) {
    Tape t;
    t.set_record_hook([&](int32_t id, Tensor& value) {
      if (id != node) return;
      value = value.clone();
      value.set(element, value.at(element) + delta);
    });
    return run_pass(t, tf, batch, e.target_id).loss.value().item();
  };
  for (const auto& c : checked) {
    double scale = 0;  // the tensor's largest |gradient|, checked or not
    for (double g : c.analytic) scale = std::max(scale, std::abs(g));
    std::vector<ExplainCheck> rows;
    for (int64_t i : chosen(c.analytic, opt.max_elements)) {
      const double h = opt.eps;
      const int64_t at = c.offset + i;
      // Fourth-order central difference, as explain_step takes it.
      const double numeric = (8 * (loss(c.node, at, h) - loss(c.node, at, -h)) -
                              (loss(c.node, at, 2 * h) - loss(c.node, at, -2 * h))) /
                             (12 * h);
      ExplainCheck ec;
      ec.tensor = c.name;
      ec.shape = c.shape;
      ec.index = i;
      ec.analytic = c.analytic[static_cast<size_t>(i)];
      ec.numeric = numeric;
      scale = std::max({scale, std::abs(ec.analytic), std::abs(numeric)});
      rows.push_back(ec);
    }
    for (auto& ec : rows) {
      const double diff = std::abs(ec.analytic - ec.numeric);
      ec.rel_error = scale > 0 ? diff / scale : diff;
      ec.pass = std::isfinite(ec.rel_error) && ec.rel_error < opt.tolerance;
      e.checks.push_back(ec);
    }
  }
  e.story = transformer_story(e);
  return e;
}

std::vector<double> transformer_sentence_gradient(ExplainModel& m,
                                                  const std::vector<std::string>& target) {
  models::Seq2Seq& model = *m.model;
  TransformerModel& tf = model.transformer();
  const auto steps = static_cast<int64_t>(target.size()) + 1;
  models::Batch batch = source_batch(m);
  batch.tgt_len = steps;
  batch.tgt_lengths = {steps};
  batch.tgt_in.push_back(Vocab::kBos);
  for (const auto& w : target) {
    batch.tgt_in.push_back(m.tgt.id(w));
    batch.tgt_out.push_back(m.tgt.id(w));
  }
  batch.tgt_out.push_back(Vocab::kEos);
  Tape tape;
  tape.set_keep_grads(true);  // the encoder's output is an inner node
  Rng unused(0);
  const TransformerModel::Memory memory = tf.encode(tape, batch, unused);
  const Var h = tf.decode(tape, memory, batch, unused);  // (1,T,d)
  Var loss;
  for (int64_t t = 0; t < steps; ++t) {  // L = sum_t L_t, each as explain_transformer_step has it
    const int32_t y = batch.tgt_out[static_cast<size_t>(t)];
    Var l = ops::cross_entropy(tf.logits(tape, ops::reshape(ops::slice(h, 1, t, 1), {1, h.dim(2)})),
                               std::span<const int32_t>(&y, 1), Vocab::kPad);
    loss = t == 0 ? l : loss + l;
  }
  model.zero_grad();
  tape.backward(loss);
  model.zero_grad();  // the parameters' gradients are not this function's result
  const Tensor g = tape.grad(memory.states);
  return g.defined() ? g.to_vector() : std::vector<double>(memory.states.numel(), 0.0);
}

AcrossSteps transformer_across(const std::vector<TransformerExplanation>& steps,
                               const std::vector<double>& sentence_grad) {
  if (steps.empty()) return {};
  std::vector<std::string> written;
  std::vector<double> losses;
  std::vector<std::vector<double>> weights, grads;
  for (const TransformerExplanation& e : steps) {
    written.push_back(e.target);
    losses.push_back(e.loss);
    // The last layer's cross-attention at the step's position, averaged over the heads.
    std::vector<double> mean(e.source.size(), 0.0);
    for (int h = 0; h < e.heads; ++h) {
      const HeadTensor& w = e.head(static_cast<int>(e.layers) - 1, true, h).weights;
      const size_t cols = static_cast<size_t>(w.shape[1]), row = static_cast<size_t>(e.step);
      for (size_t j = 0; j < cols && j < mean.size(); ++j)
        mean[j] += w.value[row * cols + j] / static_cast<double>(e.heads);
    }
    weights.push_back(std::move(mean));
    grads.push_back(e.memory_grad);
  }
  return across_sentence(
      steps.front().source, std::move(written), std::move(losses), std::move(weights), grads,
      sentence_grad, "The gradient of each encoder output h_j (what every cross-attention reads)");
}

}  // namespace tapestry::cli
