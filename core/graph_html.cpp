// Graph drawing as one self-contained HTML page: the graph as JSON, and an inline script that folds
// regions, lays the boxes out in layers (data flowing down) and draws the edges.
#include <fmt/format.h>

#include <cmath>

#include "tapestry/core/graph_draw.h"
#include "tapestry/core/graph_page_assets.h"
#include "tapestry/core/html.h"

namespace tapestry {

namespace {

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '<':
        out += "\\u003c";
        break;  // never "</script>" inside the script element
      default:
        if (u < 0x20)
          out += fmt::format("\\u{:04x}", u);
        else
          out += ch;
    }
  }
  out += '"';
}

// JSON has no NaN or infinity: they travel as strings that the script's Number() reads back.
void json_number(std::string& out, double v) {
  if (std::isnan(v))
    out += "\"NaN\"";
  else if (std::isinf(v))
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  else
    out += fmt::format("{:.6g}", v);
}

void json_tensor(std::string& out, const TensorSummary& t) {
  out += "{\"shape\":[";
  for (size_t i = 0; i < t.shape.size(); ++i) out += fmt::format("{}{}", i ? "," : "", t.shape[i]);
  out += fmt::format("],\"numel\":{},\"head\":[", t.numel);
  for (size_t i = 0; i < t.head.size(); ++i) {
    if (i) out += ',';
    json_number(out, t.head[i]);
  }
  out += "],\"min\":";
  json_number(out, t.min);
  out += ",\"max\":";
  json_number(out, t.max);
  out += ",\"mean\":";
  json_number(out, t.mean);
  out += ",\"norm\":";
  json_number(out, t.norm);
  out += fmt::format(",\"nan\":{},\"inf\":{}}}", t.nan, t.inf);
}

std::string graph_json(const DrawGraph& g, const DrawOptions& o, const DrawLayout& l) {
  std::string out = "{\"title\":";
  json_string(out, g.title);
  out += fmt::format(",\"output\":{},\"fullMax\":{},\"expanded\":[", g.output, o.full_max);
  for (size_t i = 0; i < l.expanded.size(); ++i) {
    if (i) out += ',';
    json_string(out, l.expanded[i]);
  }
  out += "],\"notes\":{";
  bool first = true;
  for (const auto& [region, note] : g.region_notes) {
    if (!first) out += ',';
    first = false;
    json_string(out, region);
    out += ':';
    json_string(out, note);
  }
  out += "},\"nodes\":[";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const DrawNode& n = g.nodes[i];
    out += fmt::format("{}{{\"id\":{},\"op\":", i ? "," : "", n.id);
    json_string(out, n.op);
    out += ",\"math\":";
    json_string(out, n.math);
    out += ",\"region\":";
    json_string(out, n.region);
    out += ",\"name\":";
    json_string(out, n.name);
    out += fmt::format(",\"leaf\":{},\"param\":{},\"inputs\":[", n.leaf, n.param);
    for (size_t k = 0; k < n.inputs.size(); ++k)
      out += fmt::format("{}{}", k ? "," : "", n.inputs[k]);
    out += "],\"labels\":[";
    for (size_t k = 0; k < n.input_labels.size(); ++k) {
      if (k) out += ',';
      json_string(out, n.input_labels[k]);
    }
    out += "],\"value\":";
    json_tensor(out, n.value);
    out += ",\"grad\":";
    if (n.has_grad)
      json_tensor(out, n.grad);
    else
      out += "null";
    out += '}';
  }
  out += "]}";
  return out;
}

}  // namespace

std::string graph_html(const DrawGraph& g, const DrawOptions& options) {
  const DrawLayout l = fold_graph(g, options);
  std::string title = g.title.empty() ? "Tapestry graph" : g.title;
  const std::string esc = html_escape(title);
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{0}</title>\n"
      "<style>{1}</style></head>\n<body>\n<header><h1>{0}</h1>\n"
      "<button id=\"fold-all\">fold all</button><button id=\"open-all\">open all</button>"
      "<button id=\"zoom-out\">&minus;</button><button id=\"zoom-in\">+</button>\n"
      "<span class=\"hint\" id=\"counts\"></span>\n"
      "<span class=\"hint\">data flows down; each box shows a value and its gradient side by "
      "side; a double-bordered box is a folded region (click to open); dashed orange edges run "
      "back to an earlier step (recurrence)</span>\n"
      "<span class=\"hint\" id=\"open-label\">open regions (click to fold):</span><span "
      "class=\"open-list\" id=\"open-list\"></span>"
      "</header>\n<div id=\"viewport\"><div id=\"canvas\"></div></div>\n"
      "<script type=\"application/json\" id=\"graph-data\">{2}</script>\n<script>{3}</script>\n"
      "</body></html>\n",
      esc, detail::kGraphPageStyle, graph_json(g, options, l), detail::kGraphPageScript);
}

}  // namespace tapestry
