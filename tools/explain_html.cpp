// Explain in HTML, one decoder step's section: the story in words, its heatmaps, a frame for the
// drawer's picture of its computation, every node's value beside its gradient, the chain rule
// through attention and the finite-difference check (the page around it: explain_html_page.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tapestry/core/graph_draw.h"
#include "tools/explain.h"
#include "tools/report_html.h"

namespace tapestry::cli {

namespace {

std::string esc(std::string_view s) {
  return html::escape(s);
}

// t in [-1, 1] to blue (negative), white (0), red (positive); with `sequential`, t in [0, 1] from
// white to blue.
std::string colour(double t, bool sequential) {
  auto mix = [](double a, double b, double u) {
    return static_cast<int>(std::lround(a + (b - a) * u));
  };
  t = std::clamp(std::isfinite(t) ? t : 0.0, -1.0, 1.0);
  if (sequential || t < 0) {
    const double u = std::abs(t);  // white -> #2166ac
    return fmt::format("#{:02x}{:02x}{:02x}", mix(255, 33, u), mix(255, 102, u), mix(255, 172, u));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", mix(255, 178, t), mix(255, 24, t), mix(255, 43, t));
}

struct HeatColumn {
  std::string name;
  std::vector<double> values;  // one per row
  bool sequential = false;     // weights in [0, 1]; else signed, scaled by the largest |value|
};

// The width in pixels of a heatmap cell; its number is at most 8 characters of 9-pixel monospace.
constexpr int kCellWidth = 52;

// A grid of coloured cells, one row per label, each cell's number written in it (cell_num, the
// full value on hover); each column has its own colour scale, or with `shared` one scale for all.
std::string value_heatmap(const std::string& title, const std::vector<std::string>& rows,
                          const std::vector<HeatColumn>& columns, bool shared) {
  size_t longest = 1;
  for (const auto& r : rows) longest = std::max(longest, html::utf8_length(r));
  const int cell_h = 22, top = 22;
  const int label_w = 12 + 7 * static_cast<int>(std::min<size_t>(longest, 14));
  const int width = label_w + kCellWidth * static_cast<int>(columns.size()) + 4;
  const int height = top + cell_h * static_cast<int>(rows.size()) + 4;
  std::string s = fmt::format(
      "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" font-family=\"monospace\" font-size=\"9\">",
      title, width, height);
  // Scales from the finite values; an infinite one takes the full colour of its sign.
  auto largest = [](double m, double v) { return std::isfinite(v) ? std::max(m, std::abs(v)) : m; };
  double all = 0;
  for (const auto& c : columns)
    for (double v : c.values) all = largest(all, v);
  for (size_t c = 0; c < columns.size(); ++c) {
    const HeatColumn& col = columns[c];
    const int x = label_w + kCellWidth * static_cast<int>(c);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
                     x + kCellWidth / 2, top - 7, esc(col.name));
    double scale = shared ? all : 0;
    if (!shared)
      for (double v : col.values) scale = largest(scale, v);
    for (size_t r = 0; r < col.values.size() && r < rows.size(); ++r) {
      const double v = col.values[r];
      const double t = col.sequential || std::isinf(v) ? v : (scale > 0 ? v / scale : 0);
      const int y = top + cell_h * static_cast<int>(r);
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\">"
          "<title>{} {}: {:.6g}</title></rect><text class=\"cell\" x=\"{}\" y=\"{}\" "
          "text-anchor=\"middle\" fill=\"{}\">{}</text>",
          x, y, kCellWidth, cell_h, colour(t, col.sequential), esc(col.name), esc(rows[r]), v,
          x + kCellWidth / 2, y + cell_h / 2 + 3, std::abs(t) > 0.55 ? "#ffffff" : "#111111",
          esc(cell_num(v)));
    }
  }
  for (size_t r = 0; r < rows.size(); ++r)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"10\">{}</text>",
                     label_w - 5, top + cell_h * static_cast<int>(r) + cell_h / 2 + 4,
                     esc(html::utf8_truncate(rows[r], 14)));
  return s + "</svg></figure>\n";
}

// A tensor's values as rows of the last axis, four to a line (every value up to full_max
// elements), else a summary on two lines.
std::string values_html(std::span<const double> v, std::span<const int64_t> shape,
                        int64_t full_max) {
  if (v.empty()) return "<span class=\"none\">&mdash;</span>";
  if (static_cast<int64_t>(v.size()) > full_max) {
    std::string sum = esc(summary_text(v));
    const size_t mean = sum.find("  mean");
    return mean == std::string::npos ? sum : sum.substr(0, mean) + "<br>" + sum.substr(mean + 2);
  }
  const size_t row = shape.empty() || shape.back() == 0 ? 1 : static_cast<size_t>(shape.back());
  std::string s;
  for (size_t r = 0; r < v.size(); r += row) {
    if (r) s += "<br>";
    for (size_t k = 0; k < row && r + k < v.size(); ++k)
      s += fmt::format("{}{}",
                       k == 0       ? ""
                       : k % 4 == 0 ? "<br>"
                                    : " ",
                       esc(fmt::format("{:>10}", num(v[r + k]))));
  }
  return s;
}

std::string node_cell(const ExplainNode& n) {
  if (n.op == "param")
    return fmt::format("<b title=\"{}\">{}</b>", esc(n.label), esc(short_param(n.label)));
  std::string s = esc(n.op);
  if (!n.label.empty()) s += fmt::format(" <b>{}</b>", esc(n.label));
  return s;
}

// The step's attention, one row per source word: weights, scores and their gradients, and the
// gradient reaching each encoder state (its norm, then element by element when K is small).
std::string step_heatmaps(const Explanation& e) {
  const FocusNodes& f = e.focus;
  const ExplainNode* a = node_at(e, f.weights);
  const ExplainNode* sc = node_at(e, f.scores);
  const ExplainNode* keys = node_at(e, f.keys);
  const ExplainNode* y = node_at(e, f.softmax);
  std::string h;
  size_t K = 0;
  std::vector<double> dh_norms;
  if (keys && !keys->grad.empty()) {
    K = static_cast<size_t>(keys->shape[2]);
    for (size_t j = 0; j < e.source.size(); ++j)
      dh_norms.push_back(norm(std::span<const double>(keys->grad).subspan(j * K, K)));
  }
  if (a && sc && y) {
    std::vector<HeatColumn> cols = {{"a", a->value, true}};
    if (y != a) cols.push_back({"softmax", y->value, true});
    cols.push_back({"e", sc->value});
    cols.push_back({"dL/da", a->grad});
    cols.push_back({"dL/de", sc->grad});
    if (!dh_norms.empty()) cols.push_back({"|dL/dh|", dh_norms});
    h += value_heatmap("Attention at this step, per source word", e.source, cols, false);
    h += "<div class=\"note\">a (and the softmax, where it differs): the weights, on a 0 to 1 "
         "scale; e: the scores; every other column is scaled by its own largest |value|, red "
         "positive, blue negative.</div>\n";
  } else {
    h += "<div class=\"note\">No attention weights: the <code>none</code> variant's context is the "
         "encoder summary at every step.</div>\n";
  }
  if (K > 0 && K <= 16) {
    std::vector<HeatColumn> cols;
    for (size_t k = 0; k < K; ++k) {
      HeatColumn c{fmt::format("k={}", k), {}};
      for (size_t j = 0; j < e.source.size(); ++j) c.values.push_back(keys->grad[j * K + k]);
      cols.push_back(std::move(c));
    }
    h += value_heatmap("dL/dh_j: the gradient reaching the encoder states (one scale)", e.source,
                       cols, true);
  }
  return h;
}

// Every node in tape order, its value beside its gradient and the share of the gradient it passes
// to each input; one folding table per run of a region, headed by its equation. Attention, the
// output and the loss are open at first, and so is any region of at most 12 nodes: the encoder's
// and the cells' plumbing waits for a click.
std::string tape_table(const Explanation& e, const TextOptions& o) {
  const char* head =
      "<table class=\"tape\"><colgroup><col class=\"c-n\"><col class=\"c-node\"><col "
      "class=\"c-in\"><col class=\"c-shape\"><col class=\"c-v\"><col></colgroup><tr><th>#</th>"
      "<th>node</th><th>inputs</th><th>shape</th><th>value</th><th>dL/d(node), and &rarr; the "
      "|share| passed to each input</th></tr>\n";
  std::vector<const ExplainNode*> nodes;
  for (const auto& n : e.nodes)
    if (in_groups(n.region, o.groups) && shown(n, e)) nodes.push_back(&n);
  std::vector<std::string> explained;
  std::string t;
  for (size_t begin = 0; begin < nodes.size();) {
    const std::string& region = nodes[begin]->region;
    size_t end = begin;
    while (end < nodes.size() && nodes[end]->region == region) ++end;
    const bool first = std::find(explained.begin(), explained.end(), region) == explained.end();
    if (first) explained.push_back(region);
    const bool open = region.rfind("attention", 0) == 0 || region == "output" || region == "loss" ||
                      end - begin <= 12;
    t += fmt::format(
        "<details class=\"region\"{}><summary><b>{}</b> <span class=\"count\">{} "
        "node{}</span>",
        open ? " open" : "", esc(region_title(region)), end - begin, end - begin == 1 ? "" : "s");
    auto eq = e.equations.find(region);
    if (first && eq != e.equations.end())
      t += fmt::format("<div class=\"eq\">{}</div>", esc(eq->second));
    t += "</summary><div class=\"scroll\">";
    t += head;
    for (size_t i = begin; i < end; ++i) {
      const ExplainNode& n = *nodes[i];
      const FocusNodes& f = e.focus;
      const bool attn = n.label.rfind("decoder.attention.", 0) == 0 || n.index == f.weights ||
                        n.index == f.scores || n.index == f.context || n.index == f.keys;
      std::string ins, to;
      for (int32_t in : n.inputs)
        ins += in < 0 ? fmt::format("{}c", ins.empty() ? "" : " ")
                      : fmt::format("{}#{}", ins.empty() ? "" : " ", in);
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k] >= 0 && n.passed[k] >= 0)
          to += fmt::format("{}#{} {}", to.empty() ? "" : ", ", n.inputs[k], num(n.passed[k]));
      if (!to.empty()) to = "<div class=\"to\">&rarr; " + to + "</div>";
      t += fmt::format(
          "<tr{}><td class=\"n\">{}</td><td>{}</td><td class=\"i\">{}</td>"
          "<td class=\"v\">{}</td><td class=\"v\">{}</td><td class=\"v\">{}{}</td></tr>\n",
          attn ? " class=\"attn\"" : "", n.index, node_cell(n), esc(ins), shape_text(n.shape),
          values_html(n.value, n.shape, o.full_max), values_html(n.grad, n.shape, o.full_max), to);
    }
    t += "</table></div></details>\n";
    begin = end;
  }
  return t;
}

std::string chain_table(const Explanation& e, const TextOptions& o) {
  if (e.chain.empty()) return "";
  std::string h =
      "<h3>The chain rule through attention, each link recomputed by hand</h3>\n"
      "<div class=\"scroll\"><table><tr><th>link</th><th>shape</th><th>tape</th><th>by hand</th>"
      "<th>max |tape &minus; hand|</th></tr>\n";
  for (const auto& c : e.chain) {
    double diff = 0;
    if (c.tape.size() == c.by_hand.size())
      for (size_t i = 0; i < c.tape.size(); ++i)
        diff = std::max(diff, std::abs(c.tape[i] - c.by_hand[i]));
    h += fmt::format(
        "<tr><td class=\"eq\">{}</td><td class=\"v\">{}</td><td class=\"v\">{}</td><td "
        "class=\"v\">{}</td><td class=\"v\">{}</td></tr>\n",
        esc(c.formula), shape_text(c.shape), values_html(c.tape, c.shape, o.full_max),
        values_html(c.by_hand, c.shape, o.full_max),
        c.by_hand.empty() || c.tape.empty() ? "" : fmt::format("{:.1e}", diff));
  }
  return h + "</table></div>\n";
}

std::string check_table(const Explanation& e) {
  size_t failed = 0;
  double worst = 0;
  for (const auto& c : e.checks) {
    failed += c.pass ? 0 : 1;
    worst = std::max(worst, c.rel_error);
  }
  std::string h = fmt::format(
      "<h3>Finite-difference check: <span class=\"{}\">{} of {} elements pass</span>, largest "
      "relative error {:.1e}</h3><div class=\"note\">Fourth-order central differences (8 "
      "(L(x+h) &minus; L(x&minus;h)) &minus; (L(x+2h) &minus; L(x&minus;2h))) / 12h, h = {}, in "
      "float64; relative error = |analytic &minus; numeric| / the tensor's largest |gradient|; "
      "pass below {}.</div>\n<div class=\"scroll\"><table class=\"check\"><tr><th>tensor</th>"
      "<th>element</th><th>analytic</th><th>numeric</th><th>rel. error</th><th></th></tr>\n",
      failed ? "fail" : "pass", e.checks.size() - failed, e.checks.size(), worst, e.eps,
      e.tolerance);
  for (const auto& c : e.checks)
    h += fmt::format(
        "<tr><td>{}</td><td class=\"v\">{}</td><td class=\"v\">{:.6e}</td><td "
        "class=\"v\">{:.6e}</td><td class=\"v\">{:.1e}</td><td class=\"{}\">{}</td></tr>\n",
        esc(c.tensor), element_text(c.shape, c.index), c.analytic, c.numeric, c.rel_error,
        c.pass ? "pass" : "fail", c.pass ? "PASS" : "FAIL");
  return h + "</table></div>\n";
}

}  // namespace

std::string cell_num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 0.001 && a < 999.5) {  // "-0.00123", "-12.3", "-999"; 999.9 would round to "1e+03"
    std::string s = fmt::format("{:.3g}", v);
    if (s.find('e') == std::string::npos) return s;
  }
  // "-1.2e-12": a mantissa of 2 digits and the exponent without its '+' and leading zeros. An
  // exponent of 3 digits (below 1e-99, above 1e99) keeps 1 digit: "-1e-300".
  std::string s = a < 1e-99 || a >= 1e100 ? fmt::format("{:.0e}", v) : fmt::format("{:.1e}", v);
  const size_t e = s.find('e');
  std::string exponent = s.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent = exponent.substr(1);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return s.substr(0, e + 1) + (negative ? "-" : "") + exponent;
}

std::string html_step_section(const Explanation& e, const TextOptions& o) {
  std::string h = fmt::format(
      "<section class=\"step\" id=\"step-{0}\" data-step=\"{0}\" data-label=\"step {0}: reads "
      "'{1}', scored on writing '{2}', L_{0} = {3:.4g}\">\n",
      e.step, esc(e.previous), esc(e.target), e.loss);
  h += fmt::format(
      "<h2>Step {}: reads <code>{}</code>, scored on writing <code>{}</code>, L<sub>{}</sub> = "
      "{:.6g}</h2>\n",
      e.step, esc(e.previous), esc(e.target), e.step, e.loss);
  if (!e.top.empty()) {
    h += "<div class=\"meta\">the most likely next words:";
    for (const auto& [w, p] : e.top)
      h += fmt::format(" <code{}>{}</code> {:.3g}", w == e.target ? " class=\"target\"" : "",
                       esc(w), p);
    h += "</div>\n";
  }
  h += "<ol class=\"story\">\n";
  for (const auto& s : e.story) h += "<li>" + esc(s) + "</li>\n";
  h += "</ol>\n<div class=\"pair\"><div class=\"heat\">\n" + step_heatmaps(e) + "</div>\n";
  h += fmt::format(
      "<div class=\"graph\"><h3>The step's computation, drawn</h3><div class=\"note\">Regions are "
      "folded into boxes (click one to open it); each box shows a value beside its gradient, and "
      "each edge the |gradient| sent back along it. The earlier steps fold into one box each."
      "</div><iframe class=\"graph-frame\" data-step=\"{}\" title=\"the computation of step {}\">"
      "</iframe><noscript>The picture needs the page's script.</noscript></div></div>\n",
      e.step, e.step);
  h += "<h3>The tape, node by node: each value beside its gradient</h3>\n";
  h += "<div class=\"note\">Forward in tape order (the nodes of earlier steps are left out); read "
       "the gradient column bottom up for the backward pass. Highlighted rows are attention's; "
       "click a region's heading to fold or open it."
       "</div>\n";
  h += tape_table(e, o);
  h += chain_table(e, o);
  h += check_table(e);
  return h + "</section>\n";
}

}  // namespace tapestry::cli
