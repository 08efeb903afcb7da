// Subword units: SentencePiece segmentations round-trip text exactly, train deterministically,
// sample reproducibly, live inside the checkpoint, and a subword model translates plain text.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/preprocess.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/subword.h"
#include "tapestry/models/text.h"
#include "tapestry/nn/checkpoint.h"
#include "tests/cli_run.h"

using namespace tapestry;
using namespace tapestry::models;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kMulti30k = fs::path(TAPESTRY_SOURCE_DIR) / ".." / "shared" / "data" / "multi30k";

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A small corpus of its own, so the tests below need no data files: German-like and
// English-like sentences with accents and capitals.
std::vector<std::string> small_corpus() {
  const char* subjects[] = {"Ein Mann", "Eine Frau", "Zwei Kinder", "Der Hund", "Die Ärztin"};
  const char* verbs[] = {"läuft", "springt", "schläft", "isst", "grüßt"};
  const char* places[] = {"im Park.", "über die Straße.", "am Strand.", "vor dem Café."};
  std::vector<std::string> out;
  for (const char* s : subjects)
    for (const char* v : verbs)
      for (const char* p : places) out.push_back(std::string(s) + " " + v + " " + p);
  return out;
}

bool has_unknown(const std::vector<std::string>& pieces) {
  for (const auto& p : pieces)
    if (p == "<unk>") return true;
  return false;
}

}  // namespace

TEST_CASE("subword: Multi30k's 1,000 test sentences survive segmenting and joining", "[subword]") {
  if (!fs::exists(kMulti30k / "train.de")) {
    WARN("skipped: " << kMulti30k.string() << " is not there (the ../shared data)");
    return;
  }
  for (const SubwordKind kind : {SubwordKind::bpe, SubwordKind::unigram})
    for (const char* lang : {"de", "en"}) {
      const auto train = lines_of(kMulti30k / (std::string("train.") + lang));
      const auto test = lines_of(kMulti30k / (std::string("test_2016_flickr.") + lang));
      REQUIRE(test.size() == 1000);
      const Subword sp = Subword::train(train, {kind, 8000});
      INFO(subword_kind_name(kind) << " " << lang);
      CHECK(sp.pieces().size() == 8000);
      int64_t pieces = 0, words = 0;
      for (const auto& line : test) {
        const auto p = sp.encode(line);
        REQUIRE(sp.decode(p) == line);  // cased, punctuation attached, non-ASCII kept
        REQUIRE_FALSE(has_unknown(p));
        pieces += static_cast<int64_t>(p.size());
        words += static_cast<int64_t>(split_whitespace(line).size());
      }
      // Subwords split rare words only: well under two pieces a word at 8,000 pieces.
      CHECK(pieces > words);
      CHECK(pieces < 2 * words);
    }
}

TEST_CASE("subword: characters training never saw are spelled in bytes, not <unk>", "[subword]") {
  const Subword sp = Subword::train(small_corpus(), {SubwordKind::bpe, 400});
  for (const std::string text : {"Ωμέγα läuft 😀 naïve — “quoted”", "Der Hund läuft im Park."}) {
    const auto pieces = sp.encode(text);
    CHECK_FALSE(has_unknown(pieces));
    CHECK(sp.decode(pieces) == text);
  }
  // The Greek letter is not in the training text: it becomes its two UTF-8 bytes.
  const auto pieces = sp.encode("Ω");
  CHECK(std::count(pieces.begin(), pieces.end(), "<0xCE>") == 1);
  CHECK(std::count(pieces.begin(), pieces.end(), "<0xA9>") == 1);
  // Runs of spaces are collapsed (SentencePiece's whitespace normalisation), nothing else changes.
  CHECK(sp.decode(sp.encode("  Der  Hund ")) == "Der Hund");
}

TEST_CASE("subword: the same text and options train the same segmentation", "[subword]") {
  for (const SubwordKind kind : {SubwordKind::bpe, SubwordKind::unigram}) {
    const Subword a = Subword::train(small_corpus(), {kind, 400});
    const Subword b = Subword::train(small_corpus(), {kind, 400});
    CHECK(a.proto() == b.proto());
    CHECK(a.kind() == kind);
    const auto p = a.pieces();
    REQUIRE(p.size() > 4);
    CHECK(std::vector<std::string>(p.begin(), p.begin() + 4) ==
          std::vector<std::string>{"<pad>", "<bos>", "<eos>", "<unk>"});
  }
}

TEST_CASE("subword: sampled segmentations are reproducible and join back to the text",
          "[subword]") {
  for (const SubwordKind kind : {SubwordKind::bpe, SubwordKind::unigram}) {
    INFO(subword_kind_name(kind));
    const Subword sp = Subword::train(small_corpus(), {kind, 400});
    const std::vector<std::string> text = small_corpus();
    const auto a = sample_segmentations(sp, text, 0.3, 7);
    const auto b = sample_segmentations(sp, text, 0.3, 7);
    const auto c = sample_segmentations(sp, text, 0.3, 8);
    CHECK(a == b);
    CHECK(a != c);
    int differ = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      REQUIRE(sp.decode(a[i]) == text[i]);
      differ += a[i] != sp.encode(text[i]);
    }
    // Sampling changes some segmentations, not the text.
    CHECK(differ > 0);
  }
}

TEST_CASE("subword: the preprocessing keeps its segmentations in the checkpoint's JSON",
          "[subword]") {
  Preprocess p;
  p.mode = Preprocess::Mode::subword;
  p.src_subword = std::make_shared<const Subword>(Subword::train(small_corpus(), {}));
  p.tgt_subword =
      std::make_shared<const Subword>(Subword::train(small_corpus(), {SubwordKind::bpe, 350}));
  const Preprocess q = Preprocess::from_json(p.to_json());
  CHECK(q.mode == Preprocess::Mode::subword);
  CHECK_FALSE(q.joint());
  CHECK(q.src_subword->proto() == p.src_subword->proto());
  CHECK(q.tgt_subword->proto() == p.tgt_subword->proto());
  const std::string line = "Die Ärztin grüßt im Park.";
  CHECK(q.tokenize_source(line) == p.tokenize_source(line));
  CHECK(q.detokenize_target(q.tokenize_target(line)) == line);
  // A piece's id is its vocabulary id.
  const Vocab v = q.source_vocab();
  const auto pieces = q.src_subword->pieces();
  REQUIRE(v.size() == static_cast<int64_t>(pieces.size()));
  for (size_t id = 0; id < pieces.size(); ++id)
    CHECK(v.token(static_cast<int32_t>(id)) == pieces[id]);

  p.tgt_subword = p.src_subword;  // joint: stored once
  const Preprocess j = Preprocess::from_json(p.to_json());
  CHECK(j.joint());
  CHECK(p.to_json().size() < 2 * q.to_json().size() / 3 + 1000);

  // A damaged model is refused with the key named.
  std::string bad = p.to_json();
  bad.replace(bad.find("\"source\":\"") + 10, 4, "!!!!");
  CHECK_THROWS_WITH(Preprocess::from_json(bad), Contains("preprocess: base64"));
}

TEST_CASE("subword: base64 round-trips every byte and refuses what is not base64", "[subword]") {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (size_t n = 0; n <= 6; ++n)
    CHECK(base64_decode(base64_encode(all.substr(0, n))) == all.substr(0, n));
  CHECK(base64_decode(base64_encode(all)) == all);
  CHECK(base64_encode("Man") == "TWFu");  // RFC 4648's examples
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("f") == "Zg==");
  CHECK_THROWS_AS(base64_decode("abc"), ValueError);
  CHECK_THROWS_AS(base64_decode("ab!d"), ValueError);
  CHECK_THROWS_AS(base64_decode("a=bc"), ValueError);
  CHECK_THROWS_AS(base64_decode("Zg==Zg=="), ValueError);
}

TEST_CASE("subword: a model is one file that translates plain text", "[subword]") {
  testing::TempDir dir("subword");
  const auto text = small_corpus();
  // A toy translation: the same sentence with its words in reverse, cased.
  std::ofstream de(dir / "train.de"), en(dir / "train.en");
  for (const auto& line : text) {
    auto words = split_whitespace(line);
    std::reverse(words.begin(), words.end());
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
    de << line << "\n";
    en << out << "\n";
  }
  de.close();
  en.close();
  const std::string prefix = dir / "train";
  auto r = testing::run_tapestry(
      "train --train-prefix " + prefix + " --valid-prefix " + prefix + " --test-prefix " + prefix +
      " --src de --tgt en --subword unigram --vocab-size 400 --joint-vocab --subword-sample 0.1 "
      "--epochs 2 --emb 16 --hidden 16 --test-beam 1 --out " +
      (dir / "run"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("SentencePiece unigram"));
  // The test split is written back as the plain text it was read from.
  std::ifstream ref(dir / "run/test.ref"), src(dir / "run/test.src");
  std::string first_ref, first_src;
  std::getline(ref, first_ref);
  std::getline(src, first_src);
  CHECK(first_src == text[0]);
  fs::copy_file(dir / "run/model.safetensors", dir / "alone.safetensors");
  fs::remove_all(dir / "run");
  r = testing::run_tapestry("translate --model " + (dir / "alone.safetensors") + " < " +
                            (dir / "train.de") + " > " + (dir / "out.txt"));
  REQUIRE(r.status == 0);
  std::ifstream out(dir / "out.txt");
  int lines = 0;
  for (std::string line; std::getline(out, line); ++lines) {
    CHECK(line.find("\xE2\x96\x81") == std::string::npos);  // no "▁": pieces were joined
    CHECK(line.find("<unk>") == std::string::npos);
  }
  CHECK(lines == static_cast<int>(text.size()));

  // --merge-pieces: the attention over words, each row still summing to 1.
  r = testing::run_tapestry("translate --model " + (dir / "alone.safetensors") + " --input " +
                            (dir / "train.de") + " --merge-pieces --attention " +
                            (dir / "att.json") + " > /dev/null");
  REQUIRE(r.status == 0);
  std::ifstream att_file(dir / "att.json");
  const auto att = nlohmann::json::parse(att_file);
  REQUIRE(att.size() == text.size());
  CHECK(att[0]["source"].size() == split_whitespace(text[0]).size());
  for (const auto& row : att[0]["weights"]) {
    CHECK(row.size() == att[0]["source"].size());
    double sum = 0;
    for (const auto& w : row) sum += w.get<double>();
    CHECK(sum == Approx(1).epsilon(1e-5));
  }
}

TEST_CASE("subword: --merge-pieces is refused for a word-level model", "[subword]") {
  testing::TempDir dir("subword");
  Vocab src, tgt;
  src.add("the");
  tgt.add("le");
  Seq2SeqConfig c;
  c.src_vocab = src.size();
  c.tgt_vocab = tgt.size();
  c.emb = 4;
  c.hidden = 4;
  Seq2Seq model(c);
  save_model(dir / "m.safetensors", model, src, tgt, Preprocess{});
  const auto r = testing::run_tapestry("translate --model " + (dir / "m.safetensors") +
                                       " --merge-pieces < /dev/null");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--merge-pieces: '" + (dir / "m.safetensors") + "' is a words"));
}

TEST_CASE("subword: flags that do not go together are refused before any work", "[subword]") {
  auto r = testing::run_tapestry("train --task copy --vocab-size 4000");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("--vocab-size applies to --subword models"));
  r = testing::run_tapestry("train --task copy --subword bpe");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("--subword applies to --data and --train-prefix corpora"));
  r = testing::run_tapestry(
      "train --train-prefix a --valid-prefix a --test-prefix a --src x --tgt y --subword bpe "
      "--min-freq 2");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("--min-freq applies to word-level models"));
  r = testing::run_tapestry("train --task copy --subword sentencepiece");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("--subword"));
}

TEST_CASE("subword: pieces merge into words for display, attention with them", "[subword]") {
  using Spans = std::vector<std::pair<size_t, size_t>>;
  CHECK(piece_words({"\u2581Ein", "\u2581Mann", "es", "\u2581l\u00e4uft", "."}) ==
        Spans{{0, 1}, {1, 3}, {3, 5}});
  // Bytes join the word they spell; <eos> is a word of its own; a first piece starts a word.
  CHECK(piece_words({"\u2581A", "<0xCE>", "<0xA9>", "<eos>"}) == Spans{{0, 3}, {3, 4}});
  CHECK(piece_words({"es", "\u2581x"}) == Spans{{0, 1}, {1, 2}});
  CHECK(piece_words({}).empty());

  // Two target pieces of one word, over source words {x y} and {z}: columns summed, rows
  // averaged, so every merged row still sums to 1.
  const std::vector<float> w = {0.1f, 0.2f, 0.7f, 0.3f, 0.3f, 0.4f};
  const auto merged = merge_piece_attention(w, {{0, 2}}, {{0, 2}, {2, 3}});
  REQUIRE(merged.size() == 2);
  CHECK(merged[0] == Approx(0.45).epsilon(1e-6));
  CHECK(merged[1] == Approx(0.55).epsilon(1e-6));
  CHECK(merge_piece_attention(w, {{0, 1}, {1, 2}}, {{0, 1}, {1, 2}, {2, 3}}) == w);
  CHECK_THROWS_AS(merge_piece_attention(w, {{0, 1}}, {{0, 3}}), ValueError);
}

TEST_CASE("subword: a resumed run keeps its segmentation and samples as the straight one",
          "[subword]") {
  testing::TempDir dir("subword");
  std::ofstream de(dir / "c.de"), en(dir / "c.en");
  for (const auto& line : small_corpus()) {
    de << line << "\n";
    en << to_lower(line) << "\n";
  }
  de.close();
  en.close();
  const std::string flags =
      "--train-prefix " + (dir / "c") + " --valid-prefix " + (dir / "c") + " --test-prefix " +
      (dir / "c") +
      " --src de --tgt en --subword bpe --vocab-size 350 --subword-sample 0.2 --emb 8 "
      "--hidden 8 --threads 1 --test-beam 1 --quiet";
  auto r = testing::run_tapestry("train " + flags + " --epochs 3 --out " + (dir / "straight"));
  REQUIRE(r.status == 0);
  r = testing::run_tapestry("train " + flags + " --epochs 2 --out " + (dir / "resumed"));
  REQUIRE(r.status == 0);
  r = testing::run_tapestry("train --resume " + (dir / "resumed") + " --epochs 3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // The parameters and the optimizer's state, bit for bit (the metadata holds wall times).
  const auto values = [](const std::string& path) {
    std::vector<std::pair<std::string, std::vector<double>>> out;
    for (const auto& [name, t] : nn::load_safetensors(path).tensors) {
      std::vector<double> v(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i)
        v[static_cast<size_t>(i)] =
            t.dtype() == DType::f32 ? t.data<float>()[i] : t.data<double>()[i];
      out.emplace_back(name, std::move(v));
    }
    return out;
  };
  const auto a = values(dir / "straight/last.safetensors");
  REQUIRE(a.size() > 4);
  CHECK(a == values(dir / "resumed/last.safetensors"));
  CHECK(nn::read_checkpoint_metadata(dir / "straight/model.safetensors").at("preprocess") ==
        nn::read_checkpoint_metadata(dir / "resumed/model.safetensors").at("preprocess"));
}
