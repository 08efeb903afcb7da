// Explain as one self-contained HTML walkthrough (inline CSS, SVG and a small script; nothing from
// the network): the sentence's attention with a stepper over its decoder steps, the story across
// them, and each step's section (tools/explain_html.cpp) with the drawer's page of its computation.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tapestry/core/graph_draw.h"
#include "tools/explain.h"
#include "tools/report_html.h"

namespace tapestry::cli {

namespace {

std::string esc(std::string_view s) {
  return html::escape(s);
}

// The sentence across its steps: where each step attended and what each sent back to each
// encoder state, as two maps with a row per step (the current one outlined; a click goes there).
std::string sentence_maps(const std::vector<Explanation>& steps, const AcrossSteps* across) {
  std::vector<std::string> rows;
  for (const auto& e : steps) rows.push_back(fmt::format("{} {}", e.step, e.target));
  const std::vector<std::string>& cols = steps.front().source;
  std::string h = "<div class=\"maps\">";
  std::vector<float> weights;
  for (const auto& e : steps) {
    const ExplainNode* a = node_at(e, e.focus.weights);
    if (!a) break;
    for (double w : a->value) weights.push_back(static_cast<float>(w));
  }
  html::HeatmapOptions ho;
  ho.cell = 26;
  ho.row_marks = steps.size() > 1;
  if (weights.size() == rows.size() * cols.size())
    h += "<figure><figcaption>a<sub>t,j</sub>: where each step attended</figcaption>" +
         html::heatmap(cols, rows, weights, ho) + "</figure>";
  if (across && across->dh_norms.size() == steps.size()) {
    std::vector<float> norms;
    double most = 0;
    for (const auto& r : across->dh_norms)
      for (double v : r) {
        norms.push_back(static_cast<float>(v));
        most = std::max(most, v);
      }
    for (double v : across->total_norms) {
      norms.push_back(static_cast<float>(v));
      most = std::max(most, v);
    }
    std::vector<std::string> grad_rows = rows;
    grad_rows.push_back("|sum over t|");
    ho.max = most > 0 ? most : 1;
    ho.legend = "|dL_t/dh_j|";
    h += "<figure><figcaption>|dL<sub>t</sub>/dh<sub>j</sub>|: what each step sends back to each "
         "encoder state; last row, the norm of their sum, the gradient of L = &Sigma; "
         "L<sub>t</sub></figcaption>" +
         html::heatmap(cols, grad_rows, norms, ho) + "</figure>";
  }
  return h + "</div>\n";
}

const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 0 16px 16px 16px; color: #111; background: #fff; }
h1 { font-size: 20px; margin: 12px 0 4px 0; } h2 { font-size: 17px; margin: 16px 0 6px 0; }
h3 { font-size: 14px; margin: 14px 0 4px 0; }
.meta { font-size: 13px; margin: 4px 0; } code { background: #f2f2f2; padding: 1px 4px; }
code.target { background: #ffe8b0; }
nav.stepper { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #ccc;
              padding: 6px 0; display: flex; gap: 10px; align-items: center; font-size: 14px; }
nav.stepper button { font-size: 14px; padding: 3px 10px; }
nav.stepper .keys { color: #666; font-size: 12px; }
.maps { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.row-mark { pointer-events: none; } rect.cell[data-row] { cursor: pointer; }
.row-mark.current { stroke: #e8590c; stroke-width: 2.5; }
ol.story { font-size: 14px; line-height: 1.45; max-width: 1000px; padding-left: 22px; }
ol.story li { margin: 3px 0; }
.pair { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.heat { border: 1px solid #ddd; padding: 8px; max-width: 560px; }
.graph { flex: 1 1 600px; min-width: 420px; }
.graph-frame { width: 100%; height: 560px; border: 1px solid #ccc; }
figure { margin: 0 0 10px 0; } figcaption { font-size: 12px; font-weight: 600; margin-bottom: 2px; }
.note { font-size: 11px; color: #555; max-width: 1000px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 11px; }
th { text-align: left; background: #eef1f6; }
td, th { border-bottom: 1px solid #eee; padding: 2px 6px; vertical-align: top; }
td.v { font-family: monospace; font-size: 10px; white-space: pre; }
td.n { font-family: monospace; color: #666; text-align: right; }
details.region { border-top: 2px solid #9aa5b8; margin: 0 0 2px 0; }
details.region > summary { background: #f4f6fa; padding: 3px 4px; font-size: 12px; cursor: pointer; }
details.region .count { color: #666; font-weight: normal; font-size: 11px; }
col.c-n { width: 36px; } col.c-node { width: 190px; } col.c-in { width: 110px; }
col.c-shape { width: 80px; } col.c-v { width: 290px; }
td.i { font-family: monospace; font-size: 10px; color: #444; }
tr.attn td { background: #fff7e0; }
.eq { font-family: monospace; font-size: 11px; color: #333; }
.pass { color: #0a7a2f; font-weight: 600; } .fail { color: #b00020; font-weight: 700; }
.none { color: #999; }
.to { color: #666; font-size: 10px; font-family: system-ui, sans-serif; white-space: normal; }
)";

// The stepper: shows one step's section at a time (every section shows without the script),
// outlines its row in the maps and draws its graph into its frame the first time it is shown.
const char* kScript = R"JS(
const sections = [...document.querySelectorAll("section.step")];
const graphs = JSON.parse(document.getElementById("graphs").textContent);
const prev = document.getElementById("prev"), next = document.getElementById("next");
const label = document.getElementById("where");
let current = 0;
function show(i) {
  current = Math.max(0, Math.min(sections.length - 1, i));
  sections.forEach((s, k) => { s.hidden = k !== current; });
  document.querySelectorAll(".row-mark").forEach(r =>
    r.classList.toggle("current", Number(r.dataset.row) === current));
  const frame = sections[current].querySelector("iframe.graph-frame");
  if (frame && !frame.srcdoc) frame.srcdoc = graphs[current];
  const s = sections[current];
  label.textContent = s.dataset.label + "  (" + (current + 1) + " of " + sections.length + ")";
  prev.disabled = current === 0;
  next.disabled = current === sections.length - 1;
  document.body.dataset.current = s.dataset.step;
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
document.querySelectorAll("rect.cell[data-row]").forEach(r => {
  r.addEventListener("click", () => { if (Number(r.dataset.row) < sections.length) show(Number(r.dataset.row)); });
});
function fromHash() {
  const m = /^#step-(\d+)$/.exec(location.hash);
  const k = m ? sections.findIndex(s => s.dataset.step === m[1]) : -1;
  show(k >= 0 ? k : current);
}
window.addEventListener("hashchange", fromHash);
fromHash();
)JS";

// The drawer's page of one step, as a JSON string the script hands to the step's frame ('<'
// escaped, so no "</script>" ends the data early).
std::string graph_page_json(const Explanation& e, const TextOptions& o) {
  DrawGraph g = explain_graph(e);
  g.title = fmt::format("step {}: {} -> {}; edges: |gradient| flowing back along them", e.step,
                        e.previous, e.target);
  // The earlier steps' nodes keep only the values a small tensor shows whole (their boxes start
  // folded), so a long sentence's page does not grow with the square of its steps' full heads.
  for (auto& d : g.nodes)
    if (d.region.rfind("step ", 0) == 0) {
      d.value.head.resize(std::min<size_t>(d.value.head.size(), 16));
      d.grad.head.resize(std::min<size_t>(d.grad.head.size(), 16));
    }
  // Invalid UTF-8 in a word (the JSON would refuse it) becomes U+FFFD, as the page shows it.
  std::string s = nlohmann::json(graph_html(g, explain_draw_options(e, o)))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    if (ch == '<')
      out += "\\u003c";
    else
      out += ch;
  }
  return out;
}

}  // namespace

std::string render_html(const std::vector<Explanation>& steps, const AcrossSteps* across,
                        const TextOptions& o) {
  if (steps.empty()) return "";
  const Explanation& first = steps.front();
  size_t failed = 0, checked = 0;
  double worst = 0;
  for (const auto& e : steps)
    for (const auto& c : e.checks) {
      failed += c.pass ? 0 : 1;
      ++checked;
      worst = std::max(worst, c.rel_error);
    }
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>tapestry explain: {}</title>\n<style>{}</style></head><body>\n",
                   esc(joined(first.source)), kStyle);
  h += steps.size() > 1 ? "<h1>Backprop through attention, step by step</h1>\n"
                        : "<h1>Backprop through attention, one decoder step</h1>\n";
  h += fmt::format(
      "<div class=\"meta\">model <code>{}</code> (float64) &middot; source <code>{}</code> "
      "&middot; target <code>{}</code> (teacher-forced) &middot; finite-difference check: <span "
      "class=\"{}\">{} of {} elements pass</span>, largest relative error {:.1e}</div>\n",
      esc(first.model), esc(joined(first.source)), esc(joined(first.target_sentence)),
      failed ? "fail" : "pass", checked - failed, checked, worst);
  h += "<nav class=\"stepper\"><button id=\"prev\" title=\"previous step (left arrow or k)\">"
       "&#9664; previous</button><span id=\"where\"></span><button id=\"next\" title=\"next step "
       "(right arrow or j)\">next &#9654;</button><span class=\"keys\">keys: &larr; &rarr; (or k "
       "j), Home, End; click a cell of the maps to go to its step</span></nav>\n";
  h += sentence_maps(steps, across);
  if (across && !across->story.empty()) {
    h += "<h2>Across the sentence</h2>\n<ol class=\"story\">\n";
    for (const auto& s : across->story) h += "<li>" + esc(s) + "</li>\n";
    h += "</ol>\n";
  }
  for (const auto& e : steps) h += html_step_section(e, o);
  h += "<script type=\"application/json\" id=\"graphs\">[";
  for (size_t i = 0; i < steps.size(); ++i) h += (i ? ",\n" : "\n") + graph_page_json(steps[i], o);
  h += "]</script>\n<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return h;
}

}  // namespace tapestry::cli
