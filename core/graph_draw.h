// Graph drawing: the recorded computation behind any value, as Graphviz DOT or as a self-contained
// HTML page, in the manner of micrograd's draw_dot: each node shows its op, shape, value and
// gradient side by side, edges run in data-flow order, nodes are grouped by the tape's regions
// (folded into one box each while a graph is large), and parameters go by their names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tapestry/core/tape.h"

namespace tapestry {

struct DrawOptions {
  std::string title{};  // a heading; empty for none
  // Regions are folded, finest first and coarser if needed, until the drawing has at most this
  // many boxes (a graph with no more nodes than this is drawn whole). 0: never fold.
  int max_boxes = 40;
  // Regions drawn node by node whatever their size ("attention" opens attention.scores, ...), and
  // regions always folded into one box.
  std::vector<std::string> expand{}, fold{};
  int64_t full_max = 16;  // a tensor of up to this many elements is shown whole
};

// A tensor as a drawing shows it: its first values (every value when it is small) and its range.
struct TensorSummary {
  std::vector<int64_t> shape;
  int64_t numel = 0;
  std::vector<double> head;                     // the first min(numel, 64) values, row-major
  double min = 0, max = 0, mean = 0, norm = 0;  // over the finite values
  int64_t nan = 0, inf = 0;
};
TensorSummary summarize(const Tensor& t);

// One node of a drawing, as plain data.
struct DrawNode {
  int32_t id = 0;  // the tape's node index
  std::string op, math, region;
  std::string name;  // a label or a parameter's path ("decoder.attention.W"); "" if none
  bool leaf = false, param = false;
  TensorSummary value;
  bool has_grad = false;
  TensorSummary grad;
  std::vector<int32_t> inputs;            // node ids; -1 for a constant input
  std::vector<std::string> input_labels;  // optional, per input (e.g. the gradient sent back)
};

// What a drawing shows: the nodes (in tape order, which is data-flow order) and notes on regions
// (an equation, say) that a folded box or a cluster carries.
struct DrawGraph {
  std::string title;
  std::vector<DrawNode> nodes;
  std::map<std::string, std::string> region_notes;
  int32_t output = -1;  // the node the drawing was asked for
};

// The nodes y depends on, read off its tape: values, and gradients where the tape holds them (a
// leaf's and a parameter's always; an inner node's after backward only with
// Tape::set_keep_grads(true)). Names come from labels and Tape::set_tensor_names
// (nn::name_parameters). Throws ValueError if y was not recorded on a tape.
DrawGraph capture_graph(const Var& y, const DrawOptions& options = {});

// A box of the drawing: one node, or a folded region standing for many.
struct DrawBox {
  std::string key;    // "n12" for a node, or the folded region's key ("attention.scores")
  int32_t node = -1;  // the node drawn, or -1 for a folded region
  std::vector<int32_t> members;  // the nodes a folded region holds
};
struct DrawLayout {
  std::vector<DrawBox> boxes;              // ordered by their first node
  std::vector<std::string> expanded;       // the region keys open in this view
  std::vector<std::pair<int, int>> edges;  // (from box, to box), data flow, deduplicated
};
// Which regions fold, following the options (the HTML page starts from the same view).
DrawLayout fold_graph(const DrawGraph& g, const DrawOptions& options = {});

// Graphviz DOT: `dot -Tsvg graph.dot -o graph.svg`.
std::string graph_dot(const DrawGraph& g, const DrawOptions& options = {});
// One HTML page, self-contained (inline CSS and script, nothing from the network): the graph laid
// out in the browser; a folded region opens on a click, and the toolbar folds them again.
std::string graph_html(const DrawGraph& g, const DrawOptions& options = {});

// Draws the graph behind y to `path`: DOT for .dot and .gv, the HTML page for .html and .htm.
// Throws ValueError for another extension, Error naming the path when it cannot be written.
void draw_graph(const Var& y, const std::string& path, const DrawOptions& options = {});

}  // namespace tapestry
