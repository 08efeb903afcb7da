// Honest small print: translate says which input words it read as <unk>, a BLEU of 0 says why, and
// eval warns when test sentences were also training sentences.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "cli_run.h"
#include "tapestry/models/bleu.h"

using namespace tapestry;
using namespace tapestry::testing;
using Catch::Contains;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A tab-separated corpus of short reversals with one pair repeated 40 times, so the test split
// holds sentences the training split holds too.
std::string corpus_with_repeats() {
  std::string out;
  const char* words[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  for (int i = 0; i < 120; ++i) {
    std::vector<std::string> s;
    for (int k = 0; k < 2 + i % 3; ++k) s.push_back(words[(i * 7 + k * 3) % 8]);
    std::string src, tgt;
    for (size_t k = 0; k < s.size(); ++k) {
      src += (k ? " " : "") + s[k];
      tgt += (k ? " " : "") + s[s.size() - 1 - k];
    }
    out += src + "\t" + tgt + "\n";
  }
  for (int i = 0; i < 40; ++i) out += "a b c\tc b a\n";
  return out;
}

}  // namespace

TEST_CASE("translate names the input words it read as <unk>, and counts them", "[small-print]") {
  TempDir dir("small_print_unk");
  write(dir / "d.tsv", corpus_with_repeats());
  REQUIRE(run_tapestry("train --data d.tsv --emb 8 --hidden 16 --epochs 1 --quiet --test-beam 1 "
                       "--out run",
                       dir.str())
              .status == 0);
  write(dir / "in.txt", "a b zz c\n\nd e\nqq a rr\n");
  CommandResult all = run_tapestry("translate --model run --input in.txt", dir.str());
  REQUIRE(all.status == 0);
  // The notes go to standard error: standard output keeps one line per input line.
  size_t notes = 0, lines = 0;
  for (size_t at = 0, end; at < all.output.size(); at = end + 1) {
    end = all.output.find('\n', at);
    if (end == std::string::npos) end = all.output.size();
    (all.output.compare(at, 19, "tapestry translate:") == 0 ? notes : lines) += 1;
  }
  CHECK(notes == 3);
  CHECK(lines == 4);
  CHECK_THAT(all.output, Contains("line 1: 1 word read as <unk>: 'zz'"));
  CHECK_THAT(all.output, Contains("line 4: 2 words read as <unk>: 'qq', 'rr'"));
  CHECK_THAT(all.output, Contains("3 of 9 input words (2 of 3 sentences) are not in the model's "
                                  "vocabulary"));
  write(dir / "known.txt", "a b c\n");
  CommandResult known = run_tapestry("translate --model run --input known.txt", dir.str());
  CHECK(known.output.find("<unk>") == std::string::npos);
}

TEST_CASE("a BLEU of 0 says why", "[small-print]") {
  using namespace models;
  auto reason = [](const std::vector<std::string>& hyp, const std::vector<std::string>& ref) {
    return bleu_zero_reason(corpus_bleu_stats(hyp, {ref}));
  };
  CHECK_THAT(reason({"a", "b"}, {"a b c", "d e f"}),
             Contains("no 2-grams (every sentence is shorter than 2 tokens)"));
  CHECK_THAT(reason({"x y z w"}, {"a b c d"}), Contains("not one word of the output (4 tokens)"));
  CHECK_THAT(reason({""}, {"a b c d"}), Contains("the output is empty"));
  CHECK(reason({"a b c d"}, {"a b c d"}).empty());  // 100: nothing to explain
  // Without the missing orders (sacreBLEU's effective order) the score is not 0.
  BleuOptions eff;
  eff.effective_order = true;
  CHECK(bleu_zero_reason(corpus_bleu_stats({"a b"}, {{"a b c"}}), eff).empty());

  TempDir dir("small_print_bleu");
  write(dir / "h.txt", "a\nb\n");
  write(dir / "r.txt", "a b c\nd e f\n");
  CommandResult r = run_tapestry("bleu h.txt r.txt", dir.str());
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("BLEU = 0.00") && Contains("note: BLEU is 0 because the output "
                                                           "has no 2-grams"));
}

TEST_CASE("eval warns when test sentences are training sentences too", "[small-print]") {
  TempDir dir("small_print_overlap");
  write(dir / "d.tsv", corpus_with_repeats());
  REQUIRE(run_tapestry("train --data d.tsv --valid-fraction 0.2 --test-fraction 0.2 --emb 8 "
                       "--hidden 16 --epochs 1 --quiet --test-beam 1 --out run",
                       dir.str())
              .status == 0);
  CommandResult r = run_tapestry("eval --model run --json e.json", dir.str());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("test sources are also training sources") &&
                           Contains("with the same reference"));
  std::ifstream in(dir / "e.json");
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(json, Contains("\"train_overlap\""));
  // A toy task's splits are disjoint: no warning.
  REQUIRE(run_tapestry("train --task reverse --min-len 3 --max-len 5 --train-size 200 "
                       "--valid-size 20 --test-size 20 --emb 8 --hidden 16 --epochs 1 --quiet "
                       "--test-beam 1 --out toy",
                       dir.str())
              .status == 0);
  CommandResult toy = run_tapestry("eval --model toy", dir.str());
  CHECK(toy.output.find("training sources") == std::string::npos);
  // Data that is gone cannot be checked: said, not an error.
  std::filesystem::rename(dir / "d.tsv", dir / "moved.tsv");
  CommandResult gone = run_tapestry("eval --model run", dir.str());
  CHECK(gone.status == 0);
  CHECK_THAT(gone.output, Contains("note: not checked against the training data: d.tsv"));
}
