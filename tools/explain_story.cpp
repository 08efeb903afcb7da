// Explain in words: sentences written from one step's actual values (what the model wrote, where
// it attended, why each dL/da_j has its sign, which parameter's gradient is largest, the check),
// and, over a whole sentence, where the attention jumped and which source word the loss reached.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/explain.h"

namespace tapestry::cli {

namespace {

size_t argmax(std::span<const double> v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::string percent(double p) {
  return p >= 0.995 ? fmt::format("{:.1f}%", 100 * p) : fmt::format("{:.0f}%", 100 * p);
}

std::string word_at(const Explanation& e, size_t j) {
  return fmt::format("'{}' (position {})", e.source[j], j);
}

// The weights of the step before the explained one, read off its nodes on the tape.
std::vector<double> previous_weights(const Explanation& e) {
  if (e.step == 0 || e.focus.weights < 0) return {};
  const ExplainNode* now = node_at(e, e.focus.weights);
  for (const auto& n : e.nodes)  // the earlier step's node of the same op in the same region
    if (n.step == e.step - 1 && n.region == now->region && n.op == now->op && n.shape == now->shape)
      return n.value;
  return {};
}

std::string moved(const Explanation& e, size_t from, size_t to) {
  const auto d = static_cast<long>(to) - static_cast<long>(from);
  if (d == 0) return fmt::format("It stays on {} from the step before.", word_at(e, to));
  if (d == 1) return fmt::format("It moves on by one word from {}.", word_at(e, from));
  return fmt::format("It jumps {} {} position{} from {}, the step before's focus.",
                     d > 0 ? "ahead" : "back", std::labs(d), std::labs(d) == 1 ? "" : "s",
                     word_at(e, from));
}

}  // namespace

std::vector<std::string> step_story(const Explanation& e) {
  std::vector<std::string> story;
  // What the step writes.
  double p_target = 0;
  for (const auto& [w, p] : e.top)
    if (w == e.target) p_target = p;
  if (p_target == 0) p_target = std::exp(-e.loss);
  std::string s = fmt::format(
      "Step {} reads '{}' and is scored on writing '{}': the model gives it p = {:.3g}, so "
      "L = -log p = {:.3g}.",
      e.step, e.previous, e.target, p_target, e.loss);
  if (!e.top.empty() && e.top.front().first != e.target)
    s += fmt::format(" It prefers '{}' (p = {:.3g}).", e.top.front().first, e.top.front().second);
  else if (!e.top.empty())
    s += " It is the model's first choice.";
  story.push_back(s);

  const ExplainNode* a = node_at(e, e.focus.weights);
  const ExplainNode* c = node_at(e, e.focus.context);
  const ExplainNode* h = node_at(e, e.focus.keys);
  const ExplainNode* sc = node_at(e, e.focus.scores);
  if (!a || !sc || !h || e.source.empty()) {
    story.push_back(
        "There are no attention weights: with the `none` variant the context is the encoder's "
        "summary at every step, so the loss reaches the source only through that one vector.");
  } else {
    // Where the weight went.
    const size_t best = argmax(a->value);
    std::vector<size_t> order(a->value.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return a->value[x] > a->value[y]; });
    s = fmt::format("Attention puts {} of its weight on {}", percent(a->value[best]),
                    word_at(e, best));
    if (order.size() > 1 && a->value[order[1]] >= 0.1)
      s += fmt::format(" and {} on {}", percent(a->value[order[1]]), word_at(e, order[1]));
    s += ".";
    const std::vector<double> before = previous_weights(e);
    if (!before.empty()) s.append(" ").append(moved(e, argmax(before), best));
    story.push_back(s);

    // Why each dL/da_j has its sign: dL/da_j = dL/dc . h_j, then the softmax Jacobian.
    if (!a->grad.empty() && !sc->grad.empty()) {
      const std::vector<double>& da = a->grad;
      const auto lo = static_cast<size_t>(std::min_element(da.begin(), da.end()) - da.begin());
      const size_t hi = argmax(da);
      double mean = 0;
      for (size_t j = 0; j < da.size(); ++j) mean += a->value[j] * da[j];
      const bool all_negative = std::all_of(da.begin(), da.end(), [](double x) { return x < 0; });
      const bool all_positive = std::all_of(da.begin(), da.end(), [](double x) { return x > 0; });
      s = fmt::format(
          "dL/da_j = dL/dc . h_j is the lower the more h_j points against dL/dc, which is the way "
          "the context should move to lower the loss: it is lowest for '{}' ({:.3g}) and highest "
          "for '{}' ({:.3g}).",
          e.source[lo], da[lo], e.source[hi], da[hi]);
      if (all_negative || all_positive)
        s += fmt::format(
            " All of them are {}: {} weight on any word alone would {} the loss, but the weights "
            "sum to 1, so only their differences count.",
            all_negative ? "negative" : "positive", all_negative ? "more" : "less",
            all_negative ? "lower" : "lower");
      story.push_back(s);
      std::vector<std::string> up, down;
      for (size_t j = 0; j < da.size(); ++j) {
        if (a->value[j] <= 0) continue;  // masked or outside the local window
        (sc->grad[j] < 0 ? up : down).push_back("'" + e.source[j] + "'");
      }
      auto list = [](const std::vector<std::string>& v) {
        std::string out;
        for (size_t i = 0; i < v.size(); ++i)
          out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
        return out;
      };
      s = fmt::format(
          "Through the softmax, dL/de_j = a_j (dL/da_j {} {:.3g}), {:.3g} being the weighted mean "
          "sum_k a_k dL/da_k: a score rises under gradient descent exactly when its dL/da_j is "
          "below that mean.",
          mean < 0 ? "+" : "-", std::abs(mean), mean);
      if (!up.empty()) s += fmt::format(" Here descent would raise the score of {}", list(up));
      if (!up.empty() && !down.empty()) s += fmt::format(" and lower that of {}", list(down));
      if (up.empty() && !down.empty()) s += fmt::format(" Descent would lower {}", list(down));
      s += ".";
      story.push_back(s);
    }
    // Where the gradient reaches the encoder states.
    if (!h->grad.empty()) {
      const auto K = static_cast<size_t>(h->shape[2]);
      std::vector<double> norms;
      for (size_t j = 0; j < e.source.size(); ++j)
        norms.push_back(norm(std::span<const double>(h->grad).subspan(j * K, K)));
      const size_t j = argmax(norms);
      s = fmt::format(
          "The loss reaches the encoder state of {} hardest (|dL/dh_j| = {:.3g}): a_j dL/dc "
          "carries it there through the context, and the scores add their share.",
          word_at(e, j), norms[j]);
      if (c && !c->grad.empty()) s += fmt::format(" |dL/dc| = {:.3g}.", norm(c->grad));
      story.push_back(s);
    }
  }

  // The attention parameter with the largest gradient, and what a step along it would do.
  const ExplainParameter* top = nullptr;
  double top_norm = 0;
  std::string others;
  for (const auto& p : e.parameters) {
    if (!p.attention) continue;
    const double n = norm(p.grad);
    if (!top || n > top_norm) {
      top = &p;
      top_norm = n;
    }
  }
  if (top) {
    for (const auto& p : e.parameters)
      if (p.attention && &p != top)
        others += fmt::format("{}{} {:.3g}", others.empty() ? "" : ", ",
                              p.name.substr(p.name.rfind('.') + 1), norm(p.grad));
    const std::string name = top->name.substr(top->name.rfind('.') + 1);
    s = fmt::format("Of the attention's parameters, {} has the largest gradient (norm {:.3g}{}).",
                    name, top_norm, others.empty() ? "" : "; " + others);
    if (top_norm > 0)
      s += fmt::format(
          " A step of gradient descent on {} alone, with learning rate 0.1, would lower L by "
          "about 0.1 x {:.3g}^2 = {:.3g} (to first order).",
          name, top_norm, 0.1 * top_norm * top_norm);
    if (e.step > 0)
      s += " Part of it comes through the earlier steps: the query depends on their contexts.";
    story.push_back(s);
  }

  // The check.
  size_t failed = 0;
  double worst = 0;
  for (const auto& c : e.checks) {
    failed += c.pass ? 0 : 1;
    worst = std::max(worst, c.rel_error);
  }
  if (!e.checks.empty())
    story.push_back(
        failed == 0
            ? fmt::format("The finite-difference check agrees on all {} elements checked "
                          "(largest relative error {:.1e}): the tape's gradients are right.",
                          e.checks.size(), worst)
            : fmt::format("The finite-difference check FAILS on {} of {} elements (largest "
                          "relative error {:.1e}).",
                          failed, e.checks.size(), worst));
  return story;
}

}  // namespace tapestry::cli
