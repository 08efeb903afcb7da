// Explain as Graphviz DOT: the tape as a graph, one cluster per region, every edge labelled with
// the norm of the gradient that flows back along it.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "tools/explain.h"

namespace tapestry::cli {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

// Long equations broken into lines of about 60 characters ("\n" in a DOT label).
std::string wrap_label(const std::string& s) {
  std::string out;
  size_t line = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == ' ' && line > 60) {
      out += "\\n";
      line = 0;
      continue;
    }
    out += s[i];
    ++line;
  }
  return out;
}

std::string node_line(const ExplainNode& n) {
  std::string label = n.op;
  if (!n.label.empty()) label += "\\n" + escape(n.label);
  label += "\\n" + shape_text(n.shape);
  const char* fill = n.op == "param"
                         ? (n.label.rfind("decoder.attention.", 0) == 0 ? "#f6c667" : "#fde9c4")
                     : n.label.empty() ? "white"
                                       : "#cfe3f7";
  return fmt::format("    n{} [label=\"{}\", fillcolor=\"{}\"];\n", n.index, label, fill);
}

}  // namespace

std::string render_dot(const Explanation& e) {
  std::string src;
  for (const auto& w : e.source) src += (src.empty() ? "" : " ") + w;
  std::string out = "digraph tape {\n";
  out += fmt::format(
      "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, labelloc=t, label=\"{}\\nsource: "
      "{}  target: {}  L = {:.6g}\\nedges: |gradient| flowing back along them\"];\n",
      escape(e.model), escape(src), escape(e.target), e.loss);
  out += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=9];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\", dir=forward];\n";
  // Regions in order of first appearance, each a cluster.
  std::vector<std::string> regions;
  for (const auto& n : e.nodes)
    if (std::find(regions.begin(), regions.end(), n.region) == regions.end())
      regions.push_back(n.region);
  for (size_t r = 0; r < regions.size(); ++r) {
    const std::string& region = regions[r];
    std::string body;
    for (const auto& n : e.nodes)
      if (n.region == region) body += node_line(n);
    if (region.empty()) {
      out += body;
      continue;
    }
    auto eq = e.equations.find(region);
    out += fmt::format(
        "  subgraph cluster_{} {{\n    label=\"{}{}\"; style=\"rounded,filled\"; "
        "fillcolor=\"#f4f6fa\"; color=\"#9aa5b8\"; fontsize=10;\n",
        r, escape(region), eq == e.equations.end() ? "" : "\\n" + wrap_label(escape(eq->second)));
    out += body + "  }\n";
  }
  for (const auto& n : e.nodes) {
    std::set<int32_t> drawn;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int32_t in = n.inputs[k];
      if (in < 0 || !drawn.insert(in).second) continue;
      const auto uses = std::count(n.inputs.begin(), n.inputs.end(), in);
      const std::string times = uses > 1 ? fmt::format(" (x{})", uses) : "";
      if (n.passed[k] < 0)
        out += fmt::format("  n{} -> n{} [style=dashed{}];\n", in, n.index,
                           times.empty() ? "" : ", label=\"" + times + "\"");
      else
        out +=
            fmt::format("  n{} -> n{} [label=\"{}{}\"];\n", in, n.index, num(n.passed[k]), times);
    }
  }
  out += "}\n";
  return out;
}

}  // namespace tapestry::cli
