// Explain: builds or loads the model, records one decoder step, gathers the tape after backward
// and checks the attention's gradients against fourth-order central differences.
#include "tools/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "tapestry/models/decode.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/ops/ops.h"

namespace tapestry::cli {

using models::Seq2Seq;
using models::Seq2SeqConfig;
using models::Vocab;

namespace {

// ---------------------------------------------------------------------------------------------
// The step

struct StepVars {
  Var query, weights, features, logits, loss;
};

// The decoder's start, then steps 0..t teacher-forced (step k is fed inputs[k]: <bos>, then the
// target's words), the output layer of step t and its loss L_t = -log softmax(z_t)[target]. The
// same code runs the recorded pass and every finite-difference evaluation. `begins`, if given,
// receives the tape's size as each step starts.
StepVars run_steps(Tape& tape, Seq2Seq& model, const nn::AttentionMemory& memory,
                   std::span<const int32_t> inputs, int32_t target,
                   std::vector<int32_t>* begins = nullptr) {
  models::Decoder& dec = model.decoder();
  models::DecoderState state = dec.start(tape, memory.summary);
  const bool bahdanau = model.config().decoder == models::DecoderKind::bahdanau;
  const auto t = static_cast<int64_t>(inputs.size()) - 1;
  StepVars v;
  for (int64_t k = 0; k <= t; ++k) {
    if (begins) begins->push_back(static_cast<int32_t>(tape.size()));
    if (k == t && bahdanau) v.query = state.layers.back().h;  // attends with s_{t-1}
    models::DecoderStep st =
        dec.step(tape, memory, state, inputs.subspan(static_cast<size_t>(k), 1), k, model.rng());
    if (k < t) continue;
    if (!bahdanau) v.query = state.layers.back().h;  // attends with the new h_t
    v.weights = st.weights;
    v.features = st.features;
    v.logits = dec.logits(tape, st.features, model.rng());
  }
  Region region(tape, "loss");
  v.loss = ops::cross_entropy(v.logits, std::span<const int32_t>(&target, 1), Vocab::kPad);
  return v;
}

// What node i's backward adds to each input's gradient: its backward runs once more (the tape
// kept every gradient), the difference is taken, and every gradient is put back as it was.
std::vector<double> passed_norms(Tape& tape, int32_t i) {
  const Node& n = tape.node(static_cast<size_t>(i));
  auto ins = tape.inputs(n);
  std::vector<double> out(ins.size(), -1.0);
  if (!n.op->backward || !n.grad.defined()) return out;
  std::vector<size_t> first(ins.size());
  std::vector<Tensor> before(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) {
    first[k] = k;
    for (size_t j = 0; j < k; ++j)
      if (ins[j] == ins[k]) first[k] = std::min(first[k], j);
    if (ins[k] >= 0 && first[k] == k) before[k] = tape.input_grad(n, static_cast<int>(k))->clone();
  }
  // Its whole share now: a weight's product of a few rows would otherwise be left to the tape to
  // run with the other steps' (Tape::defer_product), adding nothing here.
  {
    DeferGrads whole_share(tape, false);
    n.op->backward(tape, n);
  }
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k] < 0 || first[k] != k) continue;
    Tensor* g = tape.input_grad(n, static_cast<int>(k));
    double s = 0;
    for (int64_t e = 0; e < g->numel(); ++e) {
      const double d = g->at(e) - before[k].at(e);
      s += d * d;
    }
    out[k] = std::sqrt(s);
    g->copy_from(before[k]);
  }
  for (size_t k = 0; k < ins.size(); ++k)
    if (ins[k] >= 0) out[k] = out[first[k]];
  return out;
}

std::vector<int64_t> dims(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.ndim(); ++i) d.push_back(s.dim(i));
  return d;
}

// ---------------------------------------------------------------------------------------------
// The finite-difference check

// A tensor to check: its gradient on the tape, and the loss with one element moved by delta.
struct Checked {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<double> analytic;
  std::function<double(int64_t element, double delta)> loss;
};

// The loss with element i of `value` moved by delta, the element put back afterwards.
std::function<double(int64_t, double)> moving(Tensor* value, std::function<double()> loss) {
  return [value, loss = std::move(loss)](int64_t i, double delta) {
    const double x0 = value->at(i);
    value->set(i, x0 + delta);
    double l = 0;
    try {
      l = loss();
    } catch (...) {
      value->set(i, x0);
      throw;
    }
    value->set(i, x0);
    return l;
  };
}

void check_tensor(const Checked& t, const CheckOptions& o, std::vector<ExplainCheck>& out) {
  const auto size = static_cast<int64_t>(t.analytic.size());
  const int64_t n = o.max_elements > 0 ? std::min(o.max_elements, size) : size;
  std::vector<ExplainCheck> rows;
  double scale = 0;  // the tensor's largest |gradient|, over every element, checked or not
  for (double g : t.analytic) scale = std::max(scale, std::abs(g));
  for (int64_t i = 0; i < n; ++i) {
    const double h = o.eps;
    // Fourth-order central difference (as core/gradcheck.h uses for whole models): its O(h^4)
    // truncation error lets h be large enough that the rounding error of L stays negligible.
    const double numeric =
        (8 * (t.loss(i, h) - t.loss(i, -h)) - (t.loss(i, 2 * h) - t.loss(i, -2 * h))) / (12 * h);
    ExplainCheck c;
    c.tensor = t.name;
    c.shape = t.shape;
    c.index = i;
    c.analytic = t.analytic[static_cast<size_t>(i)];
    c.numeric = numeric;
    scale = std::max({scale, std::abs(c.analytic), std::abs(c.numeric)});
    rows.push_back(c);
  }
  for (auto& c : rows) {
    const double diff = std::abs(c.analytic - c.numeric);
    c.rel_error = scale > 0 ? diff / scale : diff;
    c.pass = std::isfinite(c.rel_error) && c.rel_error < o.tolerance;
    out.push_back(c);
  }
}

}  // namespace

models::Batch source_batch(const ExplainModel& m) {
  const auto s = static_cast<int64_t>(m.source.size());
  if (s == 0) throw ValueError("explain: the source sentence has no words");
  models::Batch batch;
  batch.size = 1;
  batch.src_len = s;
  for (const auto& w : m.source) batch.src.push_back(m.src.id(w));
  batch.src_lengths = {s};
  return batch;
}

// ---------------------------------------------------------------------------------------------

ExplainModel tiny_model(const Seq2SeqConfig& shape, std::vector<std::string> source,
                        std::vector<std::string> reference) {
  if (source.empty()) throw ValueError("explain: the source sentence has no words");
  if (reference.empty()) throw ValueError("explain: the reference translation has no words");
  ExplainModel m;
  for (const auto& w : source) m.src.add(w);
  for (const auto& w : reference) m.tgt.add(w);
  Seq2SeqConfig c = shape;
  c.src_vocab = m.src.size();
  c.tgt_vocab = m.tgt.size();
  c.dropout = 0;
  c.fused_attention = false;  // show every elementary op of the attention step
  m.model = std::make_unique<Seq2Seq>(c, DType::f64);
  m.model->eval();
  m.source = std::move(source);
  m.reference = std::move(reference);
  return m;
}

ExplainModel trained_model(const std::string& path, const std::string& source) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? path + "/model.safetensors" : path;
  models::SavedModel saved = models::load_model(file);
  ExplainModel m;
  Seq2SeqConfig c = saved.model->config();
  c.dropout = 0;
  c.fused_attention = false;  // show every elementary op of the attention step
  m.model = std::make_unique<Seq2Seq>(c, DType::f64);
  // The checks run in float64: the trained float32 values, widened.
  auto from = saved.model->named_parameters();
  auto to = m.model->named_parameters();
  for (size_t i = 0; i < to.size(); ++i)
    to[i].second->value.copy_from(from[i].second->value.to(DType::f64));
  m.model->eval();
  m.src = std::move(saved.src);
  m.tgt = std::move(saved.tgt);
  m.preprocess = saved.preprocess;
  m.source = saved.preprocess.tokenize_source(source);
  if (m.source.empty())
    throw ValueError(fmt::format("explain: the source '{}' has no tokens after preprocessing ({})",
                                 source, saved.preprocess.describe()));
  return m;
}

std::vector<std::string> explain_target(ExplainModel& m) {
  if (!m.reference.empty()) return m.reference;
  // The model's own greedy translation, as decoding makes it (never <pad> or <bos>).
  Seq2Seq& model = *m.model;
  models::Batch batch = source_batch(m);
  if (model.is_transformer()) {
    const auto hyps = models::greedy_decode(model, batch);  // kept: the loop reads into it
    return m.tgt.decode(hyps.front().front().tokens);
  }
  Tape tape;
  NoGrad no_grad(tape);
  nn::AttentionMemory memory = model.encode(tape, batch);
  models::Decoder& dec = model.decoder();
  models::DecoderState state = dec.start(tape, memory.summary);
  std::vector<std::string> out;
  int32_t previous = Vocab::kBos;
  const int64_t limit = 2 * batch.src_len + 5;
  for (int64_t k = 0; k < limit; ++k) {
    models::DecoderStep st =
        dec.step(tape, memory, state, std::span<const int32_t>(&previous, 1), k, model.rng());
    const Tensor z = dec.logits(tape, st.features, model.rng()).value();
    int32_t best = Vocab::kEos;
    for (int32_t j = Vocab::kEos + 1; j < z.numel(); ++j)
      if (z.at(j) > z.at(best)) best = j;
    if (best == Vocab::kEos) break;
    out.push_back(m.tgt.token(best));
    previous = best;
  }
  return out;
}

std::vector<double> sentence_keys_gradient(ExplainModel& m,
                                           const std::vector<std::string>& target) {
  Seq2Seq& model = *m.model;
  models::Batch batch = source_batch(m);
  Tape tape;
  tape.set_keep_grads(true);  // h_j is an inner node
  nn::AttentionMemory memory = model.encode(tape, batch);
  models::Decoder& dec = model.decoder();
  models::DecoderState state = dec.start(tape, memory.summary);
  Var loss;
  int32_t previous = Vocab::kBos;
  for (size_t k = 0; k <= target.size(); ++k) {
    const int32_t y = k < target.size() ? m.tgt.id(target[k]) : Vocab::kEos;
    models::DecoderStep st = dec.step(tape, memory, state, std::span<const int32_t>(&previous, 1),
                                      static_cast<int64_t>(k), model.rng());
    Var l = ops::cross_entropy(dec.logits(tape, st.features, model.rng()),
                               std::span<const int32_t>(&y, 1), Vocab::kPad);
    loss = k == 0 ? l : loss + l;
    previous = y;
  }
  model.zero_grad();
  tape.backward(loss);
  model.zero_grad();  // the parameters' gradients are not this function's result
  const Tensor g = tape.grad(memory.keys);
  return g.defined() ? g.to_vector() : std::vector<double>(memory.keys.numel(), 0.0);
}

Explanation explain_step(ExplainModel& m, const std::vector<std::string>& target, int64_t step,
                         const CheckOptions& opt) {
  Seq2Seq& model = *m.model;
  const Seq2SeqConfig& cfg = model.config();
  if (model.dtype() != DType::f64)
    throw DTypeError("explain: the model must be float64 (the finite differences need it)");
  Explanation e;
  e.model = cfg.summary();
  e.config_json = cfg.to_json();
  e.attention = nn::attention_name(cfg.attention);
  e.decoder = models::decoder_name(cfg.decoder);
  e.cell = nn::cell_name(cfg.cell);
  e.src_vocab = m.src.tokens();
  e.tgt_vocab = m.tgt.tokens();
  e.eps = opt.eps;
  e.tolerance = opt.tolerance;
  e.check_max = opt.max_elements;

  models::Batch batch = source_batch(m);
  for (const auto& w : m.source) e.source.push_back(m.src.contains(w) ? w : "<unk>");
  const auto s = static_cast<int64_t>(m.source.size());

  // The target sentence, teacher forced: step k is fed y_(k-1) (<bos> first) and scores y*_k,
  // the target's k-th word, or <eos> after the last.
  check_teacher_forced(m.tgt, target, step);
  e.step = step;
  e.target_sentence = target;
  std::vector<int32_t> inputs{Vocab::kBos};
  for (int64_t k = 0; k < step; ++k) inputs.push_back(m.tgt.id(target[static_cast<size_t>(k)]));
  e.previous = step == 0 ? "<bos>" : target[static_cast<size_t>(step - 1)];
  e.target =
      step < static_cast<int64_t>(target.size()) ? target[static_cast<size_t>(step)] : "<eos>";
  e.target_id = m.tgt.id(e.target);

  // The recorded pass.
  model.zero_grad();
  Tape tape;
  tape.set_keep_grads(true);
  nn::name_parameters(tape, model);
  nn::AttentionMemory memory = model.encode(tape, batch);
  std::vector<int32_t> begins;
  StepVars v = run_steps(tape, model, memory, inputs, e.target_id, &begins);
  tape.backward(v.loss);
  e.loss = v.loss.value().item();

  // The output distribution's most likely words.
  {
    const Tensor z = v.logits.value();
    std::vector<std::pair<double, int32_t>> p;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < z.numel(); ++j) mx = std::max(mx, z.at(j));
    for (int64_t j = 0; j < z.numel(); ++j) {
      p.emplace_back(std::exp(z.at(j) - mx), static_cast<int32_t>(j));
      sum += p.back().first;
    }
    std::sort(p.begin(), p.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    // <pad> and <bos> are in the softmax but never written: left out of the list.
    for (size_t k = 0; k < p.size() && e.top.size() < 5; ++k)
      if (p[k].second >= Vocab::kEos)
        e.top.emplace_back(m.tgt.token(p[k].second), p[k].first / sum);
  }

  // The nodes of this step, and the symbols of the equations on them.
  const int32_t first = begins.back();
  FocusNodes& f = e.focus;
  f.keys = memory.keys.node();
  f.summary = memory.summary.node();
  f.keys_proj = memory.precomputed.node();
  f.query = v.query.node();
  f.weights = v.weights.node();
  f.logits = v.logits.node();
  f.loss = v.loss.node();
  for (size_t i = static_cast<size_t>(first); i < tape.size(); ++i) {
    const Node& n = tape.node(i);
    const std::string& region = tape.region_name(n.region);
    if (region == "attention.softmax" && std::string_view(n.op->name) == "softmax") {
      f.softmax = static_cast<int32_t>(i);
      f.scores = tape.inputs(n)[0];
    }
    if (region == "attention.context") f.context = static_cast<int32_t>(i);
  }
  if (cfg.attention == nn::AttentionKind::none) f.context = f.summary;
  const bool bahdanau = cfg.decoder == models::DecoderKind::bahdanau;
  auto label = [&](int32_t node, const char* name) {
    if (node >= 0) tape.set_label(node, name);
  };
  label(f.keys, "h_j");
  label(f.summary, "summary");
  label(f.keys_proj, cfg.attention == nn::AttentionKind::cosine     ? "|h_j|"
                     : cfg.attention == nn::AttentionKind::bahdanau ? "U h_j"
                                                                    : "W_h h_j");
  label(f.query, bahdanau ? "s_(t-1)" : "h_t");
  label(f.scores, "e");
  if (f.softmax != f.weights) label(f.softmax, "softmax(e)");
  label(f.weights, "a");
  if (cfg.attention != nn::AttentionKind::none) label(f.context, "c");
  label(f.logits, "z");
  label(f.loss, "L");
  if (!bahdanau) label(v.features.node(), "h~_t");

  // Gather the tape: each node with the step it was recorded in (-1 before the first step, and
  // for parameters, which every step reads).
  const int32_t last = v.loss.node();
  for (int32_t i = 0; i <= last; ++i) {
    ExplainNode en;
    en.passed = passed_norms(tape, i);
    const Node& n = tape.node(static_cast<size_t>(i));
    en.index = i;
    en.op = n.op->name;
    en.math = n.op->math;
    en.region = tape.region_name(n.region);
    en.label = tape.display_name(i);
    for (int32_t in : tape.inputs(n)) en.inputs.push_back(in);
    en.shape = dims(n.value.shape());
    en.value = n.value.to_vector();
    if (n.grad.defined()) en.grad = n.grad.to_vector();
    if (n.op->backward)
      for (size_t k = 0; k < begins.size(); ++k)
        if (i >= begins[k]) en.step = static_cast<int>(k);
    e.nodes.push_back(std::move(en));
  }
  for (const auto& [name, p] : model.named_parameters()) {
    ExplainParameter ep;
    ep.name = name;
    ep.shape = dims(p->shape());
    ep.value = p->value.to_vector();
    ep.grad = p->grad.to_vector();
    ep.attention = name.rfind("decoder.attention.", 0) == 0;
    for (size_t i = 0; i < tape.size(); ++i)
      if (tape.node(i).op == &kParamOp && tape.node(i).value.shares_storage(p->value))
        ep.node = static_cast<int32_t>(i);
    e.parameters.push_back(std::move(ep));
  }
  e.equations = group_equations(cfg, s, step);
  e.chain = attention_chain(e);

  // The check. The encoder's output is fixed (no attention parameter changes it), so moving an
  // attention parameter or h_j reruns only the attention's memory, the decoder's steps and L_t.
  Tensor keys = memory.keys.value().clone();
  Tensor summary = memory.summary.value().clone();
  auto loss = [&] {
    Tape t;
    NoGrad no_grad(t);
    nn::AttentionMemory mem =
        model.decoder().attention().prepare(t, Var(keys), batch.src_lengths, Var(summary));
    return run_steps(t, model, mem, inputs, e.target_id).loss.value().item();
  };
  std::vector<Checked> checked;
  for (const auto& [name, p] : model.named_parameters())
    if (name.rfind("decoder.attention.", 0) == 0)
      checked.push_back({name, dims(p->shape()), p->grad.to_vector(), moving(&p->value, loss)});
  // The gradient into the encoder states: through the attention alone (the summary reaches the
  // decoder by another path), or for `none` the summary, which is its context.
  const bool none = cfg.attention == nn::AttentionKind::none;
  const Var& h = none ? memory.summary : memory.keys;
  const Tensor& hg = tape.grad(h);
  checked.push_back({none ? kSummaryName : kKeysName, dims(h.shape()),
                     hg.defined() ? hg.to_vector() : std::vector<double>(h.numel(), 0.0),
                     moving(none ? &summary : &keys, loss)});
  // This step's scores, weights and context: each element moved as the whole pass is recorded
  // again (the same ops in the same order, so the node has the same index), through the tape's
  // record hook.
  auto inner = [&](int32_t node, const char* name) {
    if (node < 0) return;
    const Node& n = tape.node(static_cast<size_t>(node));
    Checked c{name, dims(n.value.shape()),
              n.grad.defined() ? n.grad.to_vector() : std::vector<double>(n.value.numel(), 0.0),
              [&, node](int64_t element, double delta) {
                Tape t;
                t.set_record_hook([&](int32_t id, Tensor& value) {
                  if (id != node) return;
                  value = value.clone();
                  value.set(element, value.at(element) + delta);
                });
                nn::AttentionMemory mem = model.encode(t, batch);
                return run_steps(t, model, mem, inputs, e.target_id).loss.value().item();
              }};
    checked.push_back(std::move(c));
  };
  if (!none) {
    inner(f.scores, kScoresName);
    inner(f.weights, kWeightsName);
    inner(f.context, kContextName);
  }
  for (const auto& c : checked) check_tensor(c, opt, e.checks);
  e.story = step_story(e);
  return e;
}

}  // namespace tapestry::cli
