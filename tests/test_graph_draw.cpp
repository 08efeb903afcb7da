// The graph drawer: what it reads off a tape, how it folds regions into boxes, DOT through
// Graphviz, and the HTML page in headless Chromium (where they are installed) on an MLP and the
// demo model.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_run.h"
#include "page_check.h"
#include "tapestry/core/file_io.h"
#include "tapestry/core/graph_draw.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/nn/linear.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using Catch::Matchers::Contains;
using tapestry::testing::TempDir;
using namespace tapestry::testing;
namespace fs = std::filesystem;

namespace {

struct MLP : nn::Module {
  nn::Linear l1, l2;
  explicit MLP(Rng& rng) : l1(2, 3, true, rng, DType::f64), l2(3, 1, true, rng, DType::f64) {
    add_module("l1", l1);
    add_module("l2", l2);
  }
};

// One recorded step of the MLP on XOR's inputs: loss = mean((sigmoid(l2(tanh(l1 x))) - y)^2).
struct MLPStep {
  Rng rng{1};
  MLP mlp{rng};
  Tape tape;
  Var hidden, loss;
  explicit MLPStep(bool keep_grads) {
    tape.set_keep_grads(keep_grads);
    nn::name_parameters(tape, mlp);
    Tensor x = Tensor::from({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2}, DType::f64);
    Tensor y = Tensor::from({0, 1, 1, 0}, {4, 1}, DType::f64);
    hidden = ops::tanh(mlp.l1.forward(tape, x));
    Var d = ops::sigmoid(mlp.l2.forward(tape, hidden)) - y;
    loss = ops::mean(d * d);
    tape.backward(loss);
  }
};

// The demo model's shape (tools/demo.sh) and one teacher-forced training step on 6 sentences.
struct DemoStep {
  models::Seq2Seq model{[] {
    models::Seq2SeqConfig c;
    c.src_vocab = 155;
    c.tgt_vocab = 197;
    c.emb = 64;
    c.hidden = 128;
    return c;
  }()};
  Tape tape;
  Var loss;
  DemoStep() {
    std::vector<models::EncodedPair> pairs;
    for (int i = 0; i < 6; ++i) {
      models::EncodedPair p;
      for (int t = 0; t < 5 + i % 3; ++t) {
        p.src.push_back(4 + (i * 7 + t) % 150);
        p.tgt.push_back(4 + (i * 5 + t) % 190);
      }
      pairs.push_back(p);
    }
    std::vector<int64_t> rows{0, 1, 2, 3, 4, 5};
    models::Batch batch = models::make_batch(pairs, rows);
    tape.set_keep_grads(true);
    nn::name_parameters(tape, model);
    loss = model.loss(tape, batch, 1.0);
    tape.backward(loss);
  }
};

bool have(const char* program) {
  return std::system(fmt::format("command -v {} >/dev/null 2>&1", program).c_str()) == 0;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

}  // namespace

TEST_CASE("capture_graph reads the nodes y depends on, with names, values and gradients",
          "[graph]") {
  MLPStep s(true);
  Var unrelated = ops::exp(s.hidden);  // recorded after the loss and not part of it
  (void)unrelated;
  DrawGraph g = capture_graph(s.loss, {.title = "xor"});
  REQUIRE(g.title == "xor");
  REQUIRE(g.output == s.loss.node());
  // 4 parameters, affine, tanh, affine, sigmoid, sub, mul, mean: in tape order.
  REQUIRE(g.nodes.size() == 11);
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op);
  CHECK(ops == std::vector<std::string>{"param", "param", "affine", "tanh", "param", "param",
                                        "affine", "sigmoid", "sub", "mul", "mean"});
  std::set<std::string> params;
  for (const auto& n : g.nodes) {
    if (n.param) params.insert(n.name);
    for (int32_t in : n.inputs) CHECK(in < n.id);  // data-flow order
    const Node& t = s.tape.node(static_cast<size_t>(n.id));
    REQUIRE(n.value.numel == t.value.numel());
    for (size_t i = 0; i < n.value.head.size(); ++i) CHECK(n.value.head[i] == t.value.at(i));
    REQUIRE(n.has_grad);  // kept: every node has its gradient
    for (size_t i = 0; i < n.grad.head.size(); ++i) CHECK(n.grad.head[i] == t.grad.at(i));
  }
  CHECK(params == std::set<std::string>{"l1.weight", "l1.bias", "l2.weight", "l2.bias"});
  CHECK(g.nodes.back().value.head[0] == s.loss.value().item());
  CHECK(g.nodes.back().grad.head[0] == 1.0);

  // Without kept gradients only the leaves have theirs.
  MLPStep plain(false);
  for (const auto& n : capture_graph(plain.loss).nodes) CHECK(n.has_grad == n.leaf);

  // A value recorded on no tape cannot be drawn.
  REQUIRE_THROWS_AS(capture_graph(Var(Tensor::zeros({2}, DType::f64))), ValueError);
}

TEST_CASE("summarize gives a tensor's range, and counts NaN and infinities apart", "[graph]") {
  Tensor t = Tensor::from({1, -2, NAN, INFINITY, 3}, {5}, DType::f64);
  TensorSummary s = summarize(t);
  CHECK(s.numel == 5);
  CHECK(s.head.size() == 5);
  CHECK(s.min == -2);
  CHECK(s.max == 3);
  CHECK(s.mean == Approx(2.0 / 3));
  CHECK(s.norm == Approx(std::sqrt(14.0)));
  CHECK(s.nan == 1);
  CHECK(s.inf == 1);
  Tensor big = Tensor::zeros({100, 3}, DType::f32);
  CHECK(summarize(big).head.size() == 64);
}

TEST_CASE("a small graph is drawn node by node", "[graph]") {
  MLPStep s(true);
  DrawGraph g = capture_graph(s.loss);
  DrawLayout l = fold_graph(g);
  REQUIRE(l.boxes.size() == g.nodes.size());
  for (const auto& b : l.boxes) CHECK(b.node >= 0);
  // One edge per (input, consumer) pair: 4 parameters, 2 affines' inputs, and the chain.
  CHECK(l.edges.size() == 10);
}

TEST_CASE("the demo model's step folds into at most 40 boxes, regions by their names", "[graph]") {
  DemoStep s;
  DrawGraph g = capture_graph(s.loss);
  REQUIRE(g.nodes.size() > 150);
  DrawLayout l = fold_graph(g);
  INFO(fmt::format("{} nodes in {} boxes", g.nodes.size(), l.boxes.size()));
  CHECK(l.boxes.size() <= 40);
  // Every node is in exactly one box, and a folded box holds the nodes of its region only.
  std::map<int32_t, int> seen;
  std::map<int32_t, const DrawNode*> by_id;
  for (const auto& n : g.nodes) by_id[n.id] = &n;
  std::set<std::string> folded;
  for (const auto& b : l.boxes) {
    for (int32_t id : b.members) ++seen[id];
    if (b.node >= 0) continue;
    folded.insert(b.key);
    const bool own = b.key.back() == '/';
    const std::string region = own ? b.key.substr(0, b.key.size() - 1) : b.key;
    for (int32_t id : b.members) {
      const std::string& r = by_id[id]->region;
      CHECK((r == region || (!own && r.rfind(region + ".", 0) == 0)));
    }
  }
  CHECK(seen.size() == g.nodes.size());
  for (const auto& [id, times] : seen) CHECK(times == 1);
  // The recurrent parts fold per region; the loss, recorded once, is drawn as its node.
  for (const char* region : {"encoder", "decoder.rnn", "attention.scores", "attention.softmax",
                             "attention.context", "output"})
    CHECK(folded.count(region) == 1);
  CHECK(folded.count("loss") == 0);
  // The parameters are named in the boxes that hold them.
  std::string dot = graph_dot(g);
  CHECK_THAT(dot, Contains("decoder.attention.W") && Contains("encoder.embedding.weight"));

  SECTION("expand opens a region node by node, fold closes one") {
    DrawLayout e = fold_graph(g, {.expand = {"attention.scores"}, .fold = {"loss"}});
    size_t scores = 0;
    for (const auto& n : g.nodes) scores += n.region == "attention.scores";
    size_t alone = 0;
    bool loss_folded = false;
    for (const auto& b : e.boxes) {
      if (b.node >= 0 && by_id[b.node]->region == "attention.scores") ++alone;
      loss_folded |= b.key == "loss";
    }
    CHECK(alone == scores);
    CHECK(loss_folded);
  }
  SECTION("max_boxes 0 never folds") {
    CHECK(fold_graph(g, {.max_boxes = 0}).boxes.size() == g.nodes.size());
  }
}

TEST_CASE("DOT renders with Graphviz", "[graph]") {
  if (!have("dot")) {
    WARN("Graphviz's dot not found (apt-get install graphviz): DOT not rendered");
    return;
  }
  TempDir dir("graph_dot");
  MLPStep s(true);
  DemoStep d;
  draw_graph(s.loss, dir / "mlp.dot", {.title = "MLP"});
  draw_graph(d.loss, dir / "demo.dot", {.title = "demo step"});
  for (const char* name : {"mlp", "demo"}) {
    const std::string cmd =
        fmt::format("dot -Tsvg '{}' -o '{}' 2>&1", dir / (name + std::string(".dot")),
                    dir / (name + std::string(".svg")));
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(slurp(dir / (name + std::string(".svg"))).find("<svg") != std::string::npos);
  }
}

TEST_CASE("the HTML page is self-contained, and opens and folds regions in Chromium", "[graph]") {
  TempDir dir("graph_html");
  DemoStep d;
  const std::string path = dir / "demo.html";
  draw_graph(d.loss, path, {.title = "demo <step> & \"co\"'s"});
  const std::string html = slurp(path);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<title>demo &lt;step&gt; &amp; &quot;co&quot;&#39;s</title>") !=
        std::string::npos);
  check_self_contained(html);
  CHECK(html.find("<iframe") == std::string::npos);
  if (!have_chromium()) {
    WARN("chromium not found (apt-get install chromium): the page's script not run");
    return;
  }
  DrawGraph g = capture_graph(d.loss);
  DrawLayout l = fold_graph(g);
  Browser b = load_in_chromium(path);
  CHECK(b.console.empty());
  CHECK(count(b.dom, "class=\"box") == l.boxes.size());
  CHECK(b.dom.find(fmt::format("{} boxes for {} nodes", l.boxes.size(), g.nodes.size())) !=
        std::string::npos);

  // Clicks: open attention.scores, fold it back by its chip, open everything, fold everything.
  size_t scores = 0, roots = 0;
  std::set<std::string> tops;
  for (const auto& n : g.nodes) {
    scores += n.region == "attention.scores";
    if (n.region.empty())
      ++roots;
    else
      tops.insert(n.region.substr(0, n.region.find('.')));
  }
  std::string page = html;
  page.replace(page.rfind("</body>"), 7, R"(<script>
const count = () => document.querySelectorAll(".box").length;
const r = [count()];
document.querySelector('.box.folded[data-key="attention.scores"]').click(); r.push(count());
document.querySelector('.chip[data-fold="attention.scores"]').click(); r.push(count());
document.getElementById("open-all").click(); r.push(count());
document.getElementById("fold-all").click(); r.push(count());
document.body.setAttribute("data-clicks", r.join(","));
</script></body>)");
  write_file_atomic(dir / "clicks.html", page);
  Browser c = load_in_chromium(dir / "clicks.html");
  CHECK(c.console.empty());
  const size_t n = l.boxes.size();
  CHECK_THAT(c.dom, Contains(fmt::format("data-clicks=\"{},{},{},{},{}\"", n, n - 1 + scores, n,
                                         g.nodes.size(), tops.size() + roots)));
}

TEST_CASE("NaN and infinities reach the page as text, and it still loads", "[graph]") {
  TempDir dir("graph_nan");
  Tape tape;
  tape.set_keep_grads(true);
  Var x = tape.leaf(Tensor::from({-1, 0, 2}, {3}, DType::f64));
  Var y = ops::sum(ops::log(x));  // log(-1) = NaN, log(0) = -inf
  tape.backward(y);
  draw_graph(y, dir / "nan.html");
  const std::string html = slurp(dir / "nan.html");
  CHECK_THAT(html, Contains("\"NaN\"") && Contains("\"-Infinity\""));
  if (!have_chromium()) return;
  Browser b = load_in_chromium(dir / "nan.html");
  CHECK(b.console.empty());
  CHECK(count(b.dom, "class=\"box") == 3);
  CHECK(b.dom.find(">NaN<") != std::string::npos);
}

TEST_CASE("draw_graph writes by extension and names what it refuses", "[graph]") {
  TempDir dir("graph_files");
  MLPStep s(true);
  REQUIRE_THROWS_WITH(draw_graph(s.loss, dir / "graph.png"),
                      Contains("graph.png") && Contains(".dot, .gv, .html or .htm"));
  draw_graph(s.loss, dir / "graph.gv");
  CHECK(slurp(dir / "graph.gv").rfind("digraph", 0) == 0);
  REQUIRE_THROWS_AS(draw_graph(s.loss, dir / "no/such/dir/graph.html"), FileError);
  REQUIRE_THROWS_WITH(draw_graph(s.loss, dir / "no/such/dir/graph.html"),
                      Contains("no/such/dir/graph.html"));
  // Nothing is left behind by a failed write.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("regions named like nodes or starting with a dot are boxes of their own", "[graph]") {
  Tape tape;
  Var x = tape.leaf(Tensor::from({1, 2}, {2}, DType::f64));  // node 0
  Var y;
  {
    Region a(tape, "n2");  // named like node 2's box
    y = ops::exp(x);       // node 1
  }
  Var z = ops::tanh(y);  // node 2, in no region
  {
    Region b(tape, ".x");
    z = ops::sum(z * 2.0);
  }
  DrawGraph g = capture_graph(z);
  DrawLayout l = fold_graph(g, {.max_boxes = 2, .fold = {"n2", ".x"}});
  std::set<std::string> keys;
  for (const auto& b : l.boxes) keys.insert((b.node >= 0 ? "node " : "region ") + b.key);
  CHECK(keys == std::set<std::string>{"node n0", "region n2", "node n2", "region .x"});
  const std::string dot = graph_dot(g, {.max_boxes = 2, .fold = {"n2", ".x"}});
  CHECK_THAT(dot, Contains("\"r:n2\" [shape=box3d") && Contains("n2 [label=<") &&
                      Contains("\"r:.x\" [shape=box3d"));
}

TEST_CASE("a value whose tape was cleared is refused, not read", "[graph]") {
  Tape tape;
  Var x = tape.leaf(Tensor::from({1, 2}, {2}, DType::f64));
  Var y = ops::sum(ops::exp(x));
  tape.clear();
  REQUIRE_THROWS_WITH(capture_graph(y), Contains("no longer on its tape"));
  Var x2 = tape.leaf(Tensor::from({3}, {1}, DType::f64));  // a new recording reuses node 0
  (void)x2;
  REQUIRE_THROWS_AS(capture_graph(x), ValueError);
}
