// tapestry explain, run as a program: its finite-difference check for every variant, its JSON
// gradients against an ordinary training backward pass, DOT through Graphviz, text layout, HTML
// self-containment, a trained (saved) model, and the errors for bad flags.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "explain_run.h"
#include "page_check.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/seq2seq.h"
#include "tools/explain.h"

using namespace tapestry;
using nlohmann::json;
namespace fs = std::filesystem;
using namespace tapestry::testing;

namespace {

const char* kVariants[] = {"none",       "bahdanau", "dot",     "general", "concat",
                           "scaled-dot", "cosine",   "local-m", "local-p"};

}  // namespace

// Every step's checks: every element of every attention parameter, of the encoder states (of the
// summary for `none`, whose context it is) and of the step's scores, weights and context; each
// verdict recomputed from the numbers printed beside it; every link of the chain recomputed by
// hand equal to the tape.
void check_step(const json& j, const std::string& attention) {
  INFO("step " << j["step"].get<int>());
  std::map<std::string, int64_t> expected;
  for (auto& [name, p] : j["parameters"].items())
    if (p["attention"].get<bool>()) expected[name] = static_cast<int64_t>(p["value"].size());
  const bool none = attention == "none";
  CHECK(expected.empty() == (none || attention == "dot" || attention == "scaled-dot"));
  auto size_of = [&](const char* focus) {
    return static_cast<int64_t>(j["nodes"][j["focus"][focus].get<int32_t>()]["value"].size());
  };
  expected[none ? "encoder summary" : "h (encoder states)"] = size_of(none ? "summary" : "keys");
  if (!none) {
    expected["e (scores)"] = size_of("scores");
    expected["a (weights)"] = size_of("weights");
    expected["c (context)"] = size_of("context");
  }
  std::map<std::string, int64_t> checked;
  std::map<std::string, double> scale;  // the tensor's largest |gradient|
  for (const auto& c : j["check"]) {
    const std::string t = c["parameter"];
    ++checked[t];
    scale[t] = std::max(
        {scale[t], std::abs(c["analytic"].get<double>()), std::abs(c["numeric"].get<double>())});
  }
  CHECK(checked == expected);
  for (const auto& c : j["check"]) {
    const double a = c["analytic"], n = c["numeric"];
    const double s = scale[c["parameter"].get<std::string>()];
    const double rel = s > 0 ? std::abs(a - n) / s : std::abs(a - n);
    CHECK(std::abs(rel - c["rel_error"].get<double>()) <= 1e-12 * rel);
    CHECK(rel < 1e-6);
    CHECK(c["pass"].get<bool>());
  }
  for (const auto& link : j["chain"]) {
    auto tape = link["tape"].get<std::vector<double>>();
    auto hand = link["by_hand"].get<std::vector<double>>();
    if (tape.empty() || hand.empty()) continue;
    INFO(link["formula"].get<std::string>());
    CHECK(max_abs_diff(tape, hand) < 1e-12);
  }
  CHECK_FALSE(j["story"].empty());
}

TEST_CASE("explain --step all: every step's check passes for every variant, decoder and cell",
          "[explain]") {
  ExplainDir dir;
  for (const char* attention : kVariants)
    for (const char* decoder : {"bahdanau", "luong"})
      for (const char* cell : {"gru", "lstm"}) {
        const std::string args = fmt::format("--attention {} --decoder {} --cell {} --step all",
                                             attention, decoder, cell);
        INFO(args);
        json all = explain_json(dir, args);
        // "the black cat" -> "le chat noir": steps 0..3, the last writing <eos>.
        REQUIRE(all["steps"].size() == 4);
        for (size_t t = 0; t < all["steps"].size(); ++t) {
          const json& j = all["steps"][t];
          CHECK(j["step"].get<size_t>() == t);
          CHECK(j["target"].get<std::string>() == (t < 3 ? j["target_sentence"][t] : "<eos>"));
          check_step(j, attention);
        }
        // The per-step gradients into h_j add up to one backward pass of the sentence's loss.
        CHECK(all["across"]["sum_difference"].get<double>() < 1e-12);
      }
}

TEST_CASE("explain: JSON gradients at every step equal an ordinary training backward pass",
          "[explain]") {
  // The reference is Seq2Seq::loss on the whole teacher-forced sentence with every target but
  // step t's masked (<pad>), so the loss is L_t: the training path (the step's features stacked
  // and the output layer run on (B,T,F)), with none of explain's machinery (kept gradients,
  // labels, the re-run of each backward to measure what it passes on).
  ExplainDir dir;
  for (const char* attention : kVariants)
    for (const char* decoder : {"bahdanau", "luong"}) {
      const std::string args =
          fmt::format("--attention {} --decoder {} --cell {} --step all", attention, decoder,
                      std::string(attention) == "dot" ? "lstm" : "gru");
      INFO(args);
      json all = explain_json(dir, args);
      for (const json& j : all["steps"]) {
        const auto t = j["step"].get<int64_t>();
        INFO("step " << t);
        models::Seq2SeqConfig config = models::Seq2SeqConfig::from_json(j["config"].dump());
        models::Seq2Seq model(config, DType::f64);
        const models::Batch batch = step_batch(j);
        Tape tape;
        Var loss = model.loss(tape, batch);
        tape.backward(loss);
        CHECK(std::abs(loss.value().item() - j["loss"].get<double>()) < 1e-12);
        auto named = model.named_parameters();
        REQUIRE(named.size() == j["parameters"].size());
        for (const auto& [name, p] : named) {
          INFO(name);
          const json& jp = j["parameters"].at(name);
          CHECK(max_abs_diff(p->value.to_vector(), jp["value"].get<std::vector<double>>()) == 0);
          CHECK(max_abs_diff(p->grad.to_vector(), jp["grad"].get<std::vector<double>>()) < 1e-12);
          const int32_t node = jp["node"].get<int32_t>();
          if (node >= 0)
            CHECK(max_abs_diff(p->grad.to_vector(),
                               j["nodes"][node]["grad"].get<std::vector<double>>()) < 1e-12);
        }
      }
    }
}

TEST_CASE("explain: each node passes on exactly the gradient its inputs receive", "[explain]") {
  // For an input read by one node only, the share that node passes must be the input's whole
  // gradient; for an input read by several, the shares' norms bound its gradient's norm (the
  // triangle inequality).
  ExplainDir dir;
  for (const char* args : {"", "--attention cosine --decoder luong --cell lstm",
                           "--attention local-p --bidirectional"}) {
    INFO(args);
    json j = explain_json(dir, args);
    const auto& nodes = j["nodes"];
    std::vector<std::vector<double>> shares(nodes.size());
    for (const auto& n : nodes) {
      std::vector<int32_t> seen;
      for (size_t k = 0; k < n["inputs"].size(); ++k) {
        const int32_t in = n["inputs"][k];
        if (in < 0 || std::find(seen.begin(), seen.end(), in) != seen.end()) continue;
        seen.push_back(in);
        const double passed = n["passed"][k];
        if (passed >= 0) shares[static_cast<size_t>(in)].push_back(passed);
      }
    }
    int single = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i]["grad"].is_null() || shares[i].empty()) continue;
      double g = 0, total = 0;
      for (double x : nodes[i]["grad"].get<std::vector<double>>()) g += x * x;
      g = std::sqrt(g);
      for (double s : shares[i]) total += s;
      if (shares[i].size() == 1) {
        ++single;
        CHECK(std::abs(shares[i][0] - g) <= 1e-12 * std::max(1.0, g));
      } else {
        CHECK(g <= total * (1 + 1e-12));
      }
    }
    // Most nodes pass their gradient to an input that no other node reads: the exact check ran
    // on them, not on a handful.
    CHECK(single > static_cast<int>(nodes.size()) / 2);
  }
}

TEST_CASE("explain: DOT output folds what --groups leaves out, and renders with Graphviz",
          "[explain]") {
  ExplainDir dir;
  const std::string dot = dir.file("tape.dot"), svg = dir.file("tape.svg");
  json j = explain_json(dir, "--attention concat --decoder luong");
  // Node statements ("n12 [label=...") and folded regions ("\"r:encoder\" [shape=box3d ...").
  auto statements = [](const std::string& text) {
    std::set<int> nodes;
    std::set<std::string> folded;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const size_t at = line.find_first_not_of(' ');
      if (at == std::string::npos) continue;
      if (line.compare(at, 1, "n") == 0 && line.find(" [label=<") != std::string::npos)
        nodes.insert(std::stoi(line.substr(at + 1)));
      if (line.find("[shape=box3d") != std::string::npos)
        folded.insert(line.substr(at + 1, line.find('"', at + 1) - at - 1));
    }
    return std::pair{nodes, folded};
  };
  Run r = explain(fmt::format("--attention concat --decoder luong --format dot --out '{}'", dot));
  REQUIRE(r.status == 0);
  auto [nodes, folded] = statements(slurp(dot));
  INFO(slurp(dot));
  CHECK(j["nodes"].size() > 40);
  CHECK(nodes.size() + folded.size() <= 40);  // the drawer's bound
  CHECK(folded.count("r:encoder") == 1);

  // --groups opens those regions node by node, and leaves the encoder folded.
  const std::string opened = dir.file("opened.dot");
  r = explain(fmt::format(
      "--attention concat --decoder luong --format dot --groups attention --out '{}'", opened));
  REQUIRE(r.status == 0);
  auto [open_nodes, open_folded] = statements(slurp(opened));
  size_t attention = 0;
  for (const auto& n : j["nodes"])
    if (n["region"].get<std::string>().rfind("attention.", 0) == 0) {
      ++attention;
      CHECK(open_nodes.count(n["index"].get<int>()) == 1);
    }
  CHECK(attention >= 8);
  CHECK(open_folded.count("r:encoder") == 1);
  CHECK(slurp(opened).find("subgraph cluster_") != std::string::npos);

  if (run_shell("command -v dot").status != 0) {
    WARN("Graphviz's dot is not installed: the DOT output was not rendered");
    return;
  }
  for (const std::string& file : {dot, opened}) {
    Run rendered = run_shell(fmt::format("dot -Tsvg '{}' -o '{}'", file, svg));
    INFO(rendered.output);
    REQUIRE(rendered.status == 0);
    const std::string out = slurp(svg);
    CHECK(out.find("<svg") != std::string::npos);
    CHECK(out.find("attention.scores") != std::string::npos);
  }
}

TEST_CASE("explain: the text output has every group and fits in 100 columns", "[explain]") {
  for (const char* attention : kVariants)
    for (const char* extra : {"--decoder bahdanau", "--decoder luong --cell lstm",
                              "--bidirectional --layers 2 --no-deep-output"}) {
      const bool bidi = std::string(extra).find("bidirectional") != std::string::npos;
      const std::string a = attention;
      if (bidi && (a == "dot" || a == "scaled-dot" || a == "cosine")) continue;  // need K = H
      const std::string args = fmt::format("--attention {} {}", attention, extra);
      INFO(args);
      Run r = explain(args);
      REQUIRE(r.status == 0);
      std::istringstream lines(r.output);
      size_t longest = 0;
      for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
      CHECK(longest <= 100);
      for (const char* header :
           {"1. FORWARD PASS", "2. BACKWARD PASS", "3. FINITE-DIFFERENCE", "-- encoder ",
            "-- decoder ", "-- decoder.embedding ", "-- decoder.rnn ", "-- output ", "-- loss "})
        CHECK(r.output.find(header) != std::string::npos);
      CHECK(r.output.find("-- (no region)") == std::string::npos);
      if (a != "none")
        for (const char* header :
             {"-- attention.scores ", "-- attention.softmax ", "-- attention.context "})
          CHECK(r.output.find(header) != std::string::npos);
      if (a == "bahdanau") {
        CHECK(r.output.find("e_j = v . tanh(W s + b + U h_j)") != std::string::npos);
        CHECK(r.output.find("-- attention.keys ") != std::string::npos);
      }
      if (a != "none") CHECK(r.output.find("c = sum_j a_j h_j") != std::string::npos);
      CHECK(r.output.find("L = -log softmax(z)[y*]") != std::string::npos);
      CHECK(r.output.find("FAIL") == std::string::npos);
    }
}

TEST_CASE("explain: --groups keeps only the chosen groups", "[explain]") {
  Run r = explain("--groups attention,loss");
  REQUIRE(r.status == 0);
  CHECK(r.output.find("-- attention.scores ") != std::string::npos);
  CHECK(r.output.find("-- loss ") != std::string::npos);
  CHECK(r.output.find("-- encoder ") == std::string::npos);
  CHECK(r.output.find("-- decoder.rnn ") == std::string::npos);
}

namespace {

// Goes through the walkthrough as a learner would, in Chromium: every step by the keys (and back),
// a step by a click on its row of the maps; every step's graph drawn in its frame; and no cell
// whose number overflows it, with every group open.
const char* kWalkthroughScript = R"JS(
const seen = [document.body.dataset.current];
const key = k => document.dispatchEvent(new KeyboardEvent("keydown", {key: k}));
for (let i = 0; i < sections.length; i++) { key("ArrowRight"); seen.push(document.body.dataset.current); }
key("ArrowLeft"); seen.push(document.body.dataset.current);
key("Home"); seen.push(document.body.dataset.current);
key("End"); seen.push(document.body.dataset.current);
const cell = document.querySelector('rect.cell[data-row="1"]');
if (cell) { cell.dispatchEvent(new MouseEvent("click", {bubbles: true})); seen.push(document.body.dataset.current); }
const overflow = [];
let cells = 0;
sections.forEach((s, k) => {
  show(k);
  s.querySelectorAll("details").forEach(d => { d.open = true; });
  s.querySelectorAll("td").forEach(td => {
    ++cells;
    if (td.scrollWidth > td.clientWidth + 1) overflow.push("td " + td.textContent.slice(0, 40));
  });
  s.querySelectorAll("text.cell").forEach(t => {
    ++cells;
    const width = Number(t.previousElementSibling.getAttribute("width"));
    if (t.getComputedTextLength() > width - 2) overflow.push("cell " + t.textContent);
  });
});
const frames = [...document.querySelectorAll("iframe.graph-frame")];
document.body.setAttribute("data-walk", seen.join(","));
document.body.setAttribute("data-overflow", overflow.length + " of " + cells + ": " + overflow.slice(0, 5).join(" | "));
setTimeout(() => {
  const boxes = frames.map(f => f.contentDocument ? f.contentDocument.querySelectorAll(".box").length : -1);
  document.body.setAttribute("data-boxes", boxes.join(","));
}, 1000);
)JS";

std::string attribute(const std::string& dom, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t at = dom.find(key);
  if (at == std::string::npos) return "(no " + name + ")";
  const size_t begin = at + key.size();
  return dom.substr(begin, dom.find('"', begin) - begin);
}

// The page at `path` explains `steps` steps, numbered from `first`.
void check_walkthrough(const ExplainDir& dir, const std::string& path, size_t steps,
                       size_t first = 0) {
  const std::string html = slurp(path);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("</html>") != std::string::npos);
  tapestry::testing::check_self_contained(html);
  CHECK(html.find("FAIL") == std::string::npos);
  if (!tapestry::testing::have_chromium()) {
    WARN("chromium not found (apt-get install chromium): the walkthrough's script not run");
    return;
  }
  const std::string walk = dir.file("walk.html");
  { std::ofstream(walk) << tapestry::testing::with_script(html, kWalkthroughScript); }
  const tapestry::testing::Browser b = tapestry::testing::load_in_chromium(walk, 5000);
  CHECK(b.console.empty());
  // Steps first, first + 1, ..., last by the right arrow; right past the last stays there; then
  // left, Home, End and (with more than one step) a click on a cell of the second row.
  const size_t last = first + steps - 1;
  std::string expected = std::to_string(first);
  for (size_t t = first + 1; t <= last; ++t) expected += fmt::format(",{}", t);
  expected += fmt::format(",{},{},{},{}{}", last, steps > 1 ? last - 1 : first, first, last,
                          steps > 1 ? fmt::format(",{}", first + 1) : "");
  CHECK(attribute(b.dom, "data-walk") == expected);
  const std::string overflow = attribute(b.dom, "data-overflow");
  INFO(overflow);
  CHECK(overflow.rfind("0 of ", 0) == 0);
  CHECK(overflow.substr(5, 1) != "0");  // cells were measured
  // Every step's graph drawn in its frame, with boxes.
  const std::string boxes = attribute(b.dom, "data-boxes");
  INFO(boxes);
  size_t drawn = 0;
  for (size_t at = 0; at < boxes.size();) {
    const size_t comma = std::min(boxes.find(',', at), boxes.size());
    drawn += std::stoi(boxes.substr(at, comma - at)) > 0;
    at = comma + 1;
  }
  CHECK(drawn == steps);
}

}  // namespace

TEST_CASE("explain: the HTML walkthrough steps through every step in Chromium", "[explain]") {
  ExplainDir dir;
  const std::string path = dir.file("explain.html");
  Run r = explain(fmt::format("--step all --format html --out '{}'", path));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string html = slurp(path);
  // The maps across the sentence, each step's story, tables and check: "the black cat" ->
  // "le chat noir" has four steps (the last writes <eos>).
  CHECK(html.find("where each step attended") != std::string::npos);
  CHECK(html.find("|sum over t|") != std::string::npos);
  CHECK(html.find("<h2>Across the sentence</h2>") != std::string::npos);
  for (int t = 0; t < 4; ++t)
    CHECK(html.find(fmt::format("id=\"step-{}\"", t)) != std::string::npos);
  CHECK(html.find("id=\"step-4\"") == std::string::npos);
  CHECK(html.find("<ol class=\"story\">") != std::string::npos);
  CHECK(html.find("Attention at this step") != std::string::npos);
  CHECK(html.find("each value beside its gradient") != std::string::npos);
  CHECK(html.find("The chain rule through attention") != std::string::npos);
  check_walkthrough(dir, path, 4);

  // One step alone: the same page with one section.
  const std::string one = dir.file("one.html");
  Run single = explain(fmt::format("--step 1 --format html --out '{}'", one));
  REQUIRE(single.status == 0);
  CHECK(slurp(one).find("id=\"step-1\"") != std::string::npos);
  CHECK(slurp(one).find("id=\"step-0\"") == std::string::npos);
  check_walkthrough(dir, one, 1, 1);
}

TEST_CASE("explain: the walkthrough of a confident model keeps its tiny numbers in their cells",
          "[explain]") {
  // A model made sure of one word by its output bias, as training makes a model sure of the
  // reference: losses and gradients near 1e-12 beside a loss near 40 where it must write <eos>.
  ExplainDir dir;
  models::Seq2SeqConfig c;
  models::Vocab src, tgt;
  for (const char* w : {"the", "black", "cat"}) src.add(w);
  for (const char* w : {"le", "chat", "noir"}) tgt.add(w);
  c.src_vocab = src.size();
  c.tgt_vocab = tgt.size();
  c.emb = 5;
  c.hidden = 6;
  models::Seq2Seq model(c);
  bool found = false;
  for (auto& [name, p] : model.named_parameters())
    if (name == "decoder.out.bias") {
      p->value.set(tgt.id("le"), 30);
      found = true;
    }
  REQUIRE(found);
  const std::string saved = dir.file("model.safetensors");
  models::save_model(saved, model, src, tgt, models::Preprocess{});
  const std::string path = dir.file("confident.html");
  Run r =
      explain(fmt::format("--model '{}' --source 'the black cat' --target 'le le' --step all "
                          "--format html --out '{}'",
                          saved, path));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string html = slurp(path);
  // Tiny numbers are there to fit, in the cells of the heatmaps.
  CHECK(std::regex_search(html, std::regex("class=\"cell\"[^>]*>-?\\d\\.\\de-1\\d<")));
  check_walkthrough(dir, path, 3);
}

TEST_CASE("explain: a saved float32 model is explained in float64", "[explain]") {
  ExplainDir dir;
  models::Seq2SeqConfig c;
  models::Vocab src, tgt;
  for (const char* w : {"the", "black", "cat", "dog"}) src.add(w);
  for (const char* w : {"le", "chat", "noir", "chien"}) tgt.add(w);
  c.src_vocab = src.size();
  c.tgt_vocab = tgt.size();
  c.emb = 5;
  c.hidden = 6;
  c.attention = nn::AttentionKind::general;
  c.decoder = models::DecoderKind::luong;
  models::Seq2Seq model(c);  // float32, as training saves it
  const std::string path = dir.file("model.safetensors");
  models::save_model(path, model, src, tgt, models::Preprocess{});

  json j =
      explain_json(dir, fmt::format("--model '{}' --source 'the grey cat'", dir.path.string()));
  // An unknown word becomes <unk>; with no --target the loss scores the model's own prediction
  // (a word it may write: never <pad> or <bos>, ids 0 and 1).
  CHECK(j["source"] == json({"the", "<unk>", "cat"}));
  const auto z =
      j["nodes"][j["focus"]["logits"].get<int32_t>()]["value"].get<std::vector<double>>();
  const auto best = std::max_element(z.begin() + 2, z.end()) - z.begin();
  CHECK(j["target"] == j["tgt_vocab"][best]);
  // The first 8 elements of each checked tensor, all passing; the values are the float32 ones.
  std::map<std::string, int> per_tensor;
  for (const auto& ch : j["check"]) {
    ++per_tensor[ch["parameter"].get<std::string>()];
    CHECK(ch["pass"].get<bool>());
  }
  auto first8 = [&](const char* focus) {
    const int32_t n = j["focus"][focus].get<int32_t>();
    return std::min(8, static_cast<int>(j["nodes"][n]["value"].size()));
  };
  CHECK(per_tensor == std::map<std::string, int>{{"decoder.attention.W", 8},
                                                 {"h (encoder states)", 8},
                                                 {"e (scores)", first8("scores")},
                                                 {"a (weights)", first8("weights")},
                                                 {"c (context)", first8("context")}});
  auto named = model.named_parameters();
  for (const auto& [name, p] : named)
    CHECK(max_abs_diff(p->value.to(DType::f64).to_vector(),
                       j["parameters"][name]["value"].get<std::vector<double>>()) == 0);

  Run bad = explain(fmt::format("--model '{}' --source 'the cat' --target chats", path));
  CHECK(bad.status == 2);
  CHECK_THAT(bad.output, Catch::Contains("'chats' is not in the target vocabulary") &&
                             Catch::Contains("le chat noir chien"));
  Run tiny_flag = explain(fmt::format("--model '{}' --source 'the cat' --hidden 8", path));
  CHECK(tiny_flag.status == 2);
  CHECK_THAT(tiny_flag.output, Catch::Contains("--hidden describes the tiny model"));
  Run no_source = explain(fmt::format("--model '{}'", path));
  CHECK(no_source.status == 2);
  CHECK_THAT(no_source.output, Catch::Contains("--model needs --source"));
}

TEST_CASE("explain: bad flags say what is valid", "[explain]") {
  Run attention = explain("--attention foo");
  CHECK(attention.status == 2);
  CHECK_THAT(attention.output, Catch::Contains("'foo' is not a valid value") &&
                                   Catch::Contains("bahdanau") && Catch::Contains("local-p") &&
                                   Catch::Contains("scaled-dot"));
  Run target = explain("--target chien");
  CHECK(target.status == 2);
  CHECK_THAT(target.output, Catch::Contains("'chien' is not in the target vocabulary") &&
                                Catch::Contains("le chat noir"));
  Run source = explain("--source 'hello world'");
  CHECK(source.status == 2);
  CHECK_THAT(source.output, Catch::Contains("not a sentence of the grammar task") &&
                                Catch::Contains("--reference"));
  Run groups = explain("--groups attn");
  CHECK(groups.status == 2);
  CHECK_THAT(groups.output, Catch::Contains("no region starts with 'attn'") &&
                                Catch::Contains("attention.scores"));
  Run dot_bidi = explain("--attention dot --bidirectional");
  CHECK(dot_bidi.status != 0);
  CHECK_THAT(dot_bidi.output, Catch::Contains("must be the same size"));
  Run format = explain("--format pdf");
  CHECK(format.status == 2);
  CHECK_THAT(format.output, Catch::Contains("text|json|dot|html") || Catch::Contains("text, json"));
}

TEST_CASE("explain: a sentence outside the grammar works with its reference", "[explain]") {
  ExplainDir dir;
  json j = explain_json(dir,
                        "--source 'hello big world' --reference 'bonjour grand monde' "
                        "--target monde");
  CHECK(j["source"] == json({"hello", "big", "world"}));
  CHECK(j["target"] == "monde");
  CHECK(j["tgt_vocab"] == json({"<pad>", "<bos>", "<eos>", "<unk>", "bonjour", "grand", "monde"}));
}

TEST_CASE("explain: a heatmap cell's number is at most 8 characters and keeps 2 digits",
          "[explain]") {
  using tapestry::cli::cell_num;
  CHECK(cell_num(0) == "0");
  CHECK(cell_num(0.957) == "0.957");
  CHECK(cell_num(-12.34) == "-12.3");
  CHECK(cell_num(-1.234e-5) == "-1.2e-5");
  CHECK(cell_num(-0.001234) == "-0.00123");
  CHECK(cell_num(0.0099999) == "0.01");
  CHECK(cell_num(1234) == "1.2e3");
  CHECK(cell_num(-3.4e-120) == "-3e-120");
  CHECK(cell_num(4.9e-324) == "5e-324");  // the smallest subnormal
  CHECK(cell_num(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(cell_num(std::nan("")) == "NaN");
  // Every magnitude, both signs: at most 8 characters, and the value read back within the
  // rounding of its digits (2 significant, 1 beyond 1e+-99).
  for (double e = -320; e <= 300; e += 0.37)
    for (double sign : {1.0, -1.0}) {
      const double v = sign * std::pow(10.0, e);
      const std::string s = cell_num(v);
      INFO(v << " -> " << s);
      CHECK(s.size() <= 8);
      const double back = std::strtod(s.c_str(), nullptr);
      const double a = std::abs(v);
      const double tolerance = a < 1e-99 || a >= 1e100 ? 0.5 : 0.05;
      if (std::isnormal(v)) CHECK(std::abs(back - v) <= tolerance * a);
    }
}
