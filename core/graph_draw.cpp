// Graph drawing: reading the graph off a tape, folding regions into boxes, and Graphviz DOT.
#include "tapestry/core/graph_draw.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tapestry/core/file_io.h"
#include "tapestry/core/html.h"

namespace tapestry {

TensorSummary summarize(const Tensor& t) {
  TensorSummary s;
  for (int i = 0; i < t.ndim(); ++i) s.shape.push_back(t.dim(i));
  s.numel = t.numel();
  double sum = 0, sq = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < s.numel; ++i) {
    const double v = t.at(i);
    if (i < 64) s.head.push_back(v);
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++s.inf;
      continue;
    }
    s.min = finite ? std::min(s.min, v) : v;
    s.max = finite ? std::max(s.max, v) : v;
    sum += v;
    sq += v * v;
    ++finite;
  }
  s.mean = finite ? sum / static_cast<double>(finite) : 0;
  s.norm = std::sqrt(sq);
  return s;
}

DrawGraph capture_graph(const Var& y, const DrawOptions& options) {
  if (!y.requires_grad())
    throw ValueError(
        "draw: the value was not recorded on a tape (nothing it depends on needs a gradient: make "
        "its inputs tape leaves or parameters, outside any NoGrad scope)");
  const Tape& tape = *y.tape();
  const auto out = static_cast<size_t>(y.node());
  if (out >= tape.size() || !tape.node(out).value.shares_storage(y.value()))
    throw ValueError(
        "draw: the value is no longer on its tape (the tape was cleared after it was recorded)");
  // The nodes y depends on: a reverse walk over the tape, which is in topological order.
  std::vector<char> needed(out + 1, 0);
  needed[out] = 1;
  for (size_t i = out + 1; i-- > 0;) {
    if (!needed[i]) continue;
    for (int32_t in : tape.inputs(tape.node(i)))
      if (in >= 0) needed[static_cast<size_t>(in)] = 1;
  }
  DrawGraph g;
  g.title = options.title;
  g.output = y.node();
  for (size_t i = 0; i <= out; ++i) {
    if (!needed[i]) continue;
    const Node& n = tape.node(i);
    DrawNode d;
    d.id = static_cast<int32_t>(i);
    d.op = n.op->name;
    d.math = n.op->math ? n.op->math : "";
    d.region = tape.region_name(n.region);
    d.name = tape.display_name(d.id);
    d.leaf = n.op->backward == nullptr;
    d.param = n.op == &kParamOp;
    d.value = summarize(n.value);
    d.has_grad = n.grad.defined();
    if (d.has_grad) d.grad = summarize(n.grad);
    auto ins = tape.inputs(n);
    d.inputs.assign(ins.begin(), ins.end());
    g.nodes.push_back(std::move(d));
  }
  return g;
}

// ---------------------------------------------------------------------------------------------
// Folding. A node in region "a.b" can be hidden in the box of "a" (all of a's regions) or of
// "a.b"; when "a.b" also has subregions ("a.b.c"), its own nodes have one more box, "a.b/". A box
// key is open when it is in the expanded set; a node is drawn alone when all its keys are open.
// The HTML page's script applies the same rule (core/graph_page_assets.cpp).

namespace {

std::vector<std::string> split_region(const std::string& region) {
  std::vector<std::string> parts;
  if (region.empty()) return parts;
  size_t begin = 0;
  for (size_t dot; (dot = region.find('.', begin)) != std::string::npos; begin = dot + 1)
    if (dot > 0) parts.push_back(region.substr(0, dot));  // ".x" has no prefix ""
  parts.push_back(region);
  return parts;  // the prefixes: "a", "a.b", ...
}

// Regions that have subregions.
std::set<std::string> group_regions(const DrawGraph& g) {
  std::set<std::string> groups;
  for (const auto& n : g.nodes) {
    auto prefixes = split_region(n.region);
    for (size_t k = 0; k + 1 < prefixes.size(); ++k) groups.insert(prefixes[k]);
  }
  return groups;
}

std::vector<std::string> region_keys(const std::string& region,
                                     const std::set<std::string>& groups) {
  std::vector<std::string> keys = split_region(region);
  if (!region.empty() && groups.count(region)) keys.push_back(region + "/");
  return keys;
}

// A region's own nodes, apart from its subregions: the key "a.b/".
bool own_nodes(const std::string& key) {
  return !key.empty() && key.back() == '/';
}

// How deep a key sits: "a" 0, "a.b" 1, "a.b/" 2.
int key_level(const std::string& key) {
  int level = static_cast<int>(std::count(key.begin(), key.end(), '.'));
  return own_nodes(key) ? level + 1 : level;
}

bool under(const std::string& key, const std::string& prefix) {
  return key == prefix || key.rfind(prefix + ".", 0) == 0 || key.rfind(prefix + "/", 0) == 0;
}

DrawLayout layout_with(const DrawGraph& g, const std::set<std::string>& groups,
                       const std::set<std::string>& open) {
  DrawLayout l;
  l.expanded.assign(open.begin(), open.end());
  std::vector<int> box_of_node(g.nodes.size());
  std::map<int32_t, size_t> index;  // node id -> position in g.nodes
  // Nodes and folded regions in separate maps, so a region named "n5" is not node 5's box.
  std::map<std::string, int> box_of_region;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const DrawNode& n = g.nodes[i];
    index[n.id] = i;
    const std::vector<std::string> keys = region_keys(n.region, groups);
    const std::string* folded = nullptr;
    for (const auto& k : keys)
      if (!open.count(k)) {
        folded = &k;
        break;
      }
    int box = static_cast<int>(l.boxes.size());
    if (!folded) {
      l.boxes.push_back({fmt::format("n{}", n.id), n.id, {}});
    } else if (auto [it, fresh] = box_of_region.emplace(*folded, box); fresh) {
      l.boxes.push_back({*folded, -1, {}});
    } else {
      box = it->second;
    }
    l.boxes[static_cast<size_t>(box)].members.push_back(n.id);
    box_of_node[i] = box;
  }
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int32_t in : g.nodes[i].inputs) {
      const auto at = index.find(in);
      if (at == index.end()) continue;
      const int from = box_of_node[at->second];
      const int to = box_of_node[i];
      if (from != to && seen.insert({from, to}).second) l.edges.emplace_back(from, to);
    }
  return l;
}

}  // namespace

DrawLayout fold_graph(const DrawGraph& g, const DrawOptions& options) {
  const std::set<std::string> groups = group_regions(g);
  std::set<std::string> keys;
  for (const auto& n : g.nodes)
    for (auto& k : region_keys(n.region, groups)) keys.insert(k);
  auto with_overrides = [&](std::set<std::string> open) {
    for (const auto& e : options.expand)
      for (const auto& k : keys)
        if (under(k, e) || under(e, k)) open.insert(k);  // e, what is under it, what holds it
    for (const auto& f : options.fold)
      for (const auto& k : keys)
        if (under(k, f)) open.erase(k);
    return open;
  };
  const auto max_boxes = static_cast<size_t>(std::max(options.max_boxes, 0));
  if (max_boxes == 0 || g.nodes.size() <= max_boxes)
    return layout_with(g, groups, with_overrides(keys));
  // Every region with subregions open and every region's own nodes folded; coarser (the deepest
  // groups closed first) while that is too many boxes.
  std::set<std::string> open;
  int deepest = -1;
  for (const auto& k : keys)
    if (groups.count(k)) {
      open.insert(k);
      deepest = std::max(deepest, key_level(k));
    }
  DrawLayout l = layout_with(g, groups, with_overrides(open));
  for (int level = deepest; l.boxes.size() > max_boxes && level >= 0; --level) {
    std::erase_if(open, [&](const std::string& k) { return key_level(k) >= level; });
    l = layout_with(g, groups, with_overrides(open));
  }
  // Then the folded regions recorded in one stretch of the tape (a loss, a bridge, keys computed
  // once), smallest first, open one at a time while the drawing stays within bounds; a region
  // recorded anew at every step stays folded.
  std::map<int32_t, size_t> position;
  for (size_t i = 0; i < g.nodes.size(); ++i) position[g.nodes[i].id] = i;
  std::vector<std::pair<size_t, std::string>> folded;
  for (const auto& box : l.boxes) {
    if (box.node >= 0) continue;
    size_t runs = 1;
    for (size_t i = 1; i < box.members.size(); ++i)
      runs += position[box.members[i]] != position[box.members[i - 1]] + 1;
    if (runs == 1) folded.emplace_back(box.members.size(), box.key);
  }
  std::sort(folded.begin(), folded.end());
  for (const auto& [size, key] : folded) {
    std::set<std::string> more = open;
    more.insert(key);
    DrawLayout m = layout_with(g, groups, with_overrides(more));
    if (m.boxes.size() > max_boxes) continue;
    open = std::move(more);
    l = std::move(m);
  }
  return l;
}

// ---------------------------------------------------------------------------------------------
// Graphviz DOT

namespace {

std::string dot_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\n') {  // DOT's own line break
      out += "\\n";
      continue;
    }
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? "," : "", shape[i]);
  return s + ")";
}

// A tensor's cell of a DOT label: every value in rows when small, else its range.
std::string tensor_cell(const TensorSummary& t, int64_t full_max) {
  if (t.numel <= full_max && static_cast<int64_t>(t.head.size()) == t.numel) {
    const int64_t cols = t.shape.empty() ? 1 : std::max<int64_t>(1, t.shape.back());
    std::string s;
    for (int64_t i = 0; i < t.numel; ++i)
      s += (i == 0 ? "" : i % cols == 0 ? "<br/>" : "  ") + num(t.head[static_cast<size_t>(i)]);
    return s.empty() ? "(empty)" : s;
  }
  std::string s = fmt::format("{} .. {}<br/>mean {}", num(t.min), num(t.max), num(t.mean));
  if (t.nan || t.inf) s += fmt::format("<br/>{} NaN, {} inf", t.nan, t.inf);
  return s;
}

// A box's DOT identifier: "n12" for a node, "r:attention.scores" for a folded region, so a region
// named like a node is still another box.
std::string dot_id(const DrawBox& b) {
  return b.node >= 0 ? b.key : "r:" + dot_escape(b.key);
}

// Soft fill colours, one per top-level region.
const char* region_colour(const std::string& region) {
  static const char* palette[] = {"#dbe9f6", "#e3f1dc", "#f6e3db", "#ebe0f4",
                                  "#f4efd2", "#d9f0ee", "#f4dbe8", "#e6e6e6"};
  if (region.empty()) return "#ffffff";
  const std::string top = region.substr(0, region.find('.'));
  size_t h = 0;
  for (char ch : top) h = h * 31 + static_cast<unsigned char>(ch);
  return palette[h % 8];
}

std::string node_label(const DrawNode& n, int64_t full_max) {
  std::string head = "<b>" + html_escape(n.op) + "</b>";
  if (!n.name.empty()) head += " " + html_escape(n.name);
  head += " " + shape_text(n.value.shape);
  std::string grad = n.has_grad ? tensor_cell(n.grad, full_max) : "-";
  return fmt::format(
      "<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\">"
      "<tr><td colspan=\"2\">{}</td></tr>"
      "<tr><td><font point-size=\"8\">value</font></td><td><font point-size=\"8\">gradient</font>"
      "</td></tr><tr><td>{}</td><td>{}</td></tr></table>>",
      head, tensor_cell(n.value, full_max), grad);
}

std::string folded_label(const DrawGraph& g, const DrawBox& b,
                         const std::map<int32_t, const DrawNode*>& by_id) {
  const bool own = own_nodes(b.key);
  const std::string region = own ? b.key.substr(0, b.key.size() - 1) : b.key;
  std::string label = fmt::format("{}{}\\n{} node{}", dot_escape(region), own ? " (own nodes)" : "",
                                  b.members.size(), b.members.size() == 1 ? "" : "s");
  std::vector<std::string> params;
  for (int32_t id : b.members) {
    const DrawNode* n = by_id.at(id);
    if (n->param && !n->name.empty()) params.push_back(n->name);
  }
  if (!params.empty()) {
    label += "\\nparameters:";
    for (size_t i = 0; i < params.size() && i < 9; ++i)  // three to a line
      label += (i % 3 == 0 ? "\\n" : ", ") + dot_escape(params[i]);
    if (params.size() > 9) label += fmt::format(" (and {} more)", params.size() - 9);
  }
  if (auto note = g.region_notes.find(region); note != g.region_notes.end())
    label += "\\n" + dot_escape(note->second);
  return label;
}

}  // namespace

std::string graph_dot(const DrawGraph& g, const DrawOptions& options) {
  const DrawLayout l = fold_graph(g, options);
  std::map<int32_t, const DrawNode*> by_id;
  for (const auto& n : g.nodes) by_id[n.id] = &n;
  std::string out = "digraph tape {\n";
  out += "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, labelloc=t";
  if (!g.title.empty()) out += fmt::format(", label=\"{}\"", dot_escape(g.title));
  out += "];\n  node [shape=plaintext, fontname=\"Helvetica\", fontsize=9];\n";
  out += "  edge [color=\"#555555\", fontname=\"Helvetica\", fontsize=8];\n";

  // The cluster each box sits in: a node in its region, a folded key in its parent region.
  std::map<std::string, std::vector<std::string>> lines;  // region -> node lines
  for (const auto& b : l.boxes) {
    std::string container, line;
    if (b.node >= 0) {
      const DrawNode& n = *by_id.at(b.node);
      container = n.region;
      const char* fill = n.param ? "#fde9c4" : n.leaf ? "#eeeeee" : region_colour(n.region);
      line = fmt::format("  {} [label={}, style=filled, fillcolor=\"{}\"{}];\n", b.key,
                         node_label(n, options.full_max), fill,
                         n.id == g.output ? ", penwidth=2" : "");
    } else {
      const bool own = own_nodes(b.key);
      const std::string region = own ? b.key.substr(0, b.key.size() - 1) : b.key;
      const size_t dot = region.rfind('.');
      container = own ? region : dot == std::string::npos || dot == 0 ? "" : region.substr(0, dot);
      line = fmt::format("  \"{}\" [shape=box3d, style=filled, fillcolor=\"{}\", label=\"{}\"];\n",
                         dot_id(b), region_colour(region), folded_label(g, b, by_id));
    }
    lines[container].push_back(line);
  }
  // Nested clusters for the open regions, by prefix.
  std::set<std::string> regions;
  for (const auto& [r, _] : lines)
    for (const auto& p : split_region(r)) regions.insert(p);
  int cluster = 0;
  auto emit = [&](auto& self, const std::string& region, int depth) -> void {
    for (const auto& r : regions) {
      const size_t dot = r.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : r.substr(0, dot);
      if (parent != region || r == region) continue;
      const std::string pad(static_cast<size_t>(2 * depth + 2), ' ');
      std::string label = dot_escape(r);
      if (auto note = g.region_notes.find(r); note != g.region_notes.end())
        label += "\\n" + dot_escape(note->second);
      out += fmt::format(
          "{}subgraph cluster_{} {{\n{}  label=\"{}\"; style=\"rounded,filled\"; "
          "fillcolor=\"#f7f8fb\"; color=\"#9aa5b8\"; fontsize=10;\n",
          pad, cluster++, pad, label);
      for (const auto& line : lines[r]) out += pad + line;
      self(self, r, depth + 1);
      out += pad + "}\n";
    }
  };
  for (const auto& line : lines[""]) out += line;
  emit(emit, "", 0);

  for (const auto& [from, to] : l.edges) {
    const DrawBox& a = l.boxes[static_cast<size_t>(from)];
    const DrawBox& b = l.boxes[static_cast<size_t>(to)];
    std::string attrs;
    if (a.node >= 0 && b.node >= 0) {  // an edge between two nodes may carry its input's label
      const DrawNode& n = *by_id.at(b.node);
      for (size_t k = 0; k < n.inputs.size() && k < n.input_labels.size(); ++k)
        if (n.inputs[k] == a.node && !n.input_labels[k].empty()) {
          attrs = fmt::format(" [label=\"{}\"]", dot_escape(n.input_labels[k]));
          break;
        }
    }
    // An edge into an earlier box is a recurrence (a later step reading an earlier one).
    if (to < from) attrs = " [style=dashed, color=\"#c0772f\", constraint=false]";
    out += fmt::format("  \"{}\" -> \"{}\"{};\n", dot_id(a), dot_id(b), attrs);
  }
  out += "}\n";
  return out;
}

void draw_graph(const Var& y, const std::string& path, const DrawOptions& options) {
  auto ends_with = [&](std::string_view ext) {
    return path.size() >= ext.size() &&
           path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  std::string text;
  if (ends_with(".dot") || ends_with(".gv"))
    text = graph_dot(capture_graph(y, options), options);
  else if (ends_with(".html") || ends_with(".htm"))
    text = graph_html(capture_graph(y, options), options);
  else
    throw ValueError(fmt::format(
        "draw_graph: '{}': unknown format (the path must end in .dot, .gv, .html or .htm)", path));
  write_file_atomic(path, text);
}

}  // namespace tapestry
