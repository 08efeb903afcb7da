// Corpus BLEU and the 13a tokenizer against sacreBLEU's documented numbers and hand-worked cases.
#include <fmt/format.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "shell_run.h"
#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"

using namespace tapestry;
using namespace tapestry::models;
using Catch::Matchers::Contains;
using Tokens = std::vector<std::string>;

namespace {

// sacreBLEU's README example (section "Using SacreBLEU from Python", also used as
// test_corpus_bleu_cases in sacrebleu's test/test_bleu.py).
const std::vector<std::string> kReadmeHyps = {"The dog bit the man.", "It wasn't surprising.",
                                              "The man had just bitten him."};
const std::vector<std::vector<std::string>> kReadmeRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

// sacreBLEU's test/test_sentence_bleu.py ("Example taken from #98"): one sentence, scored with
// effective_order=True; a one-line corpus is what sacreBLEU's sentence_score computes.
const std::string kIssue98Hyp =
    "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
const std::string kIssue98Ref = "producţia de zahăr brut se exprimă în zahăr alb;";

BleuScore one_sentence(const std::string& hyp, std::vector<std::string> refs,
                       const BleuOptions& options = {}) {
  std::vector<std::vector<std::string>> streams;
  for (auto& r : refs) streams.push_back({r});
  return corpus_bleu({hyp}, streams, options);
}

std::string data(const std::string& name) {
  return std::string(TAPESTRY_SOURCE_DIR) + "/tests/data/bleu/" + name;
}

using Run = testing::CommandResult;  // its output: stdout and stderr together

Run run_tapestry(const std::string& args) {
  return testing::run_command(fmt::format("'{}/tapestry' bleu {} 2>&1", TAPESTRY_BINARY_DIR, args));
}

}  // namespace

TEST_CASE("13a tokenizer: punctuation, numbers and dashes by mteval-v13a's rules", "[bleu]") {
  // Each expectation is derived by hand from the four substitutions in sacreBLEU's
  // tokenizers/tokenizer_re.py (applied to " line "), then a split on whitespace.
  // Rule 1 pads every ASCII symbol except ' , - . with spaces.
  CHECK(tokenize_13a("Hello, world!") == Tokens{"Hello", ",", "world", "!"});
  CHECK(tokenize_13a("(a) [b] {c} $5 @x #y 50% a/b a*b a+b a=b a?b a:b a;b a|b a~b a^b a_b") ==
        Tokens{"(", "a", ")", "[", "b", "]", "{", "c", "}", "$", "5", "@", "x", "#", "y", "50", "%",
               "a", "/", "b", "a", "*", "b", "a", "+", "b", "a", "=", "b", "a", "?", "b", "a",  ":",
               "b", "a", ";", "b", "a", "|", "b", "a", "~", "b", "a", "^", "b", "a", "_", "b"});
  // The apostrophe is not in the class (sacreBLEU's README sentence; flexeval's test of
  // sacreBLEU's 13a tokenizer expects "I'm a student." -> I'm a student .).
  CHECK(tokenize_13a("It wasn't surprising.") == Tokens{"It", "wasn't", "surprising", "."});
  CHECK(tokenize_13a("I'm a student.") == Tokens{"I'm", "a", "student", "."});
  // Rules 2 and 3: '.' and ',' split off unless a digit is on both sides.
  CHECK(tokenize_13a("1,000.5 people") == Tokens{"1,000.5", "people"});
  CHECK(tokenize_13a("pi is 3.14.") == Tokens{"pi", "is", "3.14", "."});
  CHECK(tokenize_13a("a.b x,y") == Tokens{"a", ".", "b", "x", ",", "y"});
  CHECK(tokenize_13a("5.a a.5") == Tokens{"5", ".", "a", "a", ".", "5"});
  // "e.g." -> rule 2 matches "e." then "g." (non-overlapping, left to right).
  CHECK(tokenize_13a("e.g. this") == Tokens{"e", ".", "g", ".", "this"});
  // "1..5": rule 2 skips "1." (digit) and matches ".." -> "1. . 5"; rule 3 then splits "1.".
  CHECK(tokenize_13a("1..5") == Tokens{"1", ".", ".", "5"});
  // Rule 4: a dash splits off only after a digit.
  CHECK(tokenize_13a("well-known 1-2 a-1 2-a") ==
        Tokens{"well-known", "1", "-", "2", "a-1", "2", "-", "a"});
  CHECK(tokenize_13a("1-2-3") == Tokens{"1", "-", "2", "-", "3"});
  // Non-ASCII letters are never split off; the byte-level rules see them as non-digits.
  CHECK(tokenize_13a("zahăr alb;") == Tokens{"zahăr", "alb", ";"});
  CHECK(tokenize_13a("Preis: 5€.") == Tokens{"Preis", ":", "5€", "."});
}

TEST_CASE("13a tokenizer: entities, <skipped>, newlines and Unicode whitespace", "[bleu]") {
  // tokenizer_13a.py: &quot; &amp; &lt; &gt; are unescaped in that order, one pass each.
  CHECK(tokenize_13a("&quot;Hi&quot; &amp; &lt;b&gt;") ==
        Tokens{"\"", "Hi", "\"", "&", "<", "b", ">"});
  // "&amp;quot;" -> "&quot;" only after the &quot; pass, so it stays and is split by rule 1.
  CHECK(tokenize_13a("&amp;quot;") == Tokens{"&", "quot", ";"});
  CHECK(tokenize_13a("a <skipped> b") == Tokens{"a", "b"});
  // str.replace does not rescan what it produced.
  CHECK(tokenize_13a("<skip<skipped>ped>") == Tokens{"<", "skipped", ">"});
  // "-\n" joins a hyphenated line break, other newlines become spaces.
  CHECK(tokenize_13a("hyphen-\nated line\nbreak") == Tokens{"hyphenated", "line", "break"});
  // Python's str.split() splits on tab, NBSP (U+00A0) and ideographic space (U+3000), but not
  // on the zero-width space U+200B (not str.isspace()).
  CHECK(tokenize_13a("  a\tb\u00a0c\u3000d  ") == Tokens{"a", "b", "c", "d"});
  CHECK(tokenize_13a("a\u200bb") == Tokens{"a\u200bb"});
  CHECK(tokenize_13a("").empty());
  CHECK(tokenize_13a("<skipped>").empty());
  // Invalid UTF-8 passes through as part of a word.
  CHECK(tokenize_13a("a\xff\xfe b.") == Tokens{"a\xff\xfe", "b", "."});
}

TEST_CASE("whitespace and lower-casing helpers follow Python's str methods", "[bleu]") {
  CHECK(split_whitespace(" a\u2009b\u0085c\x1c d ") == Tokens{"a", "b", "c", "d"});
  CHECK(rstrip_whitespace("a b \t\r\u00a0") == "a b");
  CHECK(rstrip_whitespace(" \u3000") == "");
  // Simple lowercase mappings from UnicodeData.txt: A-Z, Latin-1 (Ä Ö Ü É), Latin Extended-A
  // (Ł Œ Ÿ -> ÿ), Greek, Cyrillic; ß has no lowercase change; İ becomes i + U+0307.
  CHECK(lowercase_utf8("ÄÖÜ ÉCOLE Straße ŁÓDŹ ŒUVRE Ÿ") == "äöü école straße łódź œuvre ÿ");
  CHECK(lowercase_utf8("ΑΒΓ ДОМ Ё") == "αβγ дом ё");
  CHECK(lowercase_utf8("İ") == "i\u0307");
  CHECK(lowercase_utf8("A\xff") == "a\xff");
}

TEST_CASE("sacreBLEU README example: two reference streams", "[bleu]") {
  // README: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17
  // ref_len = 18)"; test/test_bleu.py gives the score as 48.530827.
  BleuScore s = corpus_bleu(kReadmeHyps, kReadmeRefs);
  CHECK(s.str() ==
        "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  CHECK(s.score == Approx(48.530827).margin(1e-6));
  CHECK(bleu_signature(kReadmeRefs) ==
        "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:tapestry");
  // test_bleu.py: tokenize='none' gives 49.1919566; smooth_method='none' 48.530827 (every
  // order has matches, so smoothing changes nothing).
  CHECK(corpus_bleu(kReadmeHyps, kReadmeRefs, {.tokenizer = BleuTokenizer::kNone}).score ==
        Approx(49.1919566).margin(1e-6));
  CHECK(corpus_bleu(kReadmeHyps, kReadmeRefs, {.smooth = BleuSmooth::kNone}).score ==
        Approx(48.530827).margin(1e-6));
  // test_bleu.py: "ensure that empty hypotheses are not removed" -> 0.0. By hand: hyp_len 0,
  // closest reference lengths 6 + 5 + 6 = 17, so BP = 0 and the ratio is 0.
  BleuScore empty = corpus_bleu({"", "", ""}, kReadmeRefs);
  CHECK(empty.score == 0.0);
  CHECK(empty.str() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 17)");
}

TEST_CASE("sacreBLEU README example: a variable number of references", "[bleu]") {
  // README "Variable Number of References": the first reference of the first line is ''.
  auto refs = kReadmeRefs;
  refs[0][0] = "";
  BleuScore s = corpus_bleu(kReadmeHyps, refs);
  CHECK(s.str() ==
        "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)");
  CHECK(bleu_signature(refs) == "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:tapestry");
  // A line whose every reference is empty is an error, as in sacreBLEU.
  refs[1][0] = "";
  CHECK_THROWS_AS(corpus_bleu(kReadmeHyps, refs), ValueError);
  CHECK_THROWS_WITH(corpus_bleu(kReadmeHyps, refs), Contains("line 1"));
}

TEST_CASE("sacreBLEU test_sentence_bleu.py #98: smoothing methods, effective order", "[bleu]") {
  // Expected scores and tolerance (1e-3) from sacrebleu's test/test_sentence_bleu.py.
  struct Case {
    BleuSmooth smooth;
    std::optional<double> value;
    BleuTokenizer tok;
    double expected;
  };
  const Case cases[] = {
      {BleuSmooth::kExp, {}, BleuTokenizer::k13a, 8.493},
      {BleuSmooth::kNone, {}, BleuTokenizer::k13a, 0.0},
      {BleuSmooth::kFloor, {}, BleuTokenizer::k13a, 4.51688},
      {BleuSmooth::kFloor, 0.1, BleuTokenizer::k13a, 4.51688},
      {BleuSmooth::kFloor, 0.5, BleuTokenizer::k13a, 10.10},
      {BleuSmooth::kAddK, {}, BleuTokenizer::k13a, 14.882},
      {BleuSmooth::kAddK, 1.0, BleuTokenizer::k13a, 14.882},
      {BleuSmooth::kAddK, 2.0, BleuTokenizer::k13a, 21.389},
      {BleuSmooth::kExp, {}, BleuTokenizer::kNone, 7.347},
  };
  for (const auto& c : cases) {
    BleuOptions o{
        .tokenizer = c.tok, .smooth = c.smooth, .smooth_value = c.value, .effective_order = true};
    INFO(fmt::format("smooth {} value {} tok {}", static_cast<int>(c.smooth), c.value.value_or(-1),
                     static_cast<int>(c.tok)));
    CHECK(one_sentence(kIssue98Hyp, {kIssue98Ref}, o).score == Approx(c.expected).margin(1e-3));
  }
  // "Example taken from #141": no n-gram matches gives 0.0 under every smoothing method.
  for (auto smooth : {BleuSmooth::kExp, BleuSmooth::kNone, BleuSmooth::kFloor, BleuSmooth::kAddK})
    CHECK(
        one_sentence("this is a cat", {"okay thanks"}, {.smooth = smooth, .effective_order = true})
            .score == 0.0);
}

TEST_CASE("sacreBLEU test_bleu.py: statistics, scoring and degenerate cases", "[bleu]") {
  // test_case_statistics: counts [4, 2, 1, 0], totals [6, 5, 4, 3]. By hand: hyp "am I am a
  // character sequence" (6 tokens), ref "I am a symbol string sequence a a" (8 tokens).
  // Unigrams: am min(2,1) + I + a + sequence = 4; bigrams "I am", "am a" = 2; trigram
  // "I am a" = 1; no 4-gram.
  BleuStats st = bleu_stats(tokenize_13a("am I am a character sequence"),
                            {tokenize_13a("I am a symbol string sequence a a")});
  CHECK(st.matches == std::array<int64_t, 4>{4, 2, 1, 0});
  CHECK(st.totals == std::array<int64_t, 4>{6, 5, 4, 3});
  CHECK(st.hyp_len == 6);
  CHECK(st.ref_len == 8);
  // test_case_offset: floor smoothing 0.1 with effective order gives 0.1555722182 (x100).
  CHECK(bleu_from_stats(st, {.smooth = BleuSmooth::kFloor, .effective_order = true}).score ==
        Approx(15.55722182).margin(1e-6));
  // Default exp smoothing, by hand: the 4-gram order is the first without matches, so its
  // precision is 100 / (2 * 3); BP = exp(1 - 8/6).
  // score = exp(-1/3) * (200/3 * 40 * 25 * 50/3)^(1/4) = 23.2634727
  BleuScore s = bleu_from_stats(st);
  CHECK(s.score == Approx(23.2634727).margin(1e-6));
  CHECK(s.str() ==
        "BLEU = 23.26 66.7/40.0/25.0/16.7 (BP = 0.717 ratio = 0.750 hyp_len = 6 ref_len = 8)");

  // test_case_scoring: matches [9, 7, 5, 3], totals [10, 8, 6, 4], lengths 11 and 11 ->
  // 0.8375922397 (their compute_bleu default 'none'; every order has matches so exp agrees).
  BleuStats given{.matches = {9, 7, 5, 3}, .totals = {10, 8, 6, 4}, .hyp_len = 11, .ref_len = 11};
  CHECK(bleu_from_stats(given).score == Approx(83.75922397).margin(1e-6));
  CHECK(bleu_from_stats(given, {.smooth = BleuSmooth::kNone}).score ==
        Approx(83.75922397).margin(1e-6));

  // test_case_degenerate_stats (floor smoothing with the given value) -> 0.0 each.
  struct Degenerate {
    BleuStats stats;
    double floor;
  };
  const Degenerate degenerate[] = {
      {{.matches = {0, 0, 0, 0}, .totals = {4, 4, 2, 1}, .hyp_len = 0, .ref_len = 1}, 0.0},
      {{.matches = {0, 0, 0, 0}, .totals = {10, 11, 12, 0}, .hyp_len = 14, .ref_len = 10}, 0.0},
      {{.matches = {0, 0, 0, 0}, .totals = {0, 0, 0, 0}, .hyp_len = 0, .ref_len = 0}, 0.0},
      {{.matches = {6, 5, 4, 0}, .totals = {6, 5, 4, 3}, .hyp_len = 6, .ref_len = 6}, 0.0},
      {{.matches = {0, 0, 0, 0}, .totals = {0, 0, 0, 0}, .hyp_len = 0, .ref_len = 0}, 0.1},
      {{.matches = {0, 0, 0, 0}, .totals = {0, 0, 0, 0}, .hyp_len = 1, .ref_len = 5}, 0.01},
  };
  for (const auto& d : degenerate)
    CHECK(bleu_from_stats(d.stats, {.smooth = BleuSmooth::kFloor, .smooth_value = d.floor}).score ==
          0.0);
}

TEST_CASE("hand-worked BLEU: perfect match, brevity penalty, short sentences", "[bleu]") {
  // Identical 6-token sentences: 6/6, 5/5, 4/4, 3/3 matches, BP 1 -> 100.
  CHECK(one_sentence("the cat sat on the mat", {"the cat sat on the mat"}).str() ==
        "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 "
        "ref_len = 6)");
  // A 4-token prefix of a 6-token reference: every n-gram matches (4/4 3/3 2/2 1/1) but
  // BP = exp(1 - 6/4) = 0.60653 -> 60.65.
  BleuScore bp = one_sentence("the cat sat on", {"the cat sat on the mat"});
  CHECK(bp.score == Approx(100 * std::exp(-0.5)).margin(1e-9));
  CHECK(bp.str() ==
        "BLEU = 60.65 100.0/100.0/100.0/100.0 (BP = 0.607 ratio = 0.667 hyp_len = 4 ref_len = 6)");
  // Three tokens have no 4-gram: total[4] = 0 stops the loop with precision 0, and without
  // effective order log(0) is floored, so the score is 0 although everything matches.
  CHECK(one_sentence("a b c", {"a b c"}).str() ==
        "BLEU = 0.00 100.0/100.0/100.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 3 ref_len = 3)");
  CHECK(one_sentence("a b c", {"a b c"}, {.effective_order = true}).score ==
        Approx(100).margin(1e-9));
  // No matching n-gram at all: 0 without smoothing, precisions 0, BP = 1 since 4 > 2.
  CHECK(one_sentence("this is a cat", {"okay thanks"}).str() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 2.000 hyp_len = 4 ref_len = 2)");
}

TEST_CASE("hand-worked BLEU: exp smoothing halves each further order without matches", "[bleu]") {
  // hyp "the cat the dog" vs ref "the cat a the dog":
  //   unigrams the(2, ref 2) cat dog: 4/4; bigrams "the cat" "the dog" of 3: 2/3;
  //   trigrams "the cat the" "cat the dog": 0/2; 4-gram: 0/1.
  // exp: p3 = 100 / (2 * 2) = 25, p4 = 100 / (4 * 1) = 25; BP = exp(1 - 5/4).
  // score = exp(-0.25) * (100 * 200/3 * 25 * 25)^(1/4) = 35.1862974
  BleuScore s = one_sentence("the cat the dog", {"the cat a the dog"});
  CHECK(s.score == Approx(35.1862974).margin(1e-6));
  CHECK(s.str() ==
        "BLEU = 35.19 100.0/66.7/25.0/25.0 (BP = 0.779 ratio = 0.800 hyp_len = 4 ref_len = 5)");
  // The same counts with smoothing 'none' leave p3 = 0, and the score is 0.
  CHECK(
      one_sentence("the cat the dog", {"the cat a the dog"}, {.smooth = BleuSmooth::kNone}).score ==
      0.0);
}

TEST_CASE("hand-worked BLEU: clipping, closest reference length, corpus sums", "[bleu]") {
  // Clipping at the largest count in any one reference: hyp "the the the the", refs "the cat"
  // and "the the dog". "the" 4 times, at most 2 in one ref: 2/4; "the the" 3 times, once in
  // ref 2: 1/3; trigrams 0/2, 4-gram 0/1 -> exp 25, 25. Closest length to 4 is 3 -> BP 1.
  // score = (50 * 100/3 * 25 * 25)^(1/4) = 31.9471552
  BleuScore clip = one_sentence("the the the the", {"the cat", "the the dog"});
  CHECK(clip.score == Approx(31.9471552).margin(1e-6));
  CHECK(clip.ref_len == 3);
  // Reference lengths 3 and 5 are equally close to 4; the shorter wins, so BP = 1 (not
  // exp(1 - 5/4)), whichever order the references come in. "a b c d" occurs in ref 2: 100.
  for (auto refs : {std::vector<std::string>{"a b c", "a b c d e"},
                    std::vector<std::string>{"a b c d e", "a b c"}}) {
    CHECK(one_sentence("a b c d", refs).str() ==
          "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.333 hyp_len = 4 "
          "ref_len = 3)");
  }
  // Corpus BLEU sums statistics, it does not average sentence scores (that would give 50):
  // line 1 matches 6/6 5/5 4/4 3/3, line 2 "a b c d" vs "w x y z" 0/4 0/3 0/2 0/1.
  // Sums 6/10 5/8 4/6 3/4, lengths 10 and 10 -> (60 * 62.5 * 200/3 * 75)^(1/4) = 65.8037006.
  std::vector<std::string> hyps = {"the cat sat on the mat", "a b c d"};
  std::vector<std::vector<std::string>> refs = {{"the cat sat on the mat", "w x y z"}};
  BleuStats sum = corpus_bleu_stats(hyps, refs);
  CHECK(sum.matches == std::array<int64_t, 4>{6, 5, 4, 3});
  CHECK(sum.totals == std::array<int64_t, 4>{10, 8, 6, 4});
  CHECK(corpus_bleu(hyps, refs).score == Approx(65.8037006).margin(1e-6));
  // Adding per-line statistics gives the same (how callers bucket BLEU by length).
  BleuStats added = segment_bleu_stats(hyps[0], {refs[0][0]});
  added += segment_bleu_stats(hyps[1], {refs[0][1]});
  CHECK(bleu_from_stats(added).score == Approx(65.8037006).margin(1e-6));
  // Stream length mismatch and missing references are errors.
  CHECK_THROWS_AS(corpus_bleu(hyps, {{"only one line"}}), ValueError);
  CHECK_THROWS_AS(corpus_bleu(hyps, {}), ValueError);
  CHECK_THROWS_AS(bleu_stats({"a"}, {}), ValueError);
}

TEST_CASE("hand-worked BLEU: --lowercase", "[bleu]") {
  // Case-sensitive: hyp The Cat sat on the MAT vs the cat sat on the mat: unigrams sat on the
  // 3/6; bigrams "sat on" "on the" 2/5; trigram "sat on the" 1/4; 4-grams 0/3 -> exp
  // 100/(2*3). score = (50 * 40 * 25 * 50/3)^(1/4) = 30.2137540. Lower-cased: identical, 100.
  CHECK(one_sentence("The Cat sat on the MAT", {"the cat sat on the mat"}).score ==
        Approx(30.2137540).margin(1e-6));
  CHECK(one_sentence("The Cat sat on the MAT", {"the cat sat on the mat"}, {.lowercase = true})
            .score == Approx(100).margin(1e-9));
  CHECK(one_sentence("ÜBER ÄPFEL", {"über äpfel"}, {.lowercase = true, .effective_order = true})
            .score == Approx(100).margin(1e-9));
  CHECK(bleu_signature({{"x"}}, {.lowercase = true, .smooth = BleuSmooth::kFloor}) ==
        "nrefs:1|case:lc|eff:no|tok:13a|smooth:floor[0.10]|version:tapestry");
}

TEST_CASE("tapestry bleu: scores fixture files like sacreBLEU", "[bleu]") {
  Run r = run_tapestry(
      fmt::format("'{}' '{}' '{}'", data("readme.hyp"), data("readme.ref1"), data("readme.ref2")));
  CHECK(r.status == 0);
  CHECK(r.output ==
        "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
        "signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:tapestry\n");
  // An empty line in a reference file: that line has one reference fewer (README's 29.44).
  r = run_tapestry(fmt::format("'{}' '{}' '{}'", data("readme.hyp"), data("readme_var.ref1"),
                               data("readme.ref2")));
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 "
                                "hyp_len = 17 ref_len = 19)"));
  CHECK_THAT(r.output, Contains("nrefs:var"));
  // test_sentence_bleu.py #98 through the command line: add-k 2 -> 21.389, tok none -> 7.347.
  r = run_tapestry(fmt::format("'{}' '{}' --effective-order -s add-k -sv 2 -b -w 3",
                               data("issue98.hyp"), data("issue98.ref")));
  CHECK(r.status == 0);
  CHECK(r.output == "21.389\n");
  r = run_tapestry(fmt::format("'{}' '{}' --effective-order --tokenize none --score-only -w 3",
                               data("issue98.hyp"), data("issue98.ref")));
  CHECK(r.output == "7.347\n");
  // The hand-worked --lowercase case below: 30.21 case-sensitive, 100 lower-cased.
  r = run_tapestry(fmt::format("'{}' '{}'", data("case.hyp"), data("case.ref")));
  CHECK_THAT(r.output, Contains("BLEU = 30.21 50.0/40.0/25.0/16.7 ") && Contains("case:mixed"));
  r = run_tapestry(fmt::format("'{}' '{}' -lc", data("case.hyp"), data("case.ref")));
  CHECK_THAT(r.output, Contains("BLEU = 100.00 ") && Contains("case:lc"));
  r = run_tapestry("--help");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("usage: tapestry bleu HYP REF"));
}

TEST_CASE("tapestry bleu: file errors exit 1 and name the file", "[bleu]") {
  Run r = run_tapestry(fmt::format("'{}' '{}'", data("no_such_file.txt"), data("readme.ref1")));
  CHECK(r.status == 1);
  CHECK_THAT(r.output,
             Contains(data("no_such_file.txt") + ": cannot open: No such file or directory"));
  r = run_tapestry(fmt::format("'{}' '{}'", data(""), data("readme.ref1")));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("a directory, not a regular file"));
  r = run_tapestry(fmt::format("'{}' '{}'", data("two_lines.hyp"), data("readme.ref1")));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains(fmt::format("'{}' has 2 lines but '{}' has 3",
                                            data("two_lines.hyp"), data("readme.ref1"))));
  r = run_tapestry(fmt::format("'{}' '{}'", data("empty.txt"), data("readme.ref1")));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains(fmt::format("'{}' is empty", data("empty.txt"))));
  r = run_tapestry(fmt::format("'{}' '{}'", data("three_lines.hyp"), data("blank_line.ref")));
  CHECK(r.status == 1);
  CHECK_THAT(r.output,
             Contains(data("blank_line.ref") + ":2: the reference line is empty; sacreBLEU"));
}

TEST_CASE("tapestry bleu: usage errors exit 2 and list the valid options", "[bleu]") {
  Run r = run_tapestry("");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("needs a hypothesis file and at least one reference file"));
  r = run_tapestry(fmt::format("'{}'", data("readme.hyp")));
  CHECK(r.status == 2);
  r = run_tapestry(fmt::format("'{}' '{}' --bogus", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("unknown option '--bogus' (valid: --lowercase, --tokenize"));
  r = run_tapestry(
      fmt::format("'{}' '{}' --tokenize intl", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("unknown tokenizer 'intl' (valid: 13a, none)"));
  r = run_tapestry(fmt::format("'{}' '{}' --tokenize", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--tokenize needs a value"));
  r = run_tapestry(fmt::format("'{}' '{}' -s zero", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("(valid: exp, floor, add-k, none)"));
  r = run_tapestry(fmt::format("'{}' '{}' -sv 0.5", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--smooth-value applies only to"));
  r = run_tapestry(
      fmt::format("'{}' '{}' -s floor -sv -1", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  r = run_tapestry(fmt::format("'{}' '{}' -w many", data("readme.hyp"), data("readme.ref1")));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--width 'many'"));
}
