// Text handling and corpus files: UTF-8, case, accents, tokens, the tutorial's normalisation, and
// every malformed-file error naming its file and line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "tapestry/models/corpus.h"
#include "tapestry/models/tasks.h"
#include "tapestry/models/text.h"

using namespace tapestry;
using namespace tapestry::models;
using Catch::Contains;

namespace {

// A file in a fresh temporary directory holding `text` (removed with the object).
struct TempFile {
  std::filesystem::path dir, path;
  TempFile(const std::string& name, const std::string& text) {
    static int counter = 0;
    dir = std::filesystem::temp_directory_path() /
          ("tapestry_text_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    path = dir / name;
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove_all(dir); }
  std::string str() const { return path.string(); }
};

}  // namespace

TEST_CASE("UTF-8 is checked, decoded and encoded", "[text]") {
  REQUIRE(!invalid_utf8_at("zwei Männer, ça été").has_value());
  REQUIRE(invalid_utf8_at("ab\xC3") == 2u);         // truncated sequence
  REQUIRE(invalid_utf8_at("a\xC0\xAF") == 1u);      // overlong '/'
  REQUIRE(invalid_utf8_at("a\xED\xA0\x80") == 1u);  // a surrogate
  REQUIRE(invalid_utf8_at("\xFF") == 0u);
  auto cps = utf8_decode("é€𝄞");
  REQUIRE(cps == std::vector<char32_t>{0xE9, 0x20AC, 0x1D11E});
  REQUIRE(utf8_encode(cps) == "é€𝄞");
  REQUIRE_THROWS_AS(utf8_decode("\xC3"), ValueError);
}

TEST_CASE("lower case and accent folding for the Latin scripts", "[text]") {
  REQUIRE(to_lower("Über DAS Café ÇA ÉTÉ") == "über das café ça été");
  REQUIRE(to_lower("ŁÓDŹ Œuvre ŸES ΑΒΓ МОСКВА") == "łódź œuvre ÿes αβγ москва");
  REQUIRE(to_lower("x × y") == "x × y");  // U+00D7 is not a letter
  REQUIRE(fold_accents("Café à l'été, Ürün, Łódź, ß, œ") == "Cafe a l'ete, Urun, Łodz, ß, œ");
}

TEST_CASE("tokenize splits on spaces, optionally lower-cases and splits punctuation", "[text]") {
  TextOptions plain;
  REQUIRE(tokenize("  Ein Mann,  der läuft. ", plain) ==
          std::vector<std::string>{"Ein", "Mann,", "der", "läuft."});
  TextOptions both{true, true};
  REQUIRE(tokenize("Ein Mann, der «läuft»... (schnell)!", both) ==
          std::vector<std::string>{"ein", "mann", ",", "der", "«", "läuft", "»", ".", ".", ".", "(",
                                   "schnell", ")", "!"});
  REQUIRE(tokenize("L'homme porte un t-shirt.", both) ==
          std::vector<std::string>{"l'homme", "porte", "un", "t-shirt", "."});
}

TEST_CASE("detokenize undoes split punctuation for text as it is usually spaced", "[text]") {
  const TextOptions split{false, true};
  // Round trips: each line is spaced as English, German and French-with-guillemets text is.
  for (const std::string line :
       {"A man in an orange hat, staring at something.", "Is it (really) a [big] {deal}?!",
        "He said \"no\" and left...", "Sie sagt: „Guten Tag“ und geht.", "He read “Ulysses” twice.",
        "Il dit «non»; ¿Qué? ¡Sí!", "It costs 3.50 or 1,000.",
        "A sign that says E.S.E. Electronics.", "a – b — c…", "Q: \"A\" (\"B\")."})
    CHECK(detokenize(tokenize(line, split), split) == line);
  // A spaced-out number is joined: its tokens cannot tell it from "2.5".
  CHECK(detokenize(tokenize("not 2 . 5", split), split) == "not 2.5");
  using Tokens = std::vector<std::string>;
  // Marks at the edges, repeated quotes, and a „ left open: nothing is dropped or doubled.
  CHECK(detokenize(Tokens{".", "a", "("}, split) == ". a (");
  CHECK(detokenize(Tokens{"\"", "\"", "\"", "x"}, split) == "\"\" \"x");
  CHECK(detokenize(Tokens{"„", "a", "b"}, split) == "„a b");
  CHECK(detokenize(Tokens{"“", "a", "”"}, split) == "“a”");
  CHECK(detokenize(Tokens{}, split).empty());
  // Initials need a letter on both sides of each full stop: "I . A" is a sentence and a word.
  CHECK(detokenize(Tokens{"so", "I", ".", "A", "dog"}, split) == "so I. A dog");
  // Without split punctuation the tokens were whitespace words: spaces join them, marks and all.
  CHECK(detokenize(Tokens{"Mann,", "der", ".", "("}, {}) == "Mann, der . (");
  // Lower-casing is not undone.
  CHECK(detokenize(tokenize("Ein Mann.", {true, true}), {true, true}) == "ein mann.");
}

TEST_CASE("detokenize: Multi30k's test sentences come back as they were", "[text]") {
  const std::filesystem::path dir =
      std::filesystem::path(TAPESTRY_SOURCE_DIR) / ".." / "shared" / "data" / "multi30k";
  if (!std::filesystem::exists(dir / "test_2016_flickr.en")) {
    WARN("skipped: " << dir.string() << " is not there (the ../shared data)");
    return;
  }
  const TextOptions split{false, true};
  // Usual spacing: no space before a closing mark nor after an opening one.
  auto usually_spaced = [](const std::string& line) {
    for (const char* odd : {" .", " ,", " ;", " :", " !", " ?", " )", "( ", " ”", "„ ", "“ "})
      if (line.find(odd) != std::string::npos) return false;
    return true;
  };
  for (const char* lang : {"en", "de", "fr"}) {
    std::ifstream in(dir / (std::string("test_2016_flickr.") + lang));
    int lines = 0, usual = 0;
    for (std::string line; std::getline(in, line); ++lines) {
      if (!usually_spaced(line)) continue;
      ++usual;
      INFO(lang << " line " << lines + 1);
      // Runs of spaces collapse, as tokenizing does.
      CHECK(detokenize(tokenize(line, split), split) == join(tokenize(line, {})));
    }
    CHECK(lines == 1000);
    CHECK(usual >= 990);  // the rule covers nearly all of them, or the test would prove little
  }
}

TEST_CASE("the tutorial's normalisation and filter, worked by hand from its regexes", "[text]") {
  // lower, strip, drop accents, " ." before . ! ?, runs of other characters -> one space.
  REQUIRE(tutorial_normalize("Je suis très content!") == "je suis tres content !");
  REQUIRE(tutorial_normalize("J'ai 19 ans.") == "j ai ans .");
  REQUIRE(tutorial_normalize("  Qu'est-ce que c'est ?  ") == "qu est ce que c est ?");
  REQUIRE(tutorial_normalize("Wait...") == "wait . . .");
  REQUIRE(tutorial_normalize("\"Cœur\"") == " c ur ");  // œ has no decomposition: dropped
  REQUIRE(tutorial_keep("i am cold .", "j ai froid ."));
  REQUIRE(tutorial_keep("they re here .", "ils sont la ."));
  REQUIRE_FALSE(tutorial_keep("it is cold .", "il fait froid ."));
  // 10 words is too many ("< MAX_LENGTH" with MAX_LENGTH = 10).
  REQUIRE(tutorial_keep("i am a b c d e f g", "x"));
  REQUIRE_FALSE(tutorial_keep("i am a b c d e f g h", "x"));
}

TEST_CASE("a TSV corpus reads 2 or 3 columns, tokenised, with the length filter", "[text]") {
  TempFile f("pairs.txt",
             "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
             "I am cold.\tJ'ai froid.\n"
             "This sentence is far too long to keep.\tElle est trop longue.\n");
  CorpusOptions o;
  o.text = {true, true};
  o.max_len = 6;
  Corpus c = read_tsv(f.str(), o);
  REQUIRE(c.lines == 3);
  REQUIRE(c.dropped == 1);
  REQUIRE(c.pairs.size() == 2);
  REQUIRE(c.pairs[0].src == std::vector<std::string>{"go", "."});
  REQUIRE(c.pairs[1].tgt == std::vector<std::string>{"j'ai", "froid", "."});
  o.reverse = true;
  REQUIRE(read_tsv(f.str(), o).pairs[0].src == std::vector<std::string>{"va", "!"});
}

TEST_CASE("malformed corpus files are refused, naming the file and the line", "[text]") {
  CorpusOptions o;
  {
    TempFile f("bad.txt", "a\tb\nonly one column\nc\td\n");
    REQUIRE_THROWS_WITH(
        read_tsv(f.str(), o),
        Contains(f.str() + ":2: expected 2 or 3 tab-separated columns") && Contains("found 1"));
  }
  {
    TempFile f("bad.txt", "a\tb\tc\td\n");
    REQUIRE_THROWS_WITH(read_tsv(f.str(), o), Contains(":1:") && Contains("found 4"));
  }
  {
    TempFile f("bad.txt", "a\tb\n\t x\n");
    REQUIRE_THROWS_WITH(read_tsv(f.str(), o), Contains(":2: column 1 (source) is empty"));
  }
  {
    TempFile f("bad.txt", "a\tb\nc\td\xC3\n");
    REQUIRE_THROWS_WITH(read_tsv(f.str(), o), Contains(":2: invalid UTF-8 at byte 4"));
  }
  {
    TempFile f("empty.txt", "");
    REQUIRE_THROWS_WITH(read_tsv(f.str(), o), Contains("no sentence pairs (empty file)"));
  }
  {
    TempFile f("long.txt", "a b c\td e f\n");
    CorpusOptions shortest;
    shortest.max_len = 2;
    REQUIRE_THROWS_WITH(read_tsv(f.str(), shortest),
                        Contains("all 1 pairs were removed by the filters"));
  }
  REQUIRE_THROWS_WITH(read_tsv("/nonexistent/pairs.txt", o),
                      Contains("/nonexistent/pairs.txt: cannot open: No such file or directory"));
  REQUIRE_THROWS_AS(read_tsv("/nonexistent/pairs.txt", o), DataError);
}

TEST_CASE("parallel files must align line by line", "[text]") {
  CorpusOptions o;
  TempFile src("train.de", "ein hund\nzwei katzen\ndrei\n");
  TempFile tgt("train.en", "a dog\ntwo cats\n");
  REQUIRE_THROWS_WITH(read_parallel(src.str(), tgt.str(), o),
                      Contains(src.str() + " has 3 lines but " + tgt.str() + " has 2"));
  TempFile tgt3("train.en", "a dog\n\nthree\n");
  REQUIRE_THROWS_WITH(read_parallel(src.str(), tgt3.str(), o),
                      Contains(tgt3.str() + ":2: empty line"));
  TempFile ok("train.en", "a dog\ntwo cats\nthree\n");
  Corpus c = read_parallel(src.str(), ok.str(), o);
  REQUIRE(c.pairs.size() == 3);
  REQUIRE(c.pairs[1].src == std::vector<std::string>{"zwei", "katzen"});
}

TEST_CASE("split_corpus shuffles by seed into disjoint parts of the asked sizes", "[text]") {
  std::vector<Example> pairs;
  for (int i = 0; i < 100; ++i) pairs.push_back({{std::to_string(i)}, {"x"}, {}});
  Splits a = split_corpus(pairs, 0.05, 0.05, 7), b = split_corpus(pairs, 0.05, 0.05, 7);
  REQUIRE(a.train.size() == 90);
  REQUIRE(a.valid.size() == 5);
  REQUIRE(a.test.size() == 5);
  REQUIRE(a.test[0].src == b.test[0].src);
  std::set<std::string> seen;
  for (auto* part : {&a.train, &a.valid, &a.test})
    for (auto& e : *part) REQUIRE(seen.insert(e.src[0]).second);
  REQUIRE(seen.size() == 100);
  REQUIRE_THROWS_AS(split_corpus(pairs, 0.6, 0.6, 1), ValueError);
}
