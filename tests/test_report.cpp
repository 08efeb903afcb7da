// tapestry report: the HTML/SVG builders (escaping, ticks, shades, heatmap, line and bar charts)
// checked against hand-computed markup, and the command end to end on a tiny trained run.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "page_check.h"
#include "tapestry/core/errors.h"
#include "tools/report_html.h"

using namespace tapestry;
using namespace tapestry::cli;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every match of `re` in `text`, each as its capture groups.
std::vector<std::vector<std::string>> matches(const std::string& text, const std::string& re) {
  std::vector<std::vector<std::string>> out;
  std::regex r(re);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator();
       ++it) {
    std::vector<std::string> groups;
    for (size_t g = 1; g < it->size(); ++g) groups.push_back((*it)[g].str());
    out.push_back(groups);
  }
  return out;
}

// The chart frame the coordinate tests use: the plot area is x 50..380, y 20..260.
html::ChartFrame test_frame() {
  html::ChartFrame f;
  f.width = 400;
  f.height = 300;
  f.left = 50;
  f.right = 20;
  f.top = 20;
  f.bottom = 40;
  return f;
}

}  // namespace

TEST_CASE("report html: escaping of markup characters, UTF-8 untouched", "[report]") {
  CHECK(html::escape("<a href=\"x\">Tom & Jerry's</a>") ==
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  CHECK(html::escape("&amp;") == "&amp;amp;");  // already-escaped text is escaped again
  CHECK(html::escape("größer → 東京") == "größer → 東京");
  CHECK(html::escape("") == "");
  CHECK(html::utf8_length("größe") == 5);
  CHECK(html::utf8_length("東京") == 2);
  CHECK(html::utf8_truncate("abcdef", 4) == "abc\u2026");
  CHECK(html::utf8_truncate("größer", 3) == "gr\u2026");
  CHECK(html::utf8_truncate("abc", 3) == "abc");
}

TEST_CASE("report html: round ticks of 1, 2 or 5 times a power of ten", "[report]") {
  // [0, 10] in about 5 ticks: the raw step 10/4 = 2.5 rounds to 2.
  CHECK(html::nice_ticks(0, 10, 5) == std::vector<double>{0, 2, 4, 6, 8, 10});
  // [0, 40]: 40/4 = 10 is already round.
  CHECK(html::nice_ticks(0, 40, 5) == std::vector<double>{0, 10, 20, 30, 40});
  // [0.0197, 1.6759]: 1.6562/4 = 0.414 rounds to 0.5; the ends widen to 0 and 2.
  CHECK(html::nice_ticks(0.0197, 1.6759, 5) == std::vector<double>{0, 0.5, 1, 1.5, 2});
  // Epochs 1..2: a step of 0.2 would do, but integer ticks step by at least 1.
  CHECK(html::nice_ticks(1, 2, 7, true) == std::vector<double>{1, 2});
  // A single value gets a range around it.
  auto t = html::nice_ticks(3, 3, 5);
  CHECK(t.front() < 3);
  CHECK(t.back() > 3);
  CHECK_THROWS_AS(html::nice_ticks(0, INFINITY, 5), ValueError);
}

TEST_CASE("report html: shades run from white to dark blue", "[report]") {
  CHECK(html::shade(0) == "#ffffff");
  CHECK(html::shade(1) == "#08306b");
  // By hand: 255 + (8 - 255)/2 = 131.5 -> 132 = 0x84; 255 + (48 - 255)/2 = 151.5 -> 152 = 0x98;
  // 255 + (107 - 255)/2 = 181 = 0xb5.
  CHECK(html::shade(0.5) == "#8498b5");
  CHECK(html::shade(2) == "#08306b");
  CHECK(html::shade(-1) == "#ffffff");
  CHECK(html::shade(NAN) == "#ffffff");
}

TEST_CASE("report html: a 2x3 heatmap has six cells with their shades and titles", "[report]") {
  const std::vector<std::string> src = {"die", "<b>", "Katze"}, out = {"the", "<eos>"};
  const std::vector<float> w = {0.0f, 0.5f, 1.0f, 0.25f, 0.75f, 0.125f};
  html::HeatmapOptions o;
  o.cell = 20;
  const std::string svg = html::heatmap(src, out, w, o);
  CHECK(count(svg, "<svg") == 1);
  CHECK(count(svg, "</svg>") == 1);
  const auto cells =
      matches(svg,
              "<rect class=\"cell\" x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"20\" height=\"20\" "
              "fill=\"(#[0-9a-f]{6})\"><title>([^<]*)</title></rect>");
  REQUIRE(cells.size() == 6);
  // Row-major, as the weights: shades by hand (linear from #ffffff to #08306b) and escaped titles.
  const std::vector<std::string> fills = {"#ffffff", "#8498b5", "#08306b",
                                          "#c1cbda",   // 255-247/4, 255-207/4, 255-148/4
                                          "#466490",   // 255-247*3/4, 255-207*3/4, 255-148*3/4
                                          "#e0e5ed"};  // 255-247/8, 255-207/8, 255-148/8
  const std::vector<std::string> titles = {"die -&gt; the: 0.000",
                                           "&lt;b&gt; -&gt; the: 0.500",
                                           "Katze -&gt; the: 1.000",
                                           "die -&gt; &lt;eos&gt;: 0.250",
                                           "&lt;b&gt; -&gt; &lt;eos&gt;: 0.750",
                                           "Katze -&gt; &lt;eos&gt;: 0.125"};
  for (size_t k = 0; k < 6; ++k) {
    INFO("cell " << k);
    CHECK(cells[k][2] == fills[k]);
    CHECK(cells[k][3] == titles[k]);
    // Columns step right and rows step down by one cell.
    CHECK(std::stod(cells[k][0]) - std::stod(cells[k - k % 3][0]) == Approx(20.0 * (k % 3)));
    CHECK(std::stod(cells[k][1]) - std::stod(cells[k % 3][1]) == Approx(20.0 * (k / 3)));
  }
  // Labels are escaped.
  CHECK_THAT(svg, Contains(">&lt;eos&gt;</text>"));
  CHECK_THAT(svg, !Contains("<eos>"));
  // Source labels narrower than a cell (about 7 pixels a character at 12 pixels) stay upright,
  // wider ones are rotated.
  CHECK_THAT(html::heatmap({"a", "b"}, {"x"}, {0.3f, 0.7f}, o), !Contains("rotate"));
  CHECK_THAT(html::heatmap({"neighbour", "b"}, {"x"}, {0.3f, 0.7f}, o), Contains("rotate(-45)"));
  CHECK_THROWS_AS(html::heatmap(src, out, {0.5f}, o), ValueError);
}

TEST_CASE("report html: a line chart puts its points where the axes say", "[report]") {
  html::LineChartOptions o;
  o.frame = test_frame();
  o.x_label = "epoch";
  o.y_label = "loss";
  const std::string svg = html::line_chart({{"train <loss>", "#123456", {1, 2, 3}, {0, 5, 10}}}, o);
  // x spans the data, 1..3 over 50..380; y is widened to the ticks 0..10 over 260..20 (upwards).
  // (2, 5) -> x = 50 + 330/2 = 215, y = 260 - 240/2 = 140.
  const auto points = matches(
      svg, "<circle class=\"point\" cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"[^>]*><title>([^<]*)</title>");
  REQUIRE(points.size() == 3);
  CHECK(points[0] == std::vector<std::string>{"50", "260", "train &lt;loss&gt;, epoch 1: 0.0000"});
  CHECK(points[1] == std::vector<std::string>{"215", "140", "train &lt;loss&gt;, epoch 2: 5.0000"});
  CHECK(points[2] == std::vector<std::string>{"380", "20", "train &lt;loss&gt;, epoch 3: 10.0000"});
  CHECK_THAT(svg, Contains("points=\"50,260 215,140 380,20\""));
  // Tick labels 0, 2, ..., 10 on y, 1, 2, 3 on x; the axis titles and the legend.
  for (const char* t : {">0<", ">2<", ">4<", ">6<", ">8<", ">10<", ">1<", ">3<"})
    CHECK_THAT(svg, Contains(t));
  CHECK_THAT(svg, Contains(">epoch</text>"));
  CHECK_THAT(svg, Contains(">loss</text>"));
  CHECK_THAT(svg, Contains(">train &lt;loss&gt;</text>"));

  // A missing value breaks the line in two and has no point.
  const std::string gap = html::line_chart({{"v", "red", {1, 2, 3, 4}, {1, NAN, 2, 3}}}, o);
  CHECK(count(gap, "<polyline") == 2);
  CHECK(count(gap, "<circle class=\"point\"") == 3);
  CHECK_THAT(html::line_chart({}, o), Contains("no data"));
  CHECK_THROWS_AS(html::line_chart({{"v", "red", {1, 2}, {1}}}, o), ValueError);
}

TEST_CASE("report html: a bar chart's bars rise from zero to their values", "[report]") {
  html::BarChartOptions o;
  o.frame = test_frame();
  o.x_label = "length";
  o.y_label = "BLEU";
  const std::string svg = html::bar_chart({{"1-5", 10, "short: 10", "n = 3"},
                                           {"6-10", NAN, "empty", ""},
                                           {"11+", 40, "long & hard", ""}},
                                          o);
  // y ticks 0..40; three bands of 110 pixels from x = 50, each bar 70% of its band, centred.
  // Bar 0: x = 50 + 0.15*110 = 66.5, width 77, top 260 - 240*10/40 = 200, height 60.
  // Bar 2: x = 50 + 220 + 16.5 = 286.5, top 20, height 240.
  const auto bars = matches(svg,
                            "<rect class=\"bar\" x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)"
                            "\" height=\"([0-9.]+)\"[^>]*><title>([^<]*)</title>");
  REQUIRE(bars.size() == 2);
  CHECK(bars[0] == std::vector<std::string>{"66.5", "200", "77", "60", "short: 10"});
  CHECK(bars[1] == std::vector<std::string>{"286.5", "20", "77", "240", "long &amp; hard"});
  // Every label is drawn, the empty bucket's too; values above the bars.
  for (const char* t : {">1-5<", ">6-10<", ">11+<", ">10.0<", ">40.0<", ">40<", ">n = 3<"})
    CHECK_THAT(svg, Contains(t));
}

TEST_CASE("report html: length buckets of a round width, at most eight", "[report]") {
  // Lengths 3..6: width 1 gives 4 buckets (<=3, 4, 5, 6+).
  CHECK(html::length_bucket_bounds(3, 6) == std::vector<int64_t>{3, 4, 5});
  // 4..16: width 1 gives 13 buckets, width 2 gives 7 (multiples of 2 from 4 below 16).
  CHECK(html::length_bucket_bounds(4, 16) == std::vector<int64_t>{4, 6, 8, 10, 12, 14});
  // 1..40: width 2 gives 20, width 5 gives 8.
  CHECK(html::length_bucket_bounds(1, 40) == std::vector<int64_t>{5, 10, 15, 20, 25, 30, 35});
  CHECK(html::length_bucket_bounds(7, 7).empty());
  CHECK(html::length_bucket_bounds(1, 1000).size() + 1 <= 8);
}

// ---- The command end to end ----

namespace {

struct Result {
  int status;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory of this process's own, removed when the tests end.
struct Scratch {
  fs::path path = fs::temp_directory_path() / ("tapestry_report_" + std::to_string(getpid()));
  Scratch() { fs::create_directories(path); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
const fs::path& scratch() {
  static Scratch s;
  return s.path;
}

Result tapestry_run(const std::string& args) {
  const fs::path out = scratch() / "stdout", err = scratch() / "stderr";
  const std::string cmd = fmt::format("'{}/tapestry' {} > '{}' 2> '{}'", TAPESTRY_BINARY_DIR, args,
                                      out.string(), err.string());
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// A tiny run, trained once: reversal of 3..6 symbols, 2 epochs (about a second).
const fs::path& tiny_run(const std::string& attention = "bahdanau") {
  static std::map<std::string, fs::path> runs;
  auto it = runs.find(attention);
  if (it != runs.end()) return it->second;
  const fs::path dir = scratch() / ("run-" + attention);
  const Result r = tapestry_run(
      fmt::format("train --task reverse --min-len 3 --max-len 6 --train-size 500 --valid-size 50 "
                  "--test-size 50 --epochs 2 --hidden 16 --emb 8 --attention {} --quiet --out '{}'",
                  attention, dir.string()));
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  return runs[attention] = dir;
}

// Whether every opening tag of `tag` has its closing tag, in order (no closing before opening).
bool balanced(const std::string& page, const std::string& tag) {
  std::regex r("<(/?)" + tag + "[\\s>]");
  int depth = 0;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), r); it != std::sregex_iterator();
       ++it) {
    depth += (*it)[1].length() ? -1 : 1;
    if (depth < 0) return false;
  }
  return depth == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

TEST_CASE("report: a self-contained page with curves, heatmaps and BLEU by length", "[report]") {
  const fs::path& run = tiny_run();
  const Result r = tapestry_run(fmt::format("report --model '{}'", run.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const fs::path page_path = run / "report.html";
  CHECK(r.out == page_path.string() + "\n");
  const std::string page = slurp(page_path);
  REQUIRE(!page.empty());

  // Well formed enough: the structural elements close, nothing is loaded from anywhere.
  CHECK(page.starts_with("<!DOCTYPE html>"));
  for (const char* tag : {"html", "head", "body", "main", "svg", "div", "table", "tr", "figure",
                          "dl", "details", "footer", "style", "title", "text", "g"}) {
    INFO("tag " << tag);
    CHECK(balanced(page, tag));
  }
  const std::string low = lower(page);
  CHECK(low.find("<script") == std::string::npos);
  CHECK(low.find("http://") == std::string::npos);
  CHECK(low.find("https://") == std::string::npos);
  CHECK(low.find("url(") == std::string::npos);
  CHECK(low.find("@import") == std::string::npos);
  CHECK(low.find("<img") == std::string::npos);
  CHECK(low.find("<link") == std::string::npos);

  // Two curves charts (the run decoded validation sentences), six sample heatmaps and the probe
  // sentence's two (one an epoch), one bar chart.
  CHECK(count(page, "aria-label=\"cross-entropy per token by epoch\"") == 1);
  CHECK(count(page, "aria-label=\"BLEU / percent by epoch\"") == 1);
  CHECK(count(page, "aria-label=\"attention weights\"") == 6 + 2);
  CHECK(count(page, "aria-label=\"corpus BLEU by source length (tokens)\"") == 1);
  CHECK(count(page, "<svg") == 9 + 2);
  CHECK_THAT(page, Contains(">train loss</text>"));
  CHECK_THAT(page, Contains(">valid loss</text>"));
  CHECK_THAT(page, Contains(" -&gt; &lt;eos&gt;: "));  // hover titles of the <eos> row
  // One point per epoch and line: 2 epochs x (2 losses + 3 scores).
  CHECK(count(page, "<circle class=\"point\"") == 10);

  // The test scores of result.json in the header, and the whole test split's greedy BLEU (summed
  // per-sentence statistics here) equal to the one tapestry train computed over the whole list.
  const auto result = nlohmann::json::parse(slurp(run / "result.json"));
  CHECK_THAT(page, Contains(fmt::format("<dd>{:.4f}</dd>", result["test_loss"].get<double>())));
  const auto total =
      matches(page, "<tr class=\"total\"><td>all</td><td>(\\d+)</td><td>([0-9.]+)</td>");
  REQUIRE(total.size() == 1);
  CHECK(total[0][0] == "50");
  CHECK(total[0][1] == fmt::format("{:.2f}", result["greedy_bleu"].get<double>()));
  // The footer names the command and the files.
  CHECK_THAT(page, Contains(fmt::format("tapestry report --model {}", run.string())));
  CHECK_THAT(page, Contains("metrics.jsonl</code>"));
  if (tapestry::testing::have_chromium()) {
    const auto b = tapestry::testing::load_in_chromium(page_path.string());
    CHECK(b.console.empty());
    CHECK(count(b.dom, "<svg") == 9 + 2);
  }
}

TEST_CASE("report: options for samples, beam, sentences, title and output file", "[report]") {
  const fs::path& run = tiny_run();
  const fs::path out = scratch() / "custom.html";
  const Result r = tapestry_run(fmt::format(
      "report --model '{}' --samples 2 --beam 3 --max-sentences 10 --title '<T&C>' --out '{}'",
      run.string(), out.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out == out.string() + "\n");
  const std::string page = slurp(out);
  CHECK(count(page, "aria-label=\"attention weights\"") == 2 + 2);  // and the probe's
  CHECK_THAT(page, Contains("<title>&lt;T&amp;C&gt;</title>"));
  CHECK_THAT(page, Contains("<h1>&lt;T&amp;C&gt;</h1>"));
  CHECK_THAT(page, Contains("beam search (k = 3)"));
  CHECK_THAT(page, Contains("<tr class=\"total\"><td>all</td><td>10</td>"));
  CHECK_THAT(page, Contains("the first 10 of 50"));
}

TEST_CASE("report: --samples 0 leaves out the samples' heatmaps", "[report]") {
  const fs::path& run = tiny_run();
  const fs::path out = scratch() / "no-samples.html";
  const Result r = tapestry_run(
      fmt::format("report --model '{}' --samples 0 --out '{}'", run.string(), out.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string page = slurp(out);
  CHECK(count(page, "aria-label=\"attention weights\"") == 2);  // the probe's, one an epoch
  CHECK_THAT(page, Contains("None (--samples 0)"));
  CHECK(count(page, "<svg") == 3 + 2);
}

TEST_CASE("report: a model without attention says so instead of drawing", "[report]") {
  const fs::path& run = tiny_run("none");
  const Result r = tapestry_run(fmt::format("report --model '{}'", run.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string page = slurp(run / "report.html");
  CHECK(count(page, "aria-label=\"attention weights\"") == 0);
  CHECK_THAT(page, Contains("This model has no attention"));
  // The texts are still shown.
  CHECK(matches(page, "<div class=\"sample( match)?\">").size() == 6);
}

TEST_CASE("report: a bad run directory gives one clear message and status 1", "[report]") {
  const fs::path& run = tiny_run();
  auto copy = [&](const std::string& name) {
    const fs::path dir = scratch() / name;
    fs::remove_all(dir);
    fs::copy(run, dir, fs::copy_options::recursive);
    fs::remove(dir / "report.html");
    return dir;
  };
  auto fails = [&](const fs::path& dir, const std::string& message) {
    const Result r = tapestry_run(fmt::format("report --model '{}'", dir.string()));
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(count(r.err, "\n") == 1);
    CHECK_THAT(r.err, Contains(message));
    CHECK(!fs::exists(dir / "report.html"));
  };

  SECTION("missing directory") {
    fails(scratch() / "no-such-run", "no-such-run' does not exist");
  }
  SECTION("a file, not a directory") {
    fails(run / "metrics.jsonl", "is not a directory");
  }
  SECTION("missing model") {
    const fs::path dir = copy("no-model");
    fs::remove(dir / "model.safetensors");
    fails(dir, "model.safetensors' is missing");
  }
  SECTION("corrupted model: load_model's message") {
    const fs::path dir = copy("bad-model");
    std::ofstream(dir / "model.safetensors", std::ios::trunc) << "not a checkpoint";
    fails(dir, "model.safetensors");
  }
  SECTION("a malformed metrics line names the file and line") {
    const fs::path dir = copy("bad-metrics");
    const std::string text = slurp(dir / "metrics.jsonl");
    const std::string first = text.substr(0, text.find('\n') + 1);
    std::ofstream(dir / "metrics.jsonl", std::ios::trunc) << first << "{\"epoch\": 2, \"train_lo\n";
    fails(dir, (dir / "metrics.jsonl").string() + ":2: not valid JSON");
  }
  SECTION("a metrics value of the wrong type names the file, line and key") {
    const fs::path dir = copy("bad-value");
    std::ofstream(dir / "metrics.jsonl", std::ios::trunc)
        << "{\"epoch\": 1, \"train_loss\": \"low\", \"valid_loss\": 1}\n";
    fails(dir, (dir / "metrics.jsonl").string() + ":1: 'train_loss' is \"low\", not a number");
  }
  SECTION("a metrics line of an unknown kind, and a malformed probe") {
    const fs::path dir = copy("bad-kind");
    std::ofstream(dir / "metrics.jsonl", std::ios::trunc)
        << "{\"kind\": \"batch\", \"epoch\": 1}\n";
    fails(dir, (dir / "metrics.jsonl").string() + ":1: unknown kind \"batch\"");
    std::ofstream(dir / "metrics.jsonl", std::ios::trunc)
        << "{\"epoch\": 1, \"train_loss\": 2, \"valid_loss\": 1, \"probe\": {\"source\": "
           "[\"a\"], \"target\": [\"x\"], \"weights\": [[0.5, 0.5]]}}\n";
    fails(dir, (dir / "metrics.jsonl").string() +
                   ":1: 'probe' has a row of another length than its source");
  }
  SECTION("absurd metrics values are refused by line and key, before they reach a chart") {
    const fs::path dir = copy("absurd");
    const std::string log = (dir / "metrics.jsonl").string();
    auto with = [&](const std::string& line) { std::ofstream(log, std::ios::trunc) << line; };
    with("{\"epoch\": 1, \"train_loss\": 1e308, \"valid_loss\": 1}\n");
    fails(dir, log + ":1: 'train_loss' is 1e+308, out of range (a number in [0, 1e+15])");
    with("{\"epoch\": 1e300, \"train_loss\": 2, \"valid_loss\": 1}\n");
    fails(dir, log + ":1: 'epoch' is 1e+300, out of range (a whole number in [1, 1e+06])");
    with("{\"epoch\": 1.5, \"train_loss\": 2, \"valid_loss\": 1}\n");
    fails(dir, log + ":1: 'epoch' is 1.5, out of range");
    with("{\"epoch\": 1, \"train_loss\": 2, \"valid_loss\": -1}\n");
    fails(dir, log + ":1: 'valid_loss' is -1, out of range");
    with("{\"epoch\": 1, \"train_loss\": 2, \"valid_loss\": 1, \"valid_bleu\": 1e5}\n");
    fails(dir, log + ":1: 'valid_bleu' is 100000, out of range (a number in [0, 100])");
    with("{\"epoch\": 1, \"train_loss\": 2, \"valid_loss\": 1, \"valid_bleu\": 100.1}\n");
    fails(dir, log + ":1: 'valid_bleu' is 100.1, out of range");
    with(
        "{\"kind\": \"step\", \"epoch\": 1, \"step\": -4, \"epoch_step\": 1, "
        "\"epoch_steps\": 5, \"loss\": 1}\n");
    fails(dir, log + ":1: 'step' is -4, out of range");
    with(
        "{\"epoch\": 1, \"train_loss\": 2, \"valid_loss\": 1, \"probe\": {\"source\": "
        "[\"a\"], \"target\": [\"x\"], \"weights\": [[7]]}}\n");
    fails(dir, log + ":1: 'probe' has a weight of 7, outside [0, 1]");
  }
  SECTION("a metrics line without a loss") {
    const fs::path dir = copy("no-loss");
    std::ofstream(dir / "metrics.jsonl", std::ios::trunc)
        << "\n{\"epoch\": 1, \"train_loss\": 2}\n";
    fails(dir, (dir / "metrics.jsonl").string() + ":2: no 'valid_loss'");
  }
  SECTION("missing metrics") {
    const fs::path dir = copy("no-metrics");
    fs::remove(dir / "metrics.jsonl");
    fails(dir, "metrics.jsonl' is missing");
  }
  SECTION("missing test.src") {
    const fs::path dir = copy("no-src");
    fs::remove(dir / "test.src");
    fails(dir, "test.src' is missing");
  }
  SECTION("missing test.ref") {
    const fs::path dir = copy("no-ref");
    fs::remove(dir / "test.ref");
    fails(dir, "test.ref' is missing");
  }
  SECTION("test files of different lengths") {
    const fs::path dir = copy("short-ref");
    std::ofstream(dir / "test.ref", std::ios::trunc) << "a b c\n";
    fails(dir, "has 50 lines but");
  }
}

TEST_CASE("report: a perfect score's rounding above its top is a perfect score", "[report]") {
  // Training wrote BLEU 100.00000000000004 for a perfect validation set (the demo's epoch 3).
  const fs::path& run = tiny_run();
  const fs::path dir = scratch() / "perfect";
  fs::remove_all(dir);
  fs::copy(run, dir, fs::copy_options::recursive);
  std::ofstream(dir / "metrics.jsonl", std::ios::trunc)
      << "{\"epoch\": 1, \"train_loss\": 2, \"valid_loss\": 1, \"valid_bleu\": "
         "100.00000000000004, \"valid_exact\": 1.0000000000000002, \"valid_token_acc\": 1}\n";
  const Result r = tapestry_run(fmt::format("report --model '{}'", dir.string()));
  INFO(r.err);
  CHECK(r.status == 0);
}

TEST_CASE("report: an epoch logged twice counts once, and a diverged loss is a gap", "[report]") {
  const fs::path& run = tiny_run();
  const fs::path dir = scratch() / "twice";
  fs::remove_all(dir);
  fs::copy(run, dir, fs::copy_options::recursive);
  const std::string log = slurp(dir / "metrics.jsonl");
  const std::string first = log.substr(0, log.find('\n') + 1);
  // Epoch 1, then epoch 1 again (a resume before saves were transactions) with a NaN loss
  // (written as null), then epoch 2.
  std::string again = first;
  const size_t at = again.find("\"valid_loss\":");
  REQUIRE(at != std::string::npos);
  again.replace(at, again.find(',', at) - at, "\"valid_loss\":null");
  std::ofstream(dir / "metrics.jsonl", std::ios::trunc)
      << first << again << log.substr(first.size());
  const Result r = tapestry_run(fmt::format("report --model '{}'", dir.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string page = slurp(dir / "report.html");
  CHECK_THAT(page, Contains("Per-epoch log (2 epochs)"));
  CHECK(page.find("NaN") == std::string::npos);
}

TEST_CASE("report: bad flags exit with status 2", "[report]") {
  CHECK(tapestry_run("report").status == 2);  // no --model
  CHECK(tapestry_run("report --model x --samples -1").status == 2);
  CHECK(tapestry_run("report --model x --beam 0").status == 2);
  const Result r = tapestry_run("report --model x --sample 3");
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("--samples"));
  const Result help = tapestry_run("report --help");
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Contains("--max-sentences"));
}

TEST_CASE("report html: the true alignment is outlined, one cell per row that has one",
          "[report]") {
  html::HeatmapOptions o;
  o.cell = 20;
  o.outline = {2, -1};
  const std::string svg = html::heatmap({"a", "b", "c"}, {"x", "y"}, {0, 0, 1, 1, 0, 0}, o);
  const auto truth = matches(svg, "<rect class=\"truth\" x=\"([0-9.]+)\" y=\"([0-9.]+)\"");
  REQUIRE(truth.size() == 1);
  const auto cells = matches(svg, "<rect class=\"cell\" x=\"([0-9.]+)\" y=\"([0-9.]+)\"");
  CHECK(std::stod(truth[0][0]) == Approx(std::stod(cells[2][0]) + 1));  // row 0, column 2
  CHECK(std::stod(truth[0][1]) == Approx(std::stod(cells[2][1]) + 1));
  CHECK_THAT(svg, Contains("true alignment: c -&gt; x"));
  CHECK_THAT(svg, Contains(">true alignment</text>"));  // in the legend
  CHECK_THAT(html::heatmap({"a"}, {"x"}, {1}, {}), !Contains("true alignment"));
}

TEST_CASE("report: on a task that knows the alignment, the heatmaps outline it", "[report]") {
  const fs::path& run = tiny_run();
  const std::string align = slurp(run / "test.align");
  CHECK(count(align, "\n") == 50);  // one line per test sentence
  const Result r = tapestry_run(fmt::format("report --model '{}'", run.string()));
  REQUIRE(r.status == 0);
  const std::string page = slurp(run / "report.html");
  // Every sample says either how many rows hit the outlined alignment, or why there is none.
  const size_t outlined = count(page, "the row's largest weight falls on it");
  const size_t differs = count(page, "The output differs from the reference");
  CHECK(outlined + differs == 6);
  CHECK(count(page, "class=\"truth\"") >= 3 * outlined);  // at least 3 tokens a sentence
}

TEST_CASE("translate --heatmap draws each sentence's attention in a self-contained page",
          "[report]") {
  const fs::path& run = tiny_run();
  const fs::path in = scratch() / "heat.in", page_path = scratch() / "heat.html";
  std::ofstream(in) << "a b c\n\nd e zz f\n";
  const Result r = tapestry_run(fmt::format("translate --model '{}' --input '{}' --heatmap '{}'",
                                            run.string(), in.string(), page_path.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string page = slurp(page_path);
  CHECK(page.starts_with("<!DOCTYPE html>"));
  CHECK(count(page, "<section>") == 2);  // the empty line has nothing to draw
  CHECK(count(page, "aria-label=\"attention weights\"") == 2);
  CHECK_THAT(page, Contains("<h2>Line 3</h2>"));
  CHECK_THAT(page, Contains(">zz*</text>"));  // read as <unk>
  const std::string low = lower(page);
  for (const char* ref : {"<script", "http://", "https://", "<link", "<img", "url("})
    CHECK(low.find(ref) == std::string::npos);
  if (!tapestry::testing::have_chromium()) {
    WARN("chromium not found (apt-get install chromium): the page not loaded");
    return;
  }
  const auto b = tapestry::testing::load_in_chromium(page_path.string());
  CHECK(b.console.empty());
  CHECK(count(b.dom, "<svg") == count(page, "<svg"));
}

TEST_CASE("report: the loss of single steps, and the probe sentence at every epoch", "[report]") {
  const fs::path dir = scratch() / "run-steps";
  const Result t = tapestry_run(
      fmt::format("train --task reverse --min-len 3 --max-len 6 --train-size 500 --valid-size 50 "
                  "--test-size 50 --epochs 2 --hidden 16 --emb 8 --log-every 5 --quiet --out '{}'",
                  dir.string()));
  INFO(t.err);
  REQUIRE(t.status == 0);
  // A line at every 5th step of each epoch, and each epoch's line with its probe.
  const std::string log = slurp(dir / "metrics.jsonl");
  const auto per_epoch = matches(log, "\"epoch_steps\":(\\d+)");
  REQUIRE(!per_epoch.empty());
  const int steps = std::stoi(per_epoch[0][0]), lines = steps / 5;
  CHECK(count(log, "\"kind\":\"step\"") == static_cast<size_t>(2 * lines));
  CHECK(count(log, "\"probe\":") == 2);
  // A resumed run logs an interrupted epoch's steps again: the later lines win. This one is
  // epoch 2's 5th step again, so it replaces every line of epoch 2 before it.
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << fmt::format(
      "{{\"kind\":\"step\",\"epoch\":2,\"step\":{},\"epoch_step\":5,\"epoch_steps\":{},"
      "\"loss\":0.5,\"lr\":0.001,\"elapsed_seconds\":1}}\n",
      steps + 5, steps);
  const Result r = tapestry_run(fmt::format("report --model '{}'", dir.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string page = slurp(dir / "report.html");
  CHECK_THAT(page, Contains(">train loss, single steps</text>"));
  CHECK_THAT(page, Contains("logged every 5 steps"));
  // The single steps are a thin line without points: epoch 1's and the one line of epoch 2.
  const auto thin = matches(page,
                            "stroke-width=\"1.2\" stroke-linejoin=\"round\" "
                            "stroke-opacity=\"0.7\" points=\"([^\"]*)\"");
  REQUIRE(thin.size() == 1);
  CHECK(count(thin[0][0], ",") == static_cast<size_t>(lines + 1));
  CHECK(count(page, "<circle class=\"point\"") == 10);  // the epochs' points, as before
  // The probe: one heatmap per epoch with the true alignment outlined.
  CHECK_THAT(page, Contains("<h2>Attention over training</h2>"));
  CHECK(count(page, "<figcaption>epoch ") == 2);
  CHECK(count(page, "aria-label=\"attention weights\"") == 6 + 2);
  CHECK(count(page, "class=\"truth\"") > 0);
}

TEST_CASE("report: a Transformer run draws every head of every layer, and loads in Chromium",
          "[report]") {
  const fs::path dir = scratch() / "run-transformer";
  const Result t = tapestry_run(
      fmt::format("train --task reverse --min-len 3 --max-len 6 --train-size 500 --valid-size 50 "
                  "--test-size 50 --epochs 2 --arch transformer --d-model 16 --heads 2 --ffn 32 "
                  "--enc-layers 2 --dec-layers 2 --dropout 0 --quiet --out '{}'",
                  dir.string()));
  INFO(t.err);
  REQUIRE(t.status == 0);
  const Result r = tapestry_run(fmt::format("report --model '{}'", dir.string()));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const fs::path page_path = dir / "report.html";
  const std::string page = slurp(page_path);
  CHECK_THAT(page, Contains("<h2>Every head of the Transformer</h2>"));
  for (int l = 1; l <= 2; ++l) {
    CHECK_THAT(page, Contains(fmt::format("<h3>Decoder layer {}: cross-attention", l)));
    CHECK_THAT(page, Contains(fmt::format("<h3>Encoder layer {}: self-attention</h3>", l)));
  }
  // Six samples and two probes as for an RNN, then per decoder layer 2 heads and their mean, per
  // encoder layer 2 heads.
  CHECK(count(page, "<figcaption>mean of the heads</figcaption>") == 2);
  CHECK(count(page, "aria-label=\"attention weights\"") == 6 + 2 + 2 * 3 + 2 * 2);
  for (const char* tag : {"html", "body", "main", "svg", "div", "figure", "g"}) {
    INFO("tag " << tag);
    CHECK(balanced(page, tag));
  }
  if (tapestry::testing::have_chromium()) {
    const auto b = tapestry::testing::load_in_chromium(page_path.string());
    CHECK(b.console.empty());
    CHECK(count(b.dom, "<svg") == count(page, "<svg"));
  }
}
