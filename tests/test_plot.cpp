// tapestry plot: scores by source length from eval's JSON files, and its refusals of bad input.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "cli_run.h"

using namespace tapestry::testing;
using Catch::Contains;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What tapestry eval --json writes, reduced to the keys plot reads.
std::string eval_json(const std::string& model, double bleu_short, double bleu_long) {
  return fmt::format(
      R"({{"model": "{}", "by_length": [
  {{"bucket": "1-10", "sentences": 5, "mean_source_length": 6.4, "bleu": {}, "exact": 0.8,
    "token_acc": 0.9}},
  {{"bucket": "11+", "sentences": 3, "mean_source_length": 14.0, "bleu": {}, "exact": 0.0,
    "token_acc": 0.5}}]}})",
      model, bleu_short, bleu_long);
}

}  // namespace

TEST_CASE("plot draws one line per eval file, named and placed at the buckets' mean lengths",
          "[plot]") {
  TempDir dir("plot");
  write(dir / "a.json", eval_json("gru, no attention", 90.5, 12.25));
  write(dir / "b.json", eval_json("gru, bahdanau attention", 99.0, 98.0));
  CommandResult r = run_tapestry(fmt::format("plot '{}' '{}' --out '{}' --title 'Reverse'",
                                             dir / "a.json", dir / "b.json", dir / "lengths.svg"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string svg = read(dir / "lengths.svg");
  CHECK_THAT(svg, Contains("xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(count(svg, "<polyline") == 2);
  CHECK(count(svg, "class=\"point\"") == 4);
  CHECK_THAT(svg, Contains("gru, no attention"));  // the models' summaries name the lines
  CHECK_THAT(svg, Contains("gru, bahdanau attention"));
  CHECK_THAT(svg, Contains(">Reverse</text>"));
  CHECK_THAT(svg, Contains("source length (tokens, mean of the bucket) 14: 12.25"));  // a tooltip

  // --names replaces the summaries; --metric picks another score, as a percentage.
  r = run_tapestry(fmt::format("plot '{}' '{}' --names 'none,attention' --metric exact --out '{}'",
                               dir / "a.json", dir / "b.json", dir / "exact.svg"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string exact = read(dir / "exact.svg");
  CHECK_THAT(exact, Contains(">none</text>"));
  CHECK_THAT(exact, Contains("exact match (%)"));
  CHECK_THAT(exact, Contains("14: 0.00"));
  CHECK_THAT(exact, Contains("6.4: 80.00"));
}

TEST_CASE("plot refuses bad input with one line naming the file, key or flag", "[plot][errors]") {
  TempDir dir("plot_bad");
  write(dir / "ok.json", eval_json("m", 50, 40));
  write(dir / "broken.json", "{\"by_length\": [");
  write(dir / "other.json", "{\"bleu\": 3}");
  write(dir / "nolen.json", R"({"by_length": [{"bucket": "1-10", "bleu": 3}]})");
  const std::string out = dir / "x.svg";
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {fmt::format("plot --out '{}'", out), "at least one EVAL.json"},
      {fmt::format("plot '{}'", dir / "ok.json"), "--out is required"},
      {fmt::format("plot '{}' --out '{}'", dir / "missing.json", out), "missing.json"},
      {fmt::format("plot '{}' --out '{}'", dir / "broken.json", out), "not valid JSON"},
      {fmt::format("plot '{}' --out '{}'", dir / "other.json", out), "no 'by_length' list"},
      {fmt::format("plot '{}' --out '{}'", dir / "nolen.json", out),
       "by_length[0] has no number 'mean_source_length'"},
      {fmt::format("plot '{}' --metric bleu4 --out '{}'", dir / "ok.json", out),
       "--metric 'bleu4'"},
      {fmt::format("plot '{}' --names a,b --out '{}'", dir / "ok.json", out),
       "--names has 2 names for 1 files"},
      {fmt::format("plot '{}' '{}' --names 'a,' --out '{}'", dir / "ok.json", dir / "ok.json", out),
       "--names has an empty name"},
      {fmt::format("plot '{}' --out '{}'", dir / "ok.json", dir / "no/such/dir.svg"), "--out"},
  };
  for (const auto& c : cases) {
    CommandResult r = run_tapestry(c.args);
    INFO(c.args << "\n" << r.output);
    CHECK(r.status != 0);
    CHECK(r.status != -1);
    CHECK_THAT(r.output, Contains(c.message));
    CHECK(count(r.output, "\n") == 1);  // one line
  }
  CHECK(!std::ifstream(out).good());  // nothing written
}
