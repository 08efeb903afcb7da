// Explain as one self-contained HTML page (inline CSS and SVG, no scripts): heatmaps of the
// attention weights and their gradients beside the forward and backward tables, then the chain
// rule through attention and the finite-difference check.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

// A grid of coloured cells, one row per label; each column has its own colour scale, or with
// `shared` one scale for all (a matrix).
std::string heatmap(const std::string& title, const std::vector<std::string>& rows,
                    const std::vector<HeatColumn>& columns, bool shared) {
  size_t longest = 1;
  for (const auto& r : rows) longest = std::max(longest, r.size());
  const int cell_w = 48, cell_h = 22, top = 22;
  const int label_w = 12 + 7 * static_cast<int>(std::min<size_t>(longest, 14));
  const int width = label_w + cell_w * static_cast<int>(columns.size()) + 4;
  const int height = top + cell_h * static_cast<int>(rows.size()) + 4;
  std::string s = fmt::format(
      "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" font-family=\"monospace\" font-size=\"9\">",
      title, width, height);
  double all = 0;
  for (const auto& c : columns)
    for (double v : c.values) all = std::max(all, std::abs(v));
  for (size_t c = 0; c < columns.size(); ++c) {
    const HeatColumn& col = columns[c];
    const int x = label_w + cell_w * static_cast<int>(c);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
                     x + cell_w / 2, top - 7, esc(col.name));
    double scale = shared ? all : 0;
    if (!shared)
      for (double v : col.values) scale = std::max(scale, std::abs(v));
    for (size_t r = 0; r < col.values.size() && r < rows.size(); ++r) {
      const double v = col.values[r];
      const double t = col.sequential ? v : (scale > 0 ? v / scale : 0);
      const int y = top + cell_h * static_cast<int>(r);
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\"/>"
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
          x, y, cell_w, cell_h, colour(t, col.sequential), x + cell_w / 2, y + cell_h / 2 + 3,
          std::abs(t) > 0.55 ? "#ffffff" : "#111111", esc(num(v)));
    }
  }
  for (size_t r = 0; r < rows.size(); ++r)
    s +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"10\">{}</text>",
                    label_w - 5, top + cell_h * static_cast<int>(r) + cell_h / 2 + 4, esc(rows[r]));
  return s + "</svg></figure>\n";
}

// A tensor's values as rows of the last axis (every value up to full_max elements), else a
// summary.
std::string values_html(std::span<const double> v, std::span<const int64_t> shape,
                        int64_t full_max) {
  if (v.empty()) return "<span class=\"none\">&mdash;</span>";
  if (static_cast<int64_t>(v.size()) > full_max) {
    // "min a  max b  mean c  norm d" on two lines, to keep the column narrow
    std::string sum = esc(summary_text(v));
    const size_t mean = sum.find("  mean");
    return mean == std::string::npos ? sum : sum.substr(0, mean) + "<br>" + sum.substr(mean + 2);
  }
  const size_t row = shape.empty() || shape.back() == 0 ? 1 : static_cast<size_t>(shape.back());
  std::string s;
  for (size_t r = 0; r < v.size(); r += row) {
    if (r) s += "<br>";
    for (size_t k = 0; k < row && r + k < v.size(); ++k)  // at most 4 values a line
      s += fmt::format("{}{}",
                       k == 0       ? ""
                       : k % 4 == 0 ? "<br>"
                                    : " ",
                       esc(fmt::format("{:>9}", num(v[r + k]))));
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

std::string group_row(const Explanation& e, const std::string& region, int colspan,
                      bool with_equation) {
  std::string s = fmt::format("<tr class=\"group\"><td colspan=\"{}\"><b>{}</b>", colspan,
                              esc(region_title(region)));
  auto it = e.equations.find(region);
  if (with_equation && it != e.equations.end())
    s += fmt::format("<div class=\"eq\">{}</div>", esc(it->second));
  return s + "</td></tr>\n";
}

const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 16px; color: #111; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px 0; } h2 { font-size: 16px; margin: 18px 0 6px 0; }
.meta { font-size: 13px; margin-bottom: 10px; } .meta code { background: #f2f2f2; padding: 1px 4px; }
.layout { display: grid; grid-template-columns: max-content minmax(0, 1.2fr) minmax(0, 1fr);
          gap: 14px; align-items: start; }
.layout > div { overflow-x: auto; }
.heat { position: sticky; top: 8px; background: #fff; border: 1px solid #ddd; padding: 8px;
        max-width: 330px; }
figure { margin: 0 0 10px 0; } figcaption { font-size: 12px; font-weight: 600; margin-bottom: 2px; }
.note { font-size: 11px; color: #555; }
table { border-collapse: collapse; font-size: 11px; width: 100%; }
th { text-align: left; background: #eef1f6; position: sticky; top: 0; }
td, th { border-bottom: 1px solid #eee; padding: 2px 3px; vertical-align: top; }
td.v { font-family: monospace; font-size: 10px; white-space: pre; }
td.n { font-family: monospace; color: #666; text-align: right; }
table.tape { table-layout: fixed; }
table.tape td { overflow: hidden; text-overflow: ellipsis; }
tr.group td { background: #f4f6fa; border-top: 2px solid #9aa5b8; padding-top: 4px; }
tr.attn td { background: #fff7e0; }
.eq { font-family: monospace; font-size: 11px; color: #333; white-space: normal; }
.pass { color: #0a7a2f; font-weight: 600; } .fail { color: #b00020; font-weight: 700; }
.none { color: #999; }
.to { color: #666; white-space: normal; font-size: 10px; }
)";

}  // namespace

std::string render_html(const Explanation& e, const TextOptions& o) {
  std::string src;
  for (const auto& w : e.source) src += (src.empty() ? "" : " ") + w;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>tapestry explain: {}</title>\n<style>{}</style></head><body>\n",
                   esc(e.model), kStyle);
  h += "<h1>Backprop through attention, one decoder step</h1>\n";
  h += fmt::format(
      "<div class=\"meta\">model <code>{}</code> (float64) &middot; source <code>{}</code> "
      "&middot; previous token <code>{}</code> &middot; target y* <code>{}</code> &middot; loss "
      "L = <code>{:.6g}</code></div>\n",
      esc(e.model), esc(src), esc(e.previous), esc(e.target), e.loss);

  // ---- heatmaps
  h += "<div class=\"layout\"><div class=\"heat\">\n";
  const FocusNodes& f = e.focus;
  auto node = [&](int32_t i) -> const ExplainNode* {
    return i >= 0 && static_cast<size_t>(i) < e.nodes.size() ? &e.nodes[i] : nullptr;
  };
  const ExplainNode* a = node(f.weights);
  const ExplainNode* sc = node(f.scores);
  const ExplainNode* keys = node(f.keys);
  const ExplainNode* y = node(f.softmax);
  std::vector<double> dh_norms;
  size_t K = 0;
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
    h += heatmap("Attention at this step, per source word", e.source, cols, false);
    h += "<div class=\"note\">a: the weights, on a 0 to 1 scale; e: the scores; every other "
         "column is scaled by its own largest |value|, red positive, blue negative.</div>\n";
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
    h += heatmap("dL/dh_j: the gradient reaching the encoder states (one scale)", e.source, cols,
                 true);
  }
  h += "</div>\n";

  // ---- forward and backward tables
  auto table = [&](bool forward) {
    std::string t = fmt::format(
        "<div><h2>{}</h2><table "
        "class=\"tape\">{}<tr><th>#</th><th>node</th>{}<th>shape</th><th>{}</th></tr>\n",
        forward ? "1. Forward pass, as recorded on the tape"
                : "2. Backward pass, tape order reversed",
        // Fixed column widths: otherwise a group's long equation widens every column it spans.
        forward ? "<colgroup><col style=\"width:30px\"><col style=\"width:21%\"><col "
                  "style=\"width:11%\"><col style=\"width:12%\"><col></colgroup>"
                : "<colgroup><col style=\"width:30px\"><col style=\"width:25%\"><col "
                  "style=\"width:11%\"><col></colgroup>",
        forward ? "<th>inputs</th>" : "",
        forward ? "value" : "dL/d(node), and &rarr; the |share| it passes to each input");
    const std::string* current = nullptr;
    std::vector<std::string> explained;
    const int cols = forward ? 5 : 4;
    auto row = [&](const ExplainNode& n) {
      if (!in_groups(n.region, o.groups) || !shown(n, e)) return;
      if (!current || *current != n.region) {
        current = &n.region;
        const bool first =
            std::find(explained.begin(), explained.end(), n.region) == explained.end();
        if (first) explained.push_back(n.region);
        t += group_row(e, n.region, cols, first);
      }
      const bool attn = n.label.rfind("decoder.attention.", 0) == 0 || n.index == f.weights ||
                        n.index == f.scores || n.index == f.context || n.index == f.keys;
      t += fmt::format("<tr{}><td class=\"n\">{}</td><td>{}</td>", attn ? " class=\"attn\"" : "",
                       n.index, node_cell(n));
      if (forward) {
        std::string ins;
        for (int32_t in : n.inputs)
          ins += in < 0 ? fmt::format("{}c", ins.empty() ? "" : " ")
                        : fmt::format("{}#{}", ins.empty() ? "" : " ", in);
        t +=
            fmt::format("<td class=\"v i\">{}</td><td class=\"v s\">{}</td><td class=\"v\">{}</td>",
                        esc(ins), shape_text(n.shape), values_html(n.value, n.shape, o.full_max));
      } else {
        std::string to;
        for (size_t k = 0; k < n.inputs.size(); ++k)
          if (n.inputs[k] >= 0 && n.passed[k] >= 0)
            to += fmt::format("{}#{} {}", to.empty() ? "" : ", ", n.inputs[k], num(n.passed[k]));
        if (!to.empty()) to = "<div class=\"to\">&rarr; " + to + "</div>";
        t += fmt::format("<td class=\"v s\">{}</td><td class=\"v\">{}{}</td>", shape_text(n.shape),
                         values_html(n.grad, n.shape, o.full_max), to);
      }
      t += "</tr>\n";
    };
    if (forward)
      for (const auto& n : e.nodes) row(n);
    else
      for (auto it = e.nodes.rbegin(); it != e.nodes.rend(); ++it) row(*it);
    return t + "</table></div>\n";
  };
  h += table(true);
  h += table(false);
  h += "</div>\n";

  // ---- the chain and the check
  if (!e.chain.empty()) {
    h += "<h2>The chain rule through attention, each link recomputed by hand</h2>\n"
         "<table><tr><th>link</th><th>shape</th><th>tape</th><th>by hand</th>"
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
    h += "</table>\n";
  }
  h += fmt::format(
      "<h2>3. Finite-difference check</h2><div class=\"note\">Fourth-order central differences "
      "(8 (L(x+h) &minus; L(x&minus;h)) &minus; (L(x+2h) &minus; L(x&minus;2h))) / 12h, h = {}, in "
      "float64; relative error = |analytic &minus; numeric| / the tensor's largest |gradient|; "
      "pass below {}.</div>\n<table style=\"width:auto\"><tr><th>tensor</th><th>element</th>"
      "<th>analytic</th><th>numeric</th><th>rel. error</th><th></th></tr>\n",
      e.eps, e.tolerance);
  for (const auto& c : e.checks)
    h += fmt::format(
        "<tr><td>{}</td><td class=\"v\">{}</td><td class=\"v\">{:.6e}</td><td "
        "class=\"v\">{:.6e}</td><td class=\"v\">{:.1e}</td><td class=\"{}\">{}</td></tr>\n",
        esc(c.tensor), element_text(c.shape, c.index), c.analytic, c.numeric, c.rel_error,
        c.pass ? "pass" : "fail", c.pass ? "PASS" : "FAIL");
  h += "</table>\n</body></html>\n";
  return h;
}

}  // namespace tapestry::cli
