// Explain as text for a terminal: aligned columns, at most 100 characters a line.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "tools/explain.h"

namespace tapestry::cli {

namespace {

constexpr size_t kWidth = 100;
constexpr size_t kNumWidth = 10;  // one value: "-1.235e-05"

}  // namespace

std::vector<std::string> wrap(const std::string& text, const std::string& first,
                              const std::string& next) {
  std::vector<std::string> lines;
  std::string line = first;
  bool empty = true;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    std::string word = text.substr(i, j - i);
    i = j + 1;
    if (word.empty()) continue;
    if (!empty && line.size() + 1 + word.size() > kWidth) {
      lines.push_back(line);
      line = next;
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  lines.push_back(line);
  return lines;
}

namespace {

// The values of a tensor as lines of at most `width` characters: every value, one row of the last
// axis after another, for tensors of at most full_max elements; else one summary line.
std::vector<std::string> value_lines(std::span<const double> v, std::span<const int64_t> shape,
                                     int64_t full_max, size_t width) {
  if (static_cast<int64_t>(v.size()) > full_max) {
    std::string sum = summary_text(v);
    const size_t mean = sum.find("  mean");
    if (sum.size() <= width || mean == std::string::npos) return {sum};
    return {sum.substr(0, mean), sum.substr(mean + 2)};
  }
  const size_t row = shape.empty() || shape.back() == 0 ? 1 : static_cast<size_t>(shape.back());
  const size_t per_line = std::max<size_t>(1, (width + 1) / (kNumWidth + 1));
  std::vector<std::string> lines;
  for (size_t r = 0; r < v.size(); r += row) {
    std::string line;
    for (size_t k = 0; k < row && r + k < v.size(); ++k) {
      if (k > 0 && k % per_line == 0) {
        lines.push_back(line);
        line.clear();
      }
      line += fmt::format("{}{:>{}}", line.empty() ? "" : " ", num(v[r + k]), kNumWidth);
    }
    lines.push_back(line);
  }
  if (lines.empty()) lines.emplace_back("(empty)");
  return lines;
}

// Columns ahead of the values, then the values; continuation lines indented to the values.
void emit(std::string& out, const std::string& lead, const std::vector<std::string>& values) {
  const std::string pad(lead.size(), ' ');
  for (size_t i = 0; i < values.size(); ++i) {
    std::string line = (i == 0 ? lead : pad) + values[i];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
}

std::string display(const ExplainNode& n) {
  if (n.op == "param") return short_param(n.label);
  return n.label.empty() ? n.op : fmt::format("{} [{}]", n.op, n.label);
}

std::string inputs_text(const ExplainNode& n, size_t width) {
  std::string s;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    std::string item = n.inputs[k] < 0 ? "c" : fmt::format("#{}", n.inputs[k]);
    const size_t left = n.inputs.size() - k - 1;
    if (left > 0 && s.size() + item.size() + 1 + 4 > width) {
      s += fmt::format("+{}", left + 1);
      break;
    }
    s += (s.empty() ? "" : " ") + item;
  }
  return s.empty() ? "-" : s;
}

void rule(std::string& out, const std::string& title) {
  std::string line = "-- " + title + " ";
  line += std::string(kWidth > line.size() ? kWidth - line.size() : 0, '-');
  out += line + "\n";
}

void heading(std::string& out, const std::string& text) {
  out += "\n";
  for (const auto& l : wrap(text, "", "   ")) out += l + "\n";
}

// Nodes in `order`, a group rule whenever the region changes, its equation the first time.
template <class Line>
void grouped(std::string& out, const Explanation& e, const TextOptions& o,
             const std::vector<const ExplainNode*>& order, Line line) {
  std::set<std::string> explained;
  const std::string* current = nullptr;
  for (const ExplainNode* n : order) {
    if (!in_groups(n->region, o.groups) || !shown(*n, e)) continue;
    if (!current || *current != n->region) {
      current = &n->region;
      rule(out, region_title(n->region));
      if (explained.insert(n->region).second) {
        auto it = e.equations.find(n->region);
        if (it != e.equations.end())
          for (const auto& l : wrap(it->second, "   ", "     ")) out += l + "\n";
      }
    }
    line(*n);
  }
}

}  // namespace

std::string render_text(const Explanation& e, const TextOptions& o) {
  std::string out;
  out += fmt::format("tapestry explain: {} (float64)\n", e.model);
  std::string src;
  for (const auto& w : e.source) src += (src.empty() ? "" : " ") + w;
  out += fmt::format("  source  {}  (S = {})\n", src, e.source.size());
  out += fmt::format("  step    t = {}, previous token {}, target y* = {} (id {})\n", e.step,
                     e.previous, e.target, e.target_id);
  out += fmt::format("  loss    L = {:.6g}\n", e.loss);
  if (!e.top.empty()) {
    std::string top;
    for (const auto& [w, p] : e.top)
      top += fmt::format("{}{} {:.3g}", top.empty() ? "" : ", ", w, p);
    out += fmt::format("  output  the most likely words: {}\n", top);
  }
  if (!e.story.empty()) {
    out += "\n";
    for (const auto& s : e.story)
      for (const auto& l : wrap(s, "   ", "     ")) out += l + "\n";
  }

  constexpr const char* kFwdLead = "{:>5} {:<20} {:<13} {:<9} ";
  const size_t fwd_lead = 5 + 1 + 20 + 1 + 13 + 1 + 9 + 1;
  if (o.forward) {
    heading(out, fmt::format("1. FORWARD PASS as recorded on the tape, one line per node: index, "
                             "op [symbol], inputs (c: a constant), shape, value (every value up to "
                             "{} elements, rows of the last axis; else a summary).",
                             o.full_max));
    size_t earlier = 0;
    for (const auto& n : e.nodes) earlier += !shown(n, e);
    if (earlier > 0)
      out += fmt::format(
          "   (the {} nodes that {} recorded are left out: they made this step's "
          "state)\n",
          earlier, e.step == 1 ? "step 0" : fmt::format("steps 0 to {}", e.step - 1));
    out += fmt::format(fmt::runtime(kFwdLead), "#", "node", "inputs", "shape") + "value\n";
    std::vector<const ExplainNode*> order;
    for (const auto& n : e.nodes) order.push_back(&n);
    grouped(out, e, o, order, [&](const ExplainNode& n) {
      std::string lead = fmt::format(fmt::runtime(kFwdLead), n.index, display(n),
                                     inputs_text(n, 13), shape_text(n.shape));
      emit(out, lead,
           value_lines(n.value, n.shape, o.full_max, kWidth - std::max(lead.size(), fwd_lead)));
    });
  }

  constexpr const char* kBwdLead = "{:>5} {:<20} {:<9} ";
  const size_t bwd_lead = 5 + 1 + 20 + 1 + 9 + 1;
  if (o.backward) {
    heading(
        out,
        "2. BACKWARD PASS in reverse tape order: dL/d(node), the gradient that reaches each "
        "node, and below it '->' the inputs it passes gradient to with the norm of each share.");
    out +=
        "   The ops on this tape and their derivatives (dy is the gradient at the op's output):\n";
    std::set<std::string> seen;
    for (auto it = e.nodes.rbegin(); it != e.nodes.rend(); ++it) {
      if (!in_groups(it->region, o.groups) || !shown(*it, e) || !seen.insert(it->op).second)
        continue;
      for (const auto& l : wrap(it->math, fmt::format("     {:<14}", it->op), std::string(19, ' ')))
        out += l + "\n";
    }
    out += fmt::format(fmt::runtime(kBwdLead), "#", "node", "shape") + "dL/d(node)\n";
    std::vector<const ExplainNode*> order;
    for (auto it = e.nodes.rbegin(); it != e.nodes.rend(); ++it) order.push_back(&*it);
    grouped(out, e, o, order, [&](const ExplainNode& n) {
      std::string lead =
          fmt::format(fmt::runtime(kBwdLead), n.index, display(n), shape_text(n.shape));
      if (n.grad.empty()) {
        out += lead + "(no gradient: L does not depend on it)\n";
        return;
      }
      emit(out, lead,
           value_lines(n.grad, n.shape, o.full_max, kWidth - std::max(lead.size(), bwd_lead)));
      if (n.op == "param") {
        out += fmt::format("{}(a leaf: accumulates into the gradient of {})\n",
                           std::string(12, ' '), n.label);
        return;
      }
      std::string to;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] < 0) continue;
        to += fmt::format("{}#{} {}", to.empty() ? "" : ",  ", n.inputs[k], num(n.passed[k]));
      }
      if (!to.empty())
        for (const auto& l : wrap(to, std::string(12, ' ') + "-> ", std::string(15, ' ')))
          out += l + "\n";
    });

    out += "\n   Where the walk ends: the attention's parameters and the encoder states h_j.\n";
    for (const auto& p : e.parameters) {
      if (!p.attention) continue;
      emit(out,
           fmt::format("     dL/d{:<19} {:<9} ", p.name.substr(p.name.rfind('.') + 1),
                       shape_text(p.shape)),
           value_lines(p.grad, p.shape, o.full_max, kWidth - 36));
    }
    if (e.focus.keys >= 0) {
      const ExplainNode& h = e.nodes[static_cast<size_t>(e.focus.keys)];
      emit(out, fmt::format("     dL/d{:<19} {:<9} ", "h_j", shape_text(h.shape)),
           value_lines(h.grad, h.shape, o.full_max, kWidth - 36));
    }

    if (!e.chain.empty()) {
      out +=
          "\n   The chain rule through attention, each link recomputed by hand (plain loops over "
          "the values\n   above) beside the tape's gradient:\n";
      for (const auto& c : e.chain) {
        double diff = 0;
        if (!c.tape.empty() && c.tape.size() == c.by_hand.size())
          for (size_t i = 0; i < c.tape.size(); ++i)
            diff = std::max(diff, std::abs(c.tape[i] - c.by_hand[i]));
        std::vector<std::string> lines = wrap(c.formula, "     ", "       ");
        if (!c.by_hand.empty() && !c.tape.empty()) {
          const std::string tail = fmt::format("max |tape - hand| {:.1e}", diff);
          if (lines.back().size() + 2 + tail.size() > kWidth) lines.emplace_back();
          std::string& last = lines.back();
          last += std::string(kWidth - tail.size() - last.size(), ' ') + tail;
        }
        for (const auto& l : lines) out += l + "\n";
        if (!c.tape.empty())
          emit(out, "       tape     ", value_lines(c.tape, c.shape, o.full_max, kWidth - 16));
        if (!c.by_hand.empty())
          emit(out, "       by hand  ", value_lines(c.by_hand, c.shape, o.full_max, kWidth - 16));
      }
    }
  }

  if (o.check) {
    heading(out,
            fmt::format("3. FINITE-DIFFERENCE CHECK of the attention's parameters, the encoder "
                        "states and this step's scores, weights and context: the tape's gradient "
                        "beside (8 (L(x+h) - L(x-h)) - "
                        "(L(x+2h) - L(x-2h))) / 12h with h = {}, in float64; relative error = "
                        "|analytic - numeric| / the tensor's largest |gradient|; PASS below {}.{}",
                        e.eps, e.tolerance,
                        e.check_max > 0
                            ? fmt::format(" The first {} elements of each tensor.", e.check_max)
                            : ""));
    if (o.check_rows)
      out += fmt::format("     {:<26} {:<9} {:>14} {:>14} {:>10}  {}\n", "tensor", "element",
                         "analytic", "numeric", "rel. error", "result");
    int failed = 0;
    double worst = 0;
    for (const auto& c : e.checks) {
      if (o.check_rows)
        out += fmt::format("     {:<26} {:<9} {:>14.6e} {:>14.6e} {:>10.1e}  {}\n",
                           short_param(c.tensor), element_text(c.shape, c.index), c.analytic,
                           c.numeric, c.rel_error, c.pass ? "PASS" : "FAIL");
      failed += c.pass ? 0 : 1;
      worst = std::max(worst, c.rel_error);
    }
    out +=
        fmt::format("   {} elements checked: {} pass, {} fail; largest relative error {:.1e}\n",
                    e.checks.size(), e.checks.size() - static_cast<size_t>(failed), failed, worst);
  }
  return out;
}

}  // namespace tapestry::cli
