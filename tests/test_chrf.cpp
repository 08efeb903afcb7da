// chrF and chrF++ against sacreBLEU's own tests and README, hand-worked cases, tapestry bleu.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/models/chrf.h"
#include "tests/cli_run.h"

using namespace tapestry;
using namespace tapestry::models;
using Catch::Matchers::Contains;
using tapestry::testing::run_tapestry;
using Lines = std::vector<std::string>;

namespace {

// sacrebleu's test/test_chrf.py compares with abs(score - expected) < EPSILON = 1e-4.
constexpr double kSacreEpsilon = 1e-4;

// One reference stream, as test_chrf.py passes them: corpus_chrf(hyps, [refs], ...).
double one_stream(const Lines& hyps, const Lines& refs, const ChrfOptions& options) {
  return corpus_chrf(hyps, {refs}, options).score;
}

std::string data(const std::string& name) {
  return std::string(TAPESTRY_SOURCE_DIR) + "/tests/data/bleu/" + name;
}

// `tapestry bleu` on fixture files: HYP REF... then the flags.
tapestry::testing::CommandResult run_bleu(const std::vector<std::string>& files,
                                          const std::string& flags) {
  std::string args = "bleu";
  for (const auto& f : files) args += fmt::format(" '{}'", data(f));
  return run_tapestry(args + " " + flags);
}

// sacreBLEU's README example (section "Using SacreBLEU from Python"), also in test_bleu.cpp.
const Lines kReadmeHyps = {"The dog bit the man.", "It wasn't surprising.",
                           "The man had just bitten him."};
const std::vector<Lines> kReadmeRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

struct Case {
  Lines hyps, refs;
  double expected;
};

}  // namespace

TEST_CASE("sacreBLEU README example: chrF2 with two reference streams", "[chrf]") {
  // README, "Using SacreBLEU from Python": CHRF().corpus_score(sys, refs) -> "chrF2 = 59.73".
  // With two references per line, each line counts the one with the better sentence chrF.
  ChrfScore s = corpus_chrf(kReadmeHyps, kReadmeRefs);
  CHECK(s.str() == "chrF2 = 59.73");
  CHECK(s.score == Approx(59.73).margin(0.005));
  // The signature's fields and their order as in the README's multi-reference example
  // ("chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.0.0 = 75.0").
  CHECK(chrf_signature(kReadmeRefs) ==
        "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tapestry");
  // README, "Using multiple metrics": --chrf-word-order 2 is named chrF2++ with nw:2.
  ChrfOptions plus{.word_order = 2};
  CHECK(corpus_chrf(kReadmeHyps, kReadmeRefs, plus).name == "chrF2++");
  CHECK(chrf_signature(kReadmeRefs, plus) ==
        "nrefs:2|case:mixed|eff:yes|nc:6|nw:2|space:no|version:tapestry");
  CHECK(chrf_signature({{"x"}}, {.lowercase = true, .whitespace = true, .eps_smoothing = true}) ==
        "nrefs:1|case:lc|eff:no|nc:6|nw:0|space:yes|version:tapestry");
}

TEST_CASE("sacreBLEU test_chrf.py test_cases: eps smoothing, beta 3", "[chrf]") {
  // test_chrf: corpus_chrf(hyps, [refs], char_order=6, word_order=0, beta=3, eps_smoothing=True),
  // including the corner cases with an empty hypothesis.
  const std::vector<Case> cases = {
      {{"abcdefg"}, {"hijklmnop"}, 0.0},
      {{"a"}, {"b"}, 0.0},
      {{""}, {"b"}, 0.0},
      {{""}, {"ref"}, 0.0},
      {{""}, {"reference"}, 0.0},
      {{"aa"}, {"ab"}, 8.3333},
      {{"a", "b"}, {"a", "c"}, 8.3333},
      {{"a"}, {"a"}, 16.6667},
      {{"a b c"}, {"a b c"}, 50.0},
      {{"a b c"}, {"abc"}, 50.0},
      {{" risk assessment must be made of those who are qualified and expertise in the sector - "
        "these are the scientists ."},
       {"risk assessment has to be undertaken by those who are qualified and expert in that area "
        "- that is the scientists ."},
       63.361730},
      {{" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
       {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
       64.1302698},
      {{"Niemand hat die Absicht, eine Mauer zu errichten"},
       {"Niemand hat die Absicht, eine Mauer zu errichten"},
       100.0},
  };
  // The Netanjahu line's figure is its score without eps smoothing (64.13026983 by the formula);
  // with it the score is 64.13022, 5e-5 away, inside the tolerance sacreBLEU's own test allows.
  const ChrfOptions options{.char_order = 6, .word_order = 0, .beta = 3, .eps_smoothing = true};
  for (const Case& c : cases) {
    INFO(c.hyps[0] << " | " << c.refs[0]);
    CHECK(one_stream(c.hyps, c.refs, options) == Approx(c.expected).margin(kSacreEpsilon));
  }
}

TEST_CASE("sacreBLEU test_chrf.py test_cases_effective_order: sacreBLEU's default", "[chrf]") {
  // test_chrf_eff_order: beta=3, eps_smoothing=False (the "sacreBLEU < 2.0.0 mode", still the
  // default in 2.x: orders the hypothesis or the reference lacks are left out).
  const std::vector<Case> cases = {
      {{"a"}, {"a"}, 100.0},       {{""}, {"reference"}, 0.0}, {{"a b c"}, {"a b c"}, 100.0},
      {{"a b c"}, {"abc"}, 100.0}, {{""}, {"c"}, 0.0},         {{"a", "b"}, {"a", "c"}, 50.0},
      {{"aa"}, {"ab"}, 25.0},
  };
  for (const Case& c : cases) {
    INFO(c.hyps[0] << " | " << c.refs[0]);
    CHECK(one_stream(c.hyps, c.refs, {.beta = 3}) == Approx(c.expected).margin(kSacreEpsilon));
  }
}

TEST_CASE("sacreBLEU test_chrf.py test_cases_keep_whitespace", "[chrf]") {
  // test_chrf_keep_whitespace: beta=3, remove_whitespace=False.
  const std::vector<Case> cases = {
      {{"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
       {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
       67.3481606},
      {{"risk assessment must be made of those who are qualified and expertise in the sector - "
        "these are the scientists ."},
       {"risk assessment has to be undertaken by those who are qualified and expert in that area "
        "- that is the scientists ."},
       65.2414427},
  };
  for (const Case& c : cases)
    CHECK(one_stream(c.hyps, c.refs, {.beta = 3, .whitespace = true}) ==
          Approx(c.expected).margin(kSacreEpsilon));
}

TEST_CASE("sacreBLEU test_chrf.py test_sentence_level_chrf: Czech, chrF2 with eps", "[chrf]") {
  // test_chrf_sentence_level: sentence_chrf(hyp, refs, eps_smoothing=True), beta 2. The accented
  // letters are one character each: counting bytes would give other scores.
  const std::vector<Case> cases = {
      {{"Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře."},
       {"Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."},
       39.14078509},
      {{"Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři."},
       {"A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."},
       31.22557079},
      {{"Lapali po dechu, jejich životy skončily dřív, než skutečně začaly."},
       {"Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."},
       57.15704367},
  };
  for (const Case& c : cases) {
    ChrfStats stats = segment_chrf_stats(c.hyps[0], {c.refs[0]}, {.eps_smoothing = true});
    CHECK(chrf_from_stats(stats, {.eps_smoothing = true}).score ==
          Approx(c.expected).margin(kSacreEpsilon));
  }
}

TEST_CASE("hand-worked chrF: several references, corpus sums", "[chrf]") {
  // hyp "abcd" against "ab": orders 1-2 (hyp, ref, match) = (4,2,2), (3,1,1); "ab" has no
  // 3-grams, so orders 3-6 count nothing. P = (2/4 + 1/3) / 2 = 5/12, R = 1,
  // chrF2 = 5PR / (4P + R) = (25/12) / (32/12) = 25/32 = 78.125.
  // Against "bcd": (4,3,3), (3,2,2), (2,1,1): P = (3/4 + 2/3 + 1/2) / 3 = 23/36, R = 1,
  // chrF2 = (115/36) / (128/36) = 115/128 = 89.84375: the better one, so its counts are kept.
  ChrfStats line1 = segment_chrf_stats("abcd", {"ab", "bcd"});
  REQUIRE(line1.orders.size() == 6);
  CHECK(line1.orders[0].hyp == 4);
  CHECK(line1.orders[0].ref == 3);
  CHECK(line1.orders[0].match == 3);
  CHECK(line1.orders[3].hyp == 0);  // "bcd" has no 4-grams: the hypothesis' are not counted
  CHECK(chrf_from_stats(line1).score == Approx(89.84375).margin(1e-9));
  CHECK(chrf_from_stats(segment_chrf_stats("abcd", {"ab"})).score == Approx(78.125).margin(1e-9));
  // The order of the references does not matter, and an empty one is skipped.
  CHECK(chrf_from_stats(segment_chrf_stats("abcd", {"", "bcd", "ab"})).score ==
        Approx(89.84375).margin(1e-9));

  // Corpus: line 2 "x" against "x" only (the second stream's line is empty: nrefs:var) adds
  // (1,1,1) to order 1. Sums: (5,4,4), (3,2,2), (2,1,1): P = (4/5 + 2/3 + 1/2) / 3 = 59/90, R = 1,
  // chrF2 = (295/90) / (326/90) = 295/326 = 90.4907975..., not the mean of 89.84 and 100.
  const std::vector<Lines> refs = {{"ab", "x"}, {"bcd", ""}};
  ChrfScore corpus = corpus_chrf({"abcd", "x"}, refs);
  CHECK(corpus.score == Approx(100.0 * 295 / 326).margin(1e-9));
  CHECK(corpus.str() == "chrF2 = 90.49");
  CHECK(corpus.str(4) == "chrF2 = 90.4908");
  CHECK(chrf_signature(refs) == "nrefs:var|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tapestry");
  ChrfStats summed = line1;
  summed += segment_chrf_stats("x", {"x"});
  CHECK(chrf_from_stats(summed).score == corpus.score);
}

TEST_CASE("hand-worked chrF: characters are code points, whitespace, lower-casing", "[chrf]") {
  // "ščř" against "ščx", three characters each (six bytes): orders 1-3 (hyp, ref, match) =
  // (3,3,2), (2,2,1), (1,1,0), so P = R = (2/3 + 1/2 + 0) / 3 = 7/18 and chrF2 = P = 38.888...
  CHECK(corpus_chrf({"ščř"}, {{"ščx"}}).score == Approx(100.0 * 7 / 18).margin(1e-9));

  // "a b" against "ab": without whitespace both are "ab", 100. With it, "a b" has (3,2,2) and
  // (2,1,0) ("a ", " b" against "ab"), and its 3-gram is not counted ("ab" has none):
  // P = (2/3 + 0) / 2 = 1/3, R = (1 + 0) / 2 = 1/2, chrF2 = (5/6) / (4/3 + 1/2) = 5/11 = 45.45...
  CHECK(corpus_chrf({"a b"}, {{"ab"}}).score == 100.0);
  CHECK(corpus_chrf({"a b"}, {{"ab"}}, {.whitespace = true}).score ==
        Approx(100.0 * 5 / 11).margin(1e-9));
  // Any Unicode whitespace goes (tab, NBSP, ideographic space), as with Python's str.split().
  CHECK(corpus_chrf({"a\t\u00a0b\u3000"}, {{"ab"}}).score == 100.0);

  // "ŠČ" against "šč": (2,2,0), (1,1,0), so P = R = 0 and chrF is 0; lower-cased, 100.
  CHECK(corpus_chrf({"ŠČ"}, {{"šč"}}).score == 0.0);
  CHECK(corpus_chrf({"ŠČ"}, {{"šč"}}, {.lowercase = true}).score == 100.0);
}

TEST_CASE("chrF++: words split off one punctuation character as sacreBLEU does", "[chrf]") {
  // sacreBLEU's _remove_punctuation (from chrF++.py): a final ASCII punctuation character splits
  // off, else an initial one; one-character words stay; "(hi)" gives "(hi" and ")" (its #124).
  CHECK(chrf_words("a b.") == Lines{"a", "b", "."});
  CHECK(chrf_words("(hi)") == Lines{"(hi", ")"});
  CHECK(chrf_words("\"quoted ... . x") == Lines{"\"", "quoted", "..", ".", ".", "x"});
  CHECK(chrf_words("é. «fin»") == Lines{"é", ".", "«fin»"});  // only ASCII punctuation
  CHECK(chrf_words(" \t") == Lines{});

  // "a b." against "a b", word_order 2. Characters "ab." against "ab": (3,2,2), (2,1,1), and no
  // 3-grams in the reference. Words [a, b, .] against [a, b]: (3,2,2), ("a b", "b ." against
  // "a b") (2,1,1). P = (2/3 + 1/2 + 2/3 + 1/2) / 4 = 7/12, R = 1,
  // chrF2++ = 5PR / (4P + R) = (35/12) / (40/12) = 87.5.
  ChrfOptions plus{.word_order = 2};
  ChrfScore s = corpus_chrf({"a b."}, {{"a b"}}, plus);
  CHECK(s.score == Approx(87.5).margin(1e-9));
  CHECK(s.str() == "chrF2++ = 87.50");
  ChrfStats stats = segment_chrf_stats("a b.", {"a b"}, plus);
  REQUIRE(stats.orders.size() == 8);
  CHECK(stats.orders[6].hyp == 3);  // word unigrams
  CHECK(stats.orders[7].match == 1);
  // Whitespace kept for characters or not, the words are the same.
  ChrfStats spaced = segment_chrf_stats("a b.", {"a b"}, {.word_order = 2, .whitespace = true});
  CHECK(spaced.orders[6].hyp == 3);
  CHECK(corpus_chrf({"x"}, {{"x"}}, {.word_order = 1}).name == "chrF2+");
}

TEST_CASE("chrF: bad input is refused with ValueError", "[chrf]") {
  CHECK_THROWS_AS(segment_chrf_stats("a", {"", ""}), ValueError);
  CHECK_THROWS_WITH(segment_chrf_stats("a", {""}), Contains("all 1 references"));
  CHECK_THROWS_WITH(corpus_chrf({"a", "b"}, {{"a", ""}}), Contains("corpus_chrf: line 2"));
  CHECK_THROWS_WITH(corpus_chrf({"a", "b"}, {{"a"}}), Contains("reference stream 1 has 1 lines"));
  CHECK_THROWS_AS(corpus_chrf({"a"}, {}), ValueError);
  CHECK_THROWS_AS(corpus_chrf({"a"}, {{"a"}}, {.char_order = 0}), ValueError);
  CHECK_THROWS_AS(corpus_chrf({"a"}, {{"a"}}, {.word_order = -1}), ValueError);
  CHECK_THROWS_AS(corpus_chrf({"a"}, {{"a"}}, {.beta = -1}), ValueError);
  ChrfStats six = segment_chrf_stats("a", {"a"});
  CHECK_THROWS_AS(six += segment_chrf_stats("a", {"a"}, {.word_order = 2}), ValueError);
  CHECK_THROWS_AS(chrf_from_stats(six, {.word_order = 2}), ValueError);
  // No sentences: nothing to score.
  CHECK(corpus_chrf({}, {{}}).score == 0.0);
  CHECK(chrf_from_stats(ChrfStats{}).str() == "chrF2 = 0.00");
  // Only the word orders: characters are optional.
  CHECK(corpus_chrf({"a b"}, {{"a b"}}, {.char_order = 0, .word_order = 2}).score == 100.0);
}

TEST_CASE("tapestry bleu --metrics chrf: scores fixture files like sacreBLEU", "[chrf]") {
  // sacreBLEU README example: chrF2 = 59.73 with two reference files.
  auto r = run_bleu({"readme.hyp", "readme.ref1", "readme.ref2"}, "--metrics chrf");
  CHECK(r.status == 0);
  CHECK(r.output ==
        "chrF2 = 59.73\n"
        "signature: nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tapestry\n");
  // Both metrics, BLEU first as sacreBLEU sorts them, whatever order is asked for.
  const std::string both =
      "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
      "signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:tapestry\n"
      "chrF2 = 59.73\n"
      "signature: nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tapestry\n";
  CHECK(run_bleu({"readme.hyp", "readme.ref1", "readme.ref2"}, "-m bleu,chrf").output == both);
  CHECK(run_bleu({"readme.hyp", "readme.ref1", "readme.ref2"}, "-m chrf,bleu").output == both);
  CHECK(run_bleu({"readme.hyp", "readme.ref1", "readme.ref2"}, "-m bleu,chrf -b").output ==
        "48.53\n59.73\n");
  // The default is BLEU alone, as before.
  CHECK(run_bleu({"readme.hyp", "readme.ref1", "readme.ref2"}, "").output ==
        both.substr(0, both.find("chrF2")));
  // An empty line in a reference file: a variable number of references.
  r = run_bleu({"readme.hyp", "readme_var.ref1", "readme.ref2"}, "-m chrf");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("signature: nrefs:var|case:mixed|eff:yes|"));

  // The hand-worked cases of this file: chrF++ 87.50, whitespace 45.45 (100 without it).
  r = run_bleu({"chrf_words.hyp", "chrf_words.ref"}, "-m chrf --chrf-word-order 2");
  CHECK(r.output ==
        "chrF2++ = 87.50\n"
        "signature: nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:tapestry\n");
  CHECK(run_bleu({"chrf_space.hyp", "chrf_space.ref"}, "-m chrf -b").output == "100.00\n");
  r = run_bleu({"chrf_space.hyp", "chrf_space.ref"}, "-m chrf --chrf-whitespace -w 4");
  CHECK(r.output ==
        "chrF2 = 45.4545\n"
        "signature: nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:yes|version:tapestry\n");
  // "The Cat sat on the MAT" against "the cat sat on the mat", lower-cased: identical.
  r = run_bleu({"case.hyp", "case.ref"}, "-m chrf --chrf-lowercase");
  CHECK_THAT(r.output, Contains("chrF2 = 100.00\n") && Contains("|case:lc|"));
  CHECK_THAT(run_tapestry("bleu --help").output,
             Contains("--metrics, -m LIST") && Contains("--chrf-word-order"));
}

TEST_CASE("tapestry bleu --metrics chrf: bad input", "[chrf]") {
  const std::vector<std::string> files = {"readme.hyp", "readme.ref1"};
  auto r = run_bleu(files, "--metrics ter");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--metrics: unknown metric 'ter' (valid: bleu, chrf)"));
  r = run_bleu(files, "-m bleu,");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("unknown metric ''"));
  r = run_bleu(files, "-m");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("-m needs a value"));
  r = run_bleu(files, "-m chrf --chrf-word-order two");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--chrf-word-order"));
  r = run_bleu(files, "-m chrf -cw 11");
  CHECK(r.status == 2);
  // An option of a metric that is not computed is refused rather than ignored.
  r = run_bleu(files, "--chrf-word-order 2");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--chrf-word-order is a chrF option, but --metrics does not"));
  r = run_bleu(files, "-m chrf --lowercase");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("(chrF's is --chrf-lowercase)"));
  // A line without any reference: exit 1, naming file and line, as for BLEU.
  r = run_bleu({"three_lines.hyp", "blank_line.ref"}, "-m chrf");
  CHECK(r.status == 1);
  CHECK_THAT(r.output,
             Contains(data("blank_line.ref") + ":2: the reference line is empty; sacreBLEU"));
  r = run_bleu({"two_lines.hyp", "readme.ref1"}, "-m chrf");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("has 2 lines but"));
}
