// Explain as Graphviz DOT, drawn by the graph drawer (core/graph_draw.h): the step's story under
// the title, its tape with the regions folded unless --groups opens them, each edge labelled with
// the norm of the gradient that flows back along it, each region with its equation.
#include <fmt/format.h>

#include "tapestry/core/graph_draw.h"
#include "tools/explain.h"

namespace tapestry::cli {

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

DrawGraph explain_graph(const Explanation& e) {
  const std::string src = joined(e.source);
  DrawGraph g;
  g.title = fmt::format(
      "{}\nsource: {}  target: {}  L = {:.6g}\nedges: |gradient| flowing back along them", e.model,
      src, e.target, e.loss);
  g.region_notes = e.equations;
  g.output = e.focus.loss;
  for (const auto& n : e.nodes) {
    DrawNode d;
    d.id = n.index;
    d.op = n.op;
    d.math = n.math;
    // The earlier steps' nodes fold under one group per step ("step 0", ...): their regions
    // repeat the explained step's.
    d.region =
        n.step >= 0 && n.step < e.step ? fmt::format("step {}.{}", n.step, n.region) : n.region;
    d.name = n.label;
    d.param = n.op == "param";
    d.leaf = d.param || n.op == "leaf";
    const Shape shape{std::span<const int64_t>(n.shape)};
    d.value = summarize(Tensor::from(n.value, shape, DType::f64));
    d.has_grad = !n.grad.empty();
    if (d.has_grad) d.grad = summarize(Tensor::from(n.grad, shape, DType::f64));
    d.inputs = n.inputs;
    for (double passed : n.passed) d.input_labels.push_back(passed < 0 ? "" : num(passed));
    g.nodes.push_back(std::move(d));
  }
  return g;
}

DrawOptions explain_draw_options(const Explanation& e, const TextOptions& o) {
  DrawOptions draw;
  draw.expand = o.groups;
  for (int64_t k = 0; k < e.step; ++k)  // the earlier steps made the state: one box each
    draw.fold.push_back(fmt::format("step {}", k));
  draw.full_max = o.full_max;
  return draw;
}

std::string render_dot(const Explanation& e, const TextOptions& o) {
  const DrawOptions draw = explain_draw_options(e, o);
  DrawGraph g = explain_graph(e);
  // The story under the title, as the other formats carry it.
  for (const auto& sentence : e.story)
    for (const auto& line : wrap(sentence, "", "")) g.title += "\n" + line;
  return graph_dot(g, draw);
}

}  // namespace tapestry::cli
