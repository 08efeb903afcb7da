// Explain for the Transformer in words, as text tables per layer and head, and as JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tools/explain_transformer.h"

namespace tapestry::cli {

namespace {

// Row r of a head tensor.
std::vector<double> row(const std::vector<double>& x, const std::vector<int64_t>& shape,
                        int64_t r) {
  const int64_t cols = shape[1];
  return {x.begin() + r * cols, x.begin() + (r + 1) * cols};
}

size_t argmax(const std::vector<double>& v, size_t n) {
  size_t best = 0;
  for (size_t j = 1; j < n && j < v.size(); ++j)
    if (v[j] > v[best]) best = j;
  return best;
}

std::string pct(double w) {
  return fmt::format("{:.0f}%", 100 * w);
}

// The keys a query at step t may see: every source word, or decoder positions 0..t.
size_t visible(const HeadExplanation& a, int64_t t) {
  return a.cross ? a.keys.size() : static_cast<size_t>(t + 1);
}

}  // namespace

std::vector<std::string> transformer_story(const TransformerExplanation& e) {
  std::vector<std::string> story;
  const int64_t t = e.step;
  {
    std::string s = fmt::format(
        "Step {} reads '{}' and is scored on writing '{}': the model gives it p = {:.3g}, so L = "
        "-log p = {:.3g}.",
        t, e.previous, e.target, std::exp(-e.loss), e.loss);
    if (!e.top.empty())
      s += e.top.front().first == e.target ? " It is the model's first choice."
                                           : fmt::format(" The model prefers '{}' (p = {:.3g}).",
                                                         e.top.front().first, e.top.front().second);
    story.push_back(s);
  }
  const int last = static_cast<int>(e.layers) - 1;
  const auto heads = static_cast<int>(e.heads);
  // Where the last layer's cross-attention looks, head by head, and whether the heads agree.
  {
    std::vector<size_t> picks;
    std::vector<double> mean(e.source.size(), 0.0);
    std::string s =
        fmt::format("In the last layer ({}) the cross-attention of this step", last + 1);
    for (int h = 0; h < heads; ++h) {
      const HeadExplanation& a = e.head(last, true, h);
      const std::vector<double> w = row(a.weights.value, a.weights.shape, t);
      const size_t j = argmax(w, w.size());
      picks.push_back(j);
      for (size_t k = 0; k < mean.size(); ++k) mean[k] += w[k] / heads;
      s += fmt::format("{} head {} on '{}' ({}, position {})",
                       h == 0 ? " puts most weight of" : ",", h + 1, e.source[j], pct(w[j]), j);
    }
    story.push_back(s + ".");
    const size_t best = argmax(mean, mean.size());
    const auto agree = std::count(picks.begin(), picks.end(), best);
    story.push_back(
        agree == heads
            ? fmt::format("All {} heads agree on '{}': averaged over heads it gets {} of the "
                          "weight.",
                          heads, e.source[best], pct(mean[best]))
            : fmt::format("{}: {} of {} pick '{}', which gets {} of the weight averaged over "
                          "heads; the others look elsewhere.",
                          2 * agree > heads ? "Most heads agree" : "The heads do not agree", agree,
                          heads, e.source[best], pct(mean[best])));
  }
  // How much each layer's masked self-attention looks back.
  if (t == 0) {
    story.push_back(
        "At step 0 the masked self-attention sees only <bos>: every head puts all its weight on "
        "it.");
  } else {
    std::string s = "The masked self-attention (mean over heads) puts";
    for (int l = 0; l <= last; ++l) {
      double earlier = 0;
      for (int h = 0; h < heads; ++h) {
        const HeadExplanation& a = e.head(l, false, h);
        const std::vector<double> w = row(a.weights.value, a.weights.shape, t);
        for (int64_t j = 0; j < t; ++j) earlier += w[static_cast<size_t>(j)] / heads;
      }
      s += l == 0 ? fmt::format(" {} of its weight on earlier target positions in layer 1",
                                pct(earlier))
                  : fmt::format("{} {} in layer {}", l == last ? " and" : ",", pct(earlier), l + 1);
    }
    story.push_back(s + fmt::format(" (the rest on position {} itself, '{}').", t, e.previous));
  }
  // Where the gradient goes: the last layer's head contexts and source values.
  {
    int strongest = 0;
    double top = -1;
    std::vector<double> dv(e.source.size(), 0.0);
    for (int h = 0; h < heads; ++h) {
      const HeadExplanation& a = e.head(last, true, h);
      const double g = norm(row(a.context.grad, a.context.shape, t));
      if (g > top) {
        top = g;
        strongest = h;
      }
      for (size_t j = 0; j < dv.size(); ++j) {
        const std::vector<double> r = row(a.v.grad, a.v.shape, static_cast<int64_t>(j));
        dv[j] += norm(r) * norm(r);
      }
    }
    for (double& x : dv) x = std::sqrt(x);
    const size_t j = argmax(dv, dv.size());
    story.push_back(fmt::format(
        "The loss reaches the last layer's cross-attention hardest through head {} (|dL/dc_t| = "
        "{}); of the source words, the values v_j of '{}' (position {}) get the largest gradient "
        "over the heads (|dL/dv_j| = {}).",
        strongest + 1, num(top), e.source[j], j, num(dv[j])));
    // The softmax's rule, on that head: a score rises under descent exactly when its dL/da_j is
    // below the weighted mean.
    const HeadExplanation& a = e.head(last, true, strongest);
    const std::vector<double> w = row(a.weights.value, a.weights.shape, t);
    const std::vector<double> da = row(a.weights.grad, a.weights.shape, t);
    const std::vector<double> de = row(a.scores.grad, a.scores.shape, t);
    double mean = 0;
    for (size_t k = 0; k < w.size(); ++k) mean += w[k] * da[k];
    const size_t up = std::min_element(de.begin(), de.end()) - de.begin();
    story.push_back(fmt::format(
        "Through that head's softmax, dL/de_j = a_j (dL/da_j {} {}), {} being the weighted mean "
        "sum_k a_k dL/da_k: descent would raise the score of '{}' most (dL/de_j = {}).",
        mean < 0 ? "+" : "-", num(std::abs(mean)), num(mean), e.source[up], num(de[up])));
  }
  if (!e.checks.empty()) {
    size_t failed = 0;
    for (const auto& c : e.checks) failed += c.pass ? 0 : 1;
    story.push_back(
        failed == 0
            ? fmt::format("The finite-difference check agrees on all {} elements checked of q, "
                          "k, v, scores, weights and context in every head (largest relative "
                          "error {:.1e}): the tape's gradients are right.",
                          e.checks.size(), e.worst_error())
            : fmt::format("The finite-difference check FAILS on {} of {} elements (largest "
                          "relative error {:.1e}).",
                          failed, e.checks.size(), e.worst_error()));
  }
  return story;
}

namespace {

void heading(std::string& out, const std::string& title) {
  std::string line = "-- " + title + " ";
  if (line.size() < 100) line += std::string(100 - line.size(), '-');
  out += line + "\n";
}

// A vector printed 8 values a line under a label, or summarised when longer than `full`.
void vector_lines(std::string& out, const std::string& label, const std::vector<double>& v,
                  int64_t full) {
  if (static_cast<int64_t>(v.size()) > full) {
    out += fmt::format("   {:<14} {}\n", label, summary_text(v));
    return;
  }
  for (size_t i = 0; i < v.size(); i += 8) {
    std::string line = fmt::format("   {:<14}", i == 0 ? label : "");
    for (size_t k = i; k < std::min(v.size(), i + 8); ++k) line += fmt::format(" {:>9}", num(v[k]));
    out += line + "\n";
  }
}

std::string clip(const std::string& word, size_t n) {
  return word.size() <= n ? word : word.substr(0, n - 1) + "~";
}

}  // namespace

std::string render_transformer_text(const TransformerExplanation& e, const TextOptions& o) {
  std::string out;
  const int64_t t = e.step;
  out += "tapestry explain: transformer, per decoder layer and head (float64)\n";
  out += fmt::format("  model   {}\n", e.model);
  out += fmt::format("  source  {}  (S = {})\n", joined(e.source), e.source.size());
  out += fmt::format("  inputs  {}  (the decoder's positions 0..{})\n", joined(e.inputs), t);
  out += fmt::format("  step    t = {}, previous token {}, target y* = {} (id {})\n", t, e.previous,
                     e.target, e.target_id);
  out += fmt::format("  loss    L = {}\n", num(e.loss));
  std::string top;
  for (const auto& [w, p] : e.top) top += fmt::format("{}{} {:.3g}", top.empty() ? "" : ", ", w, p);
  out += fmt::format("  output  the most likely words: {}\n\n", top);
  for (const auto& s : e.story)
    for (const auto& line : wrap(s, "   ", "     ")) out += line + "\n";
  out += "\n";

  if (o.forward || o.backward) {
    for (const auto& line :
         wrap(fmt::format("Per decoder layer and head (d_k = {}), at query position t = {}: q_t, "
                          "the scores e_j = q_t . k_j / sqrt(d_k), the weights a = softmax(e) "
                          "(self-attention: keys j <= t), the context c_t = sum_j a_j v_j, and "
                          "dL/d of each.",
                          e.d_k, t),
              "   ", "   "))
      out += line + "\n";
    for (const auto& a : e.attention) {
      heading(out,
              fmt::format("decoder layer {}, {}, head {} of {}", a.layer + 1,
                          a.cross ? "cross-attention over the source" : "masked self-attention",
                          a.head + 1, e.heads));
      vector_lines(out, "q_t", row(a.q.value, a.q.shape, t), o.full_max);
      vector_lines(out, "dL/dq_t", row(a.q.grad, a.q.shape, t), o.full_max);
      out += fmt::format("   {:>3} {:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "j",
                         "key", "e_j", "dL/de_j", "a_j", "dL/da_j", "|k_j|", "|dL/dk_j|", "|v_j|",
                         "|dL/dv_j|");
      const std::vector<double> ev = row(a.scores.value, a.scores.shape, t);
      const std::vector<double> eg = row(a.scores.grad, a.scores.shape, t);
      const std::vector<double> wv = row(a.weights.value, a.weights.shape, t);
      const std::vector<double> wg = row(a.weights.grad, a.weights.shape, t);
      for (size_t j = 0; j < visible(a, t); ++j) {
        const auto jj = static_cast<int64_t>(j);
        out += fmt::format(
            "   {:>3} {:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", j,
            clip(a.keys[j], 12), num(ev[j]), num(eg[j]), num(wv[j]), num(wg[j]),
            num(norm(row(a.k.value, a.k.shape, jj))), num(norm(row(a.k.grad, a.k.shape, jj))),
            num(norm(row(a.v.value, a.v.shape, jj))), num(norm(row(a.v.grad, a.v.shape, jj))));
      }
      vector_lines(out, "c_t", row(a.context.value, a.context.shape, t), o.full_max);
      vector_lines(out, "dL/dc_t", row(a.context.grad, a.context.shape, t), o.full_max);
      if (e.d_k * static_cast<int64_t>(visible(a, t)) <= o.full_max * 2) {
        for (size_t j = 0; j < visible(a, t); ++j) {
          const auto jj = static_cast<int64_t>(j);
          const std::string w = clip(a.keys[j], 8);
          vector_lines(out, fmt::format("k_{} {}", j, w), row(a.k.value, a.k.shape, jj), 8);
          vector_lines(out, fmt::format("dL/dk_{}", j), row(a.k.grad, a.k.shape, jj), 8);
          vector_lines(out, fmt::format("v_{} {}", j, w), row(a.v.value, a.v.shape, jj), 8);
          vector_lines(out, fmt::format("dL/dv_{}", j), row(a.v.grad, a.v.shape, jj), 8);
        }
      }
    }
    out += "\n";
  }

  if (o.check) {
    heading(out, "FINITE-DIFFERENCE CHECK");
    for (const auto& line :
         wrap(fmt::format(
                  "Every head's q, k, v, scores, weights and context in every decoder "
                  "layer: the tape's gradient beside (8 (L(x+h) - L(x-h)) - (L(x+2h) - "
                  "L(x-2h))) / 12h with h = {}, x moved where it is recorded and the "
                  "whole pass run again, in float64; relative error = |analytic - "
                  "numeric| / the head tensor's largest |gradient|; PASS below {}.{}",
                  e.eps, e.tolerance,
                  e.check_max > 0
                      ? fmt::format(" The {} elements of largest gradient in each.", e.check_max)
                      : ""),
              "   ", "   "))
      out += line + "\n";
    if (o.check_rows)
      out += fmt::format("     {:<30} {:<7} {:>14} {:>14} {:>10}  {}\n", "tensor", "element",
                         "analytic", "numeric", "rel. error", "result");
    size_t failed = 0;
    for (const auto& c : e.checks) {
      if (o.check_rows)
        out += fmt::format("     {:<30} {:<7} {:>14.6e} {:>14.6e} {:>10.1e}  {}\n", c.tensor,
                           element_text(c.shape, c.index), c.analytic, c.numeric, c.rel_error,
                           c.pass ? "PASS" : "FAIL");
      failed += c.pass ? 0 : 1;
    }
    out += fmt::format("   {} elements checked: {} pass, {} fail; largest relative error {:.1e}\n",
                       e.checks.size(), e.checks.size() - failed, failed, e.worst_error());
  }
  return out;
}

std::string render_transformer_json(const TransformerExplanation& e) {
  using nlohmann::json;
  auto tensor = [](const HeadTensor& x) {
    return json{{"shape", x.shape}, {"value", x.value}, {"grad", x.grad}};
  };
  json heads = json::array();
  for (const auto& a : e.attention)
    heads.push_back({{"layer", a.layer},
                     {"attention", a.cross ? "cross" : "self"},
                     {"head", a.head},
                     {"keys", a.keys},
                     {"q", tensor(a.q)},
                     {"k", tensor(a.k)},
                     {"v", tensor(a.v)},
                     {"scores", tensor(a.scores)},
                     {"weights", tensor(a.weights)},
                     {"context", tensor(a.context)}});
  json params = json::object();
  for (const auto& p : e.parameters) params[p.name] = {{"shape", p.shape}, {"grad", p.grad}};
  json check = json::array();
  for (const auto& c : e.checks)
    check.push_back({{"tensor", c.tensor},
                     {"shape", c.shape},
                     {"index", c.index},
                     {"analytic", c.analytic},
                     {"numeric", c.numeric},
                     {"rel_error", c.rel_error},
                     {"pass", c.pass}});
  json out = {{"arch", "transformer"},
              {"config", json::parse(e.config_json)},
              {"model", e.model},
              {"src_vocab", e.src_vocab},
              {"tgt_vocab", e.tgt_vocab},
              {"source", e.source},
              {"inputs", e.inputs},
              {"target_sentence", e.target_sentence},
              {"step", e.step},
              {"previous", e.previous},
              {"target", e.target},
              {"target_id", e.target_id},
              {"loss", e.loss},
              {"top", e.top},
              {"story", e.story},
              {"heads", heads},
              {"parameters", params},
              {"check", check},
              {"eps", e.eps},
              {"tolerance", e.tolerance},
              {"check_max", e.check_max},
              {"worst_rel_error", e.worst_error()}};
  return out.dump(1) + "\n";
}

}  // namespace tapestry::cli
