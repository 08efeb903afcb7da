// Explain for the Transformer as one self-contained page (inline CSS, SVG and a small script):
// per step, the story, then per decoder layer the heads' weights and score gradients at position t
// as heatmaps (heads as rows), each head's table of values and gradients, and the check.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tools/explain_transformer.h"
#include "tools/report_html.h"

namespace tapestry::cli {

namespace {

std::string esc(std::string_view s) {
  return html::escape(s);
}

std::vector<double> row_of(const HeadTensor& x, int64_t r) {
  const int64_t cols = x.shape[1];
  return {x.value.begin() + r * cols, x.value.begin() + (r + 1) * cols};
}
std::vector<double> grad_row(const HeadTensor& x, int64_t r) {
  const int64_t cols = x.shape[1];
  return {x.grad.begin() + r * cols, x.grad.begin() + (r + 1) * cols};
}

// One attention of one layer at position t: the heads' weights (and their mean) and |dL/de_j|,
// heads as rows, the keys the query may see as columns.
std::string layer_maps(const TransformerExplanation& e, int layer, bool cross) {
  const int64_t t = e.step;
  const HeadExplanation& first = e.head(layer, cross, 0);
  const size_t keys = cross ? first.keys.size() : static_cast<size_t>(t + 1);
  const std::vector<std::string> cols(first.keys.begin(),
                                      first.keys.begin() + static_cast<long>(keys));
  std::vector<std::string> rows;
  std::vector<float> weights, grads, mean(keys, 0.0f);
  double most = 0;
  for (int h = 0; h < e.heads; ++h) {
    const HeadExplanation& a = e.head(layer, cross, h);
    rows.push_back(fmt::format("head {}", h + 1));
    const std::vector<double> w = row_of(a.weights, t), g = grad_row(a.scores, t);
    for (size_t j = 0; j < keys; ++j) {
      weights.push_back(static_cast<float>(w[j]));
      mean[j] += static_cast<float>(w[j] / static_cast<double>(e.heads));
      grads.push_back(static_cast<float>(std::abs(g[j])));
      most = std::max(most, std::abs(g[j]));
    }
  }
  std::vector<std::string> wrows = rows;
  wrows.push_back("mean");
  weights.insert(weights.end(), mean.begin(), mean.end());
  html::HeatmapOptions ho;
  ho.cell = 26;
  std::string s = "<div class=\"maps\">";
  s += "<figure><figcaption>a<sub>t,j</sub> per head</figcaption>" +
       html::heatmap(cols, wrows, weights, ho) + "</figure>";
  ho.max = most > 0 ? most : 1;
  ho.legend = "|dL/de_j|";
  s +=
      "<figure><figcaption>|dL/de<sub>t,j</sub>|: the gradient of each head's scores</figcaption>" +
      html::heatmap(cols, rows, grads, ho) + "</figure>";
  return s + "</div>\n";
}

std::string vec(const std::vector<double>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ' ';
    s += num(v[i]);
  }
  return esc(s);
}

// One head's values and gradients at position t, a row per key.
std::string head_table(const TransformerExplanation& e, const HeadExplanation& a) {
  const int64_t t = e.step;
  const size_t keys = a.cross ? a.keys.size() : static_cast<size_t>(t + 1);
  std::string s = fmt::format(
      "<details class=\"region\"><summary>head {} <span class=\"count\">q<sub>t</sub>, "
      "k<sub>j</sub>, v<sub>j</sub>, e, a, c<sub>t</sub> and their gradients</span></summary>\n"
      "<div class=\"scroll\"><table><tr><th>j</th><th>key</th><th>e_j</th><th>dL/de_j</th>"
      "<th>a_j</th><th>dL/da_j</th><th>k_j</th><th>dL/dk_j</th><th>v_j</th><th>dL/dv_j</th>"
      "</tr>\n",
      a.head + 1);
  const std::vector<double> ev = row_of(a.scores, t), eg = grad_row(a.scores, t);
  const std::vector<double> wv = row_of(a.weights, t), wg = grad_row(a.weights, t);
  for (size_t j = 0; j < keys; ++j) {
    const auto jj = static_cast<int64_t>(j);
    s += fmt::format(
        "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"v\">{}</td>"
        "<td class=\"v\">{}</td><td class=\"v\">{}</td><td class=\"v\">{}</td></tr>\n",
        j, esc(a.keys[j]), num(ev[j]), num(eg[j]), num(wv[j]), num(wg[j]), vec(row_of(a.k, jj)),
        vec(grad_row(a.k, jj)), vec(row_of(a.v, jj)), vec(grad_row(a.v, jj)));
  }
  s += "</table></div>\n";
  s += fmt::format(
      "<table><tr><th></th><th>value</th><th>dL/d</th></tr>"
      "<tr><td>q<sub>t</sub></td><td class=\"v\">{}</td><td class=\"v\">{}</td></tr>"
      "<tr><td>c<sub>t</sub></td><td class=\"v\">{}</td><td class=\"v\">{}</td></tr></table>\n",
      vec(row_of(a.q, t)), vec(grad_row(a.q, t)), vec(row_of(a.context, t)),
      vec(grad_row(a.context, t)));
  return s + "</details>\n";
}

// The check, one row per head tensor: elements checked and the largest relative error.
std::string check_table(const TransformerExplanation& e) {
  std::map<std::string, std::pair<int, double>> per;
  std::vector<std::string> order;
  std::map<std::string, bool> ok;
  for (const auto& c : e.checks) {
    if (!per.count(c.tensor)) {
      order.push_back(c.tensor);
      ok[c.tensor] = true;
    }
    auto& [n, worst] = per[c.tensor];
    ++n;
    worst = std::max(worst, c.rel_error);
    ok[c.tensor] = ok[c.tensor] && c.pass;
  }
  std::string s = fmt::format(
      "<details class=\"region\"><summary>Finite-difference check <span class=\"count\">{} "
      "elements in {} head tensors, h = {}, PASS below {}</span></summary>\n<table><tr>"
      "<th>tensor</th><th>elements</th><th>largest relative error</th><th></th></tr>\n",
      e.checks.size(), order.size(), e.eps, e.tolerance);
  for (const auto& name : order)
    s += fmt::format(
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1e}</td><td class=\"{}\">{}"
        "</td></tr>\n",
        esc(name), per[name].first, per[name].second, ok[name] ? "pass" : "fail",
        ok[name] ? "PASS" : "FAIL");
  return s + "</table></details>\n";
}

std::string step_section(const TransformerExplanation& e) {
  std::string s = fmt::format(
      "<section class=\"step\" id=\"step-{0}\" data-step=\"{0}\" data-label=\"step {0}: {1} "
      "&rarr; {2}\">\n<h2>Step {0}: reads <code>{1}</code>, scored on <code "
      "class=\"target\">{2}</code> <span class=\"meta\">L = {3}</span></h2>\n"
      "<ol class=\"story\">\n",
      e.step, esc(e.previous), esc(e.target), esc(num(e.loss)));
  for (const auto& line : e.story) s += "<li>" + esc(line) + "</li>\n";
  s += "</ol>\n";
  for (int l = static_cast<int>(e.layers) - 1; l >= 0; --l)
    for (bool cross : {true, false}) {
      s += fmt::format("<h3>Decoder layer {}: {}</h3>\n", l + 1,
                       cross ? "cross-attention over the source"
                             : "masked self-attention over the target so far");
      s += layer_maps(e, l, cross);
      for (int h = 0; h < e.heads; ++h) s += head_table(e, e.head(l, cross, h));
    }
  return s + check_table(e) + "</section>\n";
}

const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 0 16px 16px 16px; color: #111; background: #fff; }
h1 { font-size: 20px; margin: 12px 0 4px 0; } h2 { font-size: 17px; margin: 16px 0 6px 0; }
h3 { font-size: 14px; margin: 14px 0 4px 0; }
.meta { font-size: 13px; margin: 4px 0; font-weight: normal; }
code { background: #f2f2f2; padding: 1px 4px; } code.target { background: #ffe8b0; }
nav.stepper { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #ccc;
              padding: 6px 0; display: flex; gap: 10px; align-items: center; font-size: 14px; }
nav.stepper button { font-size: 14px; padding: 3px 10px; }
nav.stepper .keys { color: #666; font-size: 12px; }
.maps { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
ol.story { font-size: 14px; line-height: 1.45; max-width: 1000px; padding-left: 22px; }
ol.story li { margin: 3px 0; }
figure { margin: 0 0 10px 0; } figcaption { font-size: 12px; font-weight: 600; margin-bottom: 2px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 11px; margin: 2px 0 6px 0; }
th { text-align: left; background: #eef1f6; }
td, th { border-bottom: 1px solid #eee; padding: 2px 6px; vertical-align: top; }
td.v { font-family: monospace; font-size: 10px; }
td.n { font-family: monospace; color: #333; text-align: right; }
details.region { border-top: 2px solid #9aa5b8; margin: 0 0 2px 0; max-width: 1160px; }
details.region > summary { background: #f4f6fa; padding: 3px 4px; font-size: 12px; cursor: pointer; }
details.region .count { color: #666; font-weight: normal; font-size: 11px; }
.pass { color: #0a7a2f; font-weight: 600; } .fail { color: #b00020; font-weight: 700; }
)";

// The stepper: one step's section at a time (every section shows without the script).
const char* kScript = R"JS(
const sections = [...document.querySelectorAll("section.step")];
const prev = document.getElementById("prev"), next = document.getElementById("next");
const label = document.getElementById("where");
let current = 0;
function show(i) {
  current = Math.max(0, Math.min(sections.length - 1, i));
  sections.forEach((s, k) => { s.hidden = k !== current; });
  label.textContent = sections[current].dataset.label + "  (" + (current + 1) + " of " + sections.length + ")";
  prev.disabled = current === 0;
  next.disabled = current === sections.length - 1;
  document.body.dataset.current = sections[current].dataset.step;
}
prev.onclick = () => show(current - 1);
next.onclick = () => show(current + 1);
document.addEventListener("keydown", ev => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
  if (ev.key === "ArrowRight" || ev.key === "j" || ev.key === "n") show(current + 1);
  else if (ev.key === "ArrowLeft" || ev.key === "k" || ev.key === "p") show(current - 1);
  else if (ev.key === "Home") show(0);
  else if (ev.key === "End") show(sections.length - 1);
});
function fromHash() {
  const m = /^#step-(\d+)$/.exec(location.hash);
  const k = m ? sections.findIndex(s => s.dataset.step === m[1]) : -1;
  show(k >= 0 ? k : current);
}
window.addEventListener("hashchange", fromHash);
fromHash();
)JS";

}  // namespace

std::string render_transformer_html(const std::vector<TransformerExplanation>& steps,
                                    const AcrossSteps* across) {
  if (steps.empty()) return "";
  const TransformerExplanation& first = steps.front();
  size_t failed = 0, checked = 0;
  double worst = 0;
  for (const auto& e : steps) {
    for (const auto& c : e.checks) failed += c.pass ? 0 : 1;
    checked += e.checks.size();
    worst = std::max(worst, e.worst_error());
  }
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>tapestry explain: {}</title>\n<style>{}</style></head><body>\n",
                   esc(joined(first.source)), kStyle);
  h += "<h1>Backprop through a Transformer's attention, head by head</h1>\n";
  h += fmt::format(
      "<div class=\"meta\">model <code>{}</code> (float64) &middot; source <code>{}</code> "
      "&middot; target <code>{}</code> (teacher-forced) &middot; finite-difference check of "
      "every head's q, k, v, scores, weights and context: <span class=\"{}\">{} of {} elements "
      "pass</span>, largest relative error {:.1e}</div>\n",
      esc(first.model), esc(joined(first.source)), esc(joined(first.target_sentence)),
      failed ? "fail" : "pass", checked - failed, checked, worst);
  h += "<nav class=\"stepper\"><button id=\"prev\" title=\"previous step (left arrow or k)\">"
       "&#9664; previous</button><span id=\"where\"></span><button id=\"next\" title=\"next step "
       "(right arrow or j)\">next &#9654;</button><span class=\"keys\">keys: &larr; &rarr; (or k "
       "j), Home, End</span></nav>\n";
  if (across && !across->story.empty()) {
    // The whole sentence: each step's last-layer cross-attention (mean over heads), and the story.
    h += "<section class=\"across\"><h2>Across the sentence</h2>\n";
    if (across->weights.size() == across->written.size()) {
      std::vector<float> w;
      for (const auto& row : across->weights)
        for (double v : row) w.push_back(static_cast<float>(v));
      h += "<p>Each step's cross-attention in the last layer, averaged over the heads (rows: the "
           "word each step writes).</p>\n";
      h += html::heatmap(across->source, across->written, w);
    }
    h += "<ul>\n";
    for (const auto& s : across->story) h += "<li>" + esc(s) + "</li>\n";
    h += "</ul></section>\n";
  }
  for (const auto& e : steps) h += step_section(e);
  h += "<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return h;
}

}  // namespace tapestry::cli
