// Explain across a sentence: every step's attention and the gradient each sends back to each
// encoder state, whose sum is the gradient of the sentence's loss; as a table, and in words.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/explain.h"

namespace tapestry::cli {

AcrossSteps across_sentence(std::vector<std::string> source, std::vector<std::string> written,
                            std::vector<double> losses, std::vector<std::vector<double>> weights,
                            const std::vector<std::vector<double>>& step_grads,
                            const std::vector<double>& sentence_grad, const std::string& states) {
  AcrossSteps a;
  a.source = std::move(source);
  a.written = std::move(written);
  a.losses = std::move(losses);
  a.weights = std::move(weights);
  const size_t S = a.source.size();
  if (a.written.empty()) return a;
  std::vector<double> sum(sentence_grad.size(), 0.0);
  for (const auto& g : step_grads) {
    std::vector<double> norms(S, 0.0);
    if (S > 0 && !g.empty() && g.size() == sum.size()) {
      const size_t K = g.size() / S;
      for (size_t j = 0; j < S; ++j) norms[j] = norm(std::span<const double>(g).subspan(j * K, K));
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
    }
    a.dh_norms.push_back(norms);
  }
  const size_t K = S ? sum.size() / S : 0;
  for (size_t j = 0; j < S; ++j)
    a.total_norms.push_back(norm(std::span<const double>(sum).subspan(j * K, K)));
  for (size_t i = 0; i < sum.size(); ++i)
    a.sum_difference = std::max(a.sum_difference, std::abs(sum[i] - sentence_grad[i]));

  // In words: where the attention jumped, which word the loss reached most, the sum's check.
  double total = 0;
  for (double l : a.losses) total += l;
  a.story.push_back(fmt::format(
      "The sentence's loss is the sum of its {} steps' losses: L = {:.4g} (mean {:.3g} a step).",
      a.losses.size(), total, total / static_cast<double>(a.losses.size())));
  if (a.weights.size() == a.written.size() && S > 1) {
    // The focus (the largest weight) moving from step to step: on by one word is the diagonal of
    // a monotone alignment; staying and jumping are what reordering looks like.
    size_t diagonal = 0, stays = 0;
    std::string jumps;
    auto focus = [&](size_t t) {
      return static_cast<long>(std::max_element(a.weights[t].begin(), a.weights[t].end()) -
                               a.weights[t].begin());
    };
    for (size_t t = 1; t < a.weights.size(); ++t) {
      const long from = focus(t - 1), to = focus(t);
      if (to == from + 1) {
        ++diagonal;
      } else if (to == from) {
        ++stays;
      } else {
        jumps +=
            fmt::format("{}at step {}, writing '{}', it jumps {} {} from '{}' to '{}'",
                        jumps.empty() ? "" : "; ", t, a.written[t], to > from ? "ahead" : "back",
                        std::labs(to - from), a.source[from], a.source[to]);
      }
    }
    std::string s = fmt::format(
        "Step by step, the focus of the attention (its largest weight) moves on by one source "
        "word {} time{} and stays {} time{}",
        diagonal, diagonal == 1 ? "" : "s", stays, stays == 1 ? "" : "s");
    s += jumps.empty() ? ", and never jumps." : ": " + jumps + ".";
    a.story.push_back(s);
  }
  if (!a.total_norms.empty() && K > 0) {
    const auto j = static_cast<size_t>(
        std::max_element(a.total_norms.begin(), a.total_norms.end()) - a.total_norms.begin());
    size_t from = 0;
    for (size_t t = 1; t < a.dh_norms.size(); ++t)
      if (a.dh_norms[t][j] > a.dh_norms[from][j]) from = t;
    a.story.push_back(fmt::format(
        "{} is the sum of what every step sent back to it: the loss reaches "
        "'{}' hardest (|dL/dh_j| = {:.3g}), most of it from step {}, which writes '{}'. Summed "
        "over the steps, the gradients equal one backward pass of the whole sentence's loss to "
        "{:.1e}.",
        states, a.source[j], a.total_norms[j], from, a.written[from], a.sum_difference));
  }
  return a;
}

AcrossSteps across_steps(const std::vector<Explanation>& steps,
                         const std::vector<double>& sentence_dh) {
  if (steps.empty()) return {};
  std::vector<std::string> written;
  std::vector<double> losses;
  std::vector<std::vector<double>> weights, grads;
  const size_t n = sentence_dh.size();
  for (const Explanation& e : steps) {
    written.push_back(e.target);
    losses.push_back(e.loss);
    if (e.focus.weights >= 0)
      weights.push_back(e.nodes[static_cast<size_t>(e.focus.weights)].value);
    const ExplainNode* h =
        e.focus.keys >= 0 ? &e.nodes[static_cast<size_t>(e.focus.keys)] : nullptr;
    grads.push_back(h && h->grad.size() == n ? h->grad : std::vector<double>{});
  }
  return across_sentence(steps.front().source, std::move(written), std::move(losses),
                         std::move(weights), grads, sentence_dh, "Each h_j's gradient");
}

std::string render_across_text(const AcrossSteps& a, bool tables) {
  std::string out = "\n== ACROSS THE SENTENCE " + std::string(77, '=') + "\n";
  for (const auto& s : a.story)
    for (const auto& l : wrap(s, "   ", "     ")) out += l + "\n";
  if (!tables) return out;
  // Tables of at most 7 steps a block, so a line stays within 100 columns.
  auto table = [&](const std::string& title, const std::vector<std::vector<double>>& rows,
                   const std::vector<double>* last) {
    out += "\n   " + title + "\n";
    for (size_t t0 = 0; t0 < a.written.size(); t0 += 7) {
      const size_t t1 = std::min(a.written.size(), t0 + 7);
      std::string head = fmt::format("   {:<16}", "source \\ step");
      for (size_t t = t0; t < t1; ++t) head += fmt::format(" {:>10}", fmt::format("t={}", t));
      if (last && t1 == a.written.size()) head += fmt::format(" {:>10}", "sum");
      out += head + "\n";
      std::string words = fmt::format("   {:<16}", "(writes)");
      for (size_t t = t0; t < t1; ++t) words += fmt::format(" {:>10}", a.written[t].substr(0, 10));
      out += words + "\n";
      for (size_t j = 0; j < a.source.size(); ++j) {
        std::string line = fmt::format("   {:<16}", a.source[j].substr(0, 16));
        for (size_t t = t0; t < t1; ++t) line += fmt::format(" {:>10}", num(rows[t][j]));
        if (last && t1 == a.written.size()) line += fmt::format(" {:>10}", num((*last)[j]));
        out += line + "\n";
      }
    }
  };
  if (!a.weights.empty()) table("a_j, the attention of each step:", a.weights, nullptr);
  table("|dL_t/dh_j|, the gradient each step sends to each encoder state; sum: |sum_t dL_t/dh_j|",
        a.dh_norms, &a.total_norms);
  return out;
}

}  // namespace tapestry::cli
