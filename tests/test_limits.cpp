// Limits: sizes that cannot fit are refused before anything is allocated (train and bench flags,
// checkpoints, decoding), over-long inputs are bounded, and a checkpoint's config is checked key
// by key and against its tensors before a model is built from it.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/limits.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/nn/checkpoint.h"
#include "tools/cli.h"
#include "tools/train_setup.h"

using namespace tapestry;
using namespace tapestry::models;
using namespace tapestry::testing;
using Catch::Contains;
using Json = nlohmann::ordered_json;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Vocabularies of 4 specials and 3 words, the smallest the config allows plus two.
Vocab tiny_vocab() {
  VocabBuilder b;
  const std::vector<std::string> words = {"a", "b", "c"};
  b.count(words);
  return b.build();
}

Seq2SeqConfig tiny_config() {
  Seq2SeqConfig c;
  c.src_vocab = c.tgt_vocab = tiny_vocab().size();
  c.emb = 4;
  c.hidden = 6;
  return c;
}

// A small model saved as `train` saves one.
std::string save_tiny(const TempDir& dir, const std::string& name,
                      const Seq2SeqConfig& config = tiny_config(), DType dtype = DType::f32) {
  Seq2Seq model(config, dtype);
  const std::string path = dir / name;
  save_model(path, model, tiny_vocab(), tiny_vocab(), Preprocess{});
  return path;
}

// A safetensors file as its header and the data after it.
struct Parts {
  Json header;
  std::string data;
};
Parts split(const std::string& path) {
  const std::string bytes = read(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return {Json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}
void join(const std::string& path, const Json& header, const std::string& data) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  write(path, bytes + text + data);
}

// Rewrites the config in a checkpoint's metadata (a JSON string inside the header's JSON).
void edit_config(const std::string& path, const std::function<void(Json&)>& edit) {
  Parts p = split(path);
  Json config = Json::parse(p.header["__metadata__"]["config"].get<std::string>());
  edit(config);
  p.header["__metadata__"]["config"] = config.dump();
  join(path, p.header, p.data);
}

// load_model's message, or "" when it loads.
std::string load_error(const std::string& path) {
  try {
    (void)load_model(path);
  } catch (const nn::CheckpointError& e) {
    return e.what();
  }
  return "";
}

// A config as JSON with one key changed (set to `value`, or removed when null).
std::string config_with(const char* key, const Json& value) {
  Json j = Json::parse(tiny_config().to_json());
  if (value.is_null())
    j.erase(key);
  else
    j[key] = value;
  return j.dump();
}

std::string from_json_error(const std::string& json) {
  try {
    (void)Seq2SeqConfig::from_json(json);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Fault class 4: a checkpoint's config is checked before it is trusted.

TEST_CASE("limits: config keys of the wrong JSON type are refused by name", "[limits]") {
  const struct {
    const char* key;
    Json value;
    const char* says;
  } cases[] = {
      {"hidden", "abc", "config.hidden: \"abc\" is not an integer"},
      {"emb", 4.5, "config.emb: 4.5 is not an integer"},
      {"layers", 1.0, "config.layers: 1.0 is not an integer"},
      {"src_vocab", Json::array({7}), "config.src_vocab: [7] is not an integer"},
      {"bidirectional", 1, "config.bidirectional: 1 is not true or false"},
      {"deep_output", "true", "config.deep_output: \"true\" is not true or false"},
      {"cell", 3, "config.cell: 3 is not a string"},
      {"dropout", "0", "config.dropout: \"0\" is not a number"},
      {"seed", -1, "config.seed: -1 is out of range [0, 18446744073709551615]"},
      {"window", nullptr, "config has no \"window\""},
  };
  for (const auto& c : cases) {
    INFO(c.key);
    CHECK_THAT(from_json_error(config_with(c.key, c.value)), Contains(c.says));
  }
  // The same through a checkpoint, named with its file.
  TempDir dir("limits_types");
  const std::string path = save_tiny(dir, "m.safetensors");
  edit_config(path, [](Json& j) { j["hidden"] = "abc"; });
  CHECK_THAT(
      load_error(path),
      Contains(fmt::format("checkpoint '{}': config.hidden: \"abc\" is not an integer", path)));
}

TEST_CASE("limits: config values out of range are refused by name", "[limits]") {
  const struct {
    const char* key;
    Json value;
    const char* says;
  } cases[] = {
      {"layers", 4294967297u, "config.layers: 4294967297 is out of range [1, 8]"},
      {"layers", 0, "config.layers: 0 is out of range [1, 8]"},
      {"hidden", 1000000000, "config.hidden: 1000000000 is out of range [1, 65536]"},
      {"hidden", -6, "config.hidden: -6 is out of range [1, 65536]"},
      {"emb", 18446744073709551615u, "config.emb: 18446744073709551615 is out of range [1, 65536]"},
      {"src_vocab", 4, "config.src_vocab: 4 is out of range [5, 2147483647]"},
      {"tgt_vocab", 4294967296u, "config.tgt_vocab: 4294967296 is out of range [5, 2147483647]"},
      {"attn_size", -1, "config.attn_size: -1 is out of range [0, 65536]"},
      {"window", 1000001, "config.window: 1000001 is out of range [1, 1000]"},
      {"dropout", 1, "config.dropout: 1 is out of range [0, 1)"},
      {"cell", "transformer", "config.cell: unknown cell 'transformer'"},
      {"attention", "", "config.attention: unknown attention"},
  };
  for (const auto& c : cases) {
    INFO(c.key << " " << c.value.dump());
    CHECK_THAT(from_json_error(config_with(c.key, c.value)), Contains(c.says));
  }
  // Within range but 4.0 is refused too: the writer never writes a float for an integer.
  CHECK_THAT(from_json_error(config_with("window", 2.0)),
             Contains("config.window: 2.0 is not an integer"));
  // What to_json writes reads back the same.
  const Seq2SeqConfig c = tiny_config();
  CHECK(Seq2SeqConfig::from_json(c.to_json()).to_json() == c.to_json());
}

TEST_CASE("limits: a checkpoint whose config says hidden 10^9 is refused from its header",
          "[limits]") {
  // Were the model built from this config first, it would ask for ~10^18 bytes (bad_alloc at
  // best); the refusal comes from the config's range, read from the header alone.
  TempDir dir("limits_huge_config");
  const std::string path = save_tiny(dir, "m.safetensors");
  edit_config(path, [](Json& j) { j["hidden"] = 1000000000; });
  CHECK_THAT(load_error(path), Contains("config.hidden: 1000000000 is out of range [1, 65536]"));
  edit_config(path, [](Json& j) {
    j["hidden"] = 6;
    j["layers"] = 4294967297u;
  });
  CHECK_THAT(load_error(path), Contains("config.layers: 4294967297 is out of range [1, 8]"));
}

TEST_CASE("limits: a config in range that disagrees with the tensors names every tensor",
          "[limits]") {
  TempDir dir("limits_mismatch");
  const std::string path = save_tiny(dir, "m.safetensors");
  SECTION("a larger hidden size, whose model would take 1.4 TB to build") {
    // The config's model (hidden 65536, 8 layers) would need far more than any test machine has:
    // had it been built before the tensors were compared, this test would die of bad_alloc.
    edit_config(path, [](Json& j) {
      j["hidden"] = 65536;
      j["layers"] = 8;
    });
    const std::string e = load_error(path);
    CHECK_THAT(e, Contains("does not match its tensors"));
    CHECK_THAT(e, Contains("tensor 'encoder.rnn.weight_hh_l0' is (18,6) in the file but the "
                           "config makes it (196608,65536)"));
    CHECK_THAT(e, Contains("tensor 'encoder.rnn.weight_ih_l1' (196608,131072) is missing"));
    CHECK_THAT(e, Contains(" more"));  // more than the 10 listed
  }
  SECTION("another attention") {
    edit_config(path, [](Json& j) { j["attention"] = "general"; });
    const std::string e = load_error(path);
    // Bahdanau's W (A,H), b, U and v against general's W (H,K).
    CHECK_THAT(e, Contains("(4 problems)"));
    CHECK_THAT(e, Contains("tensor 'decoder.attention.U' (6,12) is not part of a model with this "
                           "config"));
    CHECK_THAT(e, Contains("tensor 'decoder.attention.W' is (6,6) in the file but the config "
                           "makes it (6,12)"));
  }
  SECTION("another cell") {
    edit_config(path, [](Json& j) { j["cell"] = "lstm"; });
    CHECK_THAT(load_error(path), Contains("tensor 'encoder.rnn.weight_ih_l0' is (18,4) in the "
                                          "file but the config makes it (24,4)"));
  }
  SECTION("a unidirectional encoder") {
    edit_config(path, [](Json& j) { j["bidirectional"] = false; });
    CHECK_THAT(load_error(path), Contains("tensor 'encoder.rnn.weight_ih_l0_reverse' (18,4) is "
                                          "not part of a model with this config"));
  }
  SECTION("float64 tensors where the model is float32") {
    const std::string f64 = save_tiny(dir, "f64.safetensors", tiny_config(), DType::f64);
    CHECK_THAT(load_error(f64),
               Contains("tensor 'encoder.embedding.weight' is F64 in the file, not F32"));
  }
}

TEST_CASE("limits: parameter_shapes is exactly what every kind of model registers", "[limits]") {
  // The shapes checked before building must be the built model's, for every variant.
  int checked = 0;
  for (nn::CellKind cell : {nn::CellKind::rnn, nn::CellKind::gru, nn::CellKind::lstm})
    for (nn::AttentionKind attention : nn::all_attention_kinds())
      for (DecoderKind decoder : {DecoderKind::bahdanau, DecoderKind::luong})
        for (bool bidirectional : {false, true})
          for (int layers : {1, 2})
            for (bool deep_output : {false, true})
              for (int64_t attn_size : {0, 5}) {
                Seq2SeqConfig c = tiny_config();
                c.cell = cell, c.attention = attention, c.decoder = decoder;
                c.bidirectional = bidirectional, c.layers = layers, c.deep_output = deep_output;
                c.attn_size = attn_size;
                try {
                  c.validate();
                } catch (const ValueError&) {
                  continue;  // e.g. dot attention over a bidirectional encoder
                }
                INFO(c.summary() << " attn_size " << attn_size << " deep " << deep_output);
                Seq2Seq model(c);
                std::vector<std::pair<std::string, Shape>> built;
                for (auto& [name, p] : model.named_parameters())
                  built.emplace_back(name, p->shape());
                REQUIRE(c.parameter_shapes() == built);
                CHECK(c.parameter_count() == model.num_parameters());
                ++checked;
              }
  CHECK(checked > 300);
}

TEST_CASE("limits: a checkpoint whose tensors agree with a huge config is refused for memory",
          "[limits]") {
  // A sparse file with a consistent header for hidden 65536: every check of the format and of
  // the tensors against the config passes, and only the memory estimate stands between it and
  // an allocation of ~350 GB (twice, counting the copy read from the file).
  TempDir dir("limits_sparse");
  const std::string path = save_tiny(dir, "m.safetensors");
  Parts p = split(path);
  Seq2SeqConfig big = tiny_config();
  big.hidden = 65536;
  Json header = Json::object();
  header["__metadata__"] = p.header["__metadata__"];
  header["__metadata__"]["config"] = big.to_json();
  uint64_t offset = 0;
  for (const auto& [name, shape] : big.parameter_shapes()) {
    const uint64_t bytes = static_cast<uint64_t>(shape.numel()) * 4;
    header[name] = {{"dtype", "F32"},
                    {"shape", std::vector<int64_t>(shape.dims().begin(), shape.dims().end())},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  join(path, header, "");
  const auto header_bytes = static_cast<off_t>(read(path).size());
  REQUIRE(::truncate(path.c_str(), header_bytes + static_cast<off_t>(offset)) == 0);
  REQUIRE(static_cast<double>(physical_memory_bytes()) < 2.0 * static_cast<double>(offset));
  const std::string e = load_error(path);
  CHECK_THAT(e, Contains(fmt::format("checkpoint '{}': the model would need", path)));
  CHECK_THAT(e, Contains(fmt::format("{} parameters, read from the file and copied into the model",
                                     big.parameter_count())));
  CHECK_THAT(e, Contains("more than this machine's"));
}

TEST_CASE("limits: NaN and infinite weights are refused by name", "[limits]") {
  TempDir dir("limits_nan");
  const std::string path = save_tiny(dir, "m.safetensors");
  Parts p = split(path);
  auto poke = [&](const char* name, size_t index, float value) {
    const uint64_t begin = p.header[name]["data_offsets"][0].get<uint64_t>();
    std::memcpy(p.data.data() + begin + index * sizeof(float), &value, sizeof(float));
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  SECTION("NaN") {
    poke("decoder.out.weight", 0, nan), poke("decoder.out.weight", 5, nan);
    poke("decoder.out.weight", 9, nan);
    join(path, p.header, p.data);
    const std::string e = load_error(path);
    CHECK_THAT(e, Contains("decoder.out.weight holds 3 NaN values"));
    CHECK_THAT(e, !Contains("encoder"));
  }
  SECTION("infinities, and both in one tensor") {
    poke("encoder.embedding.weight", 2, -inf);
    poke("decoder.bridge.bias", 0, nan), poke("decoder.bridge.bias", 1, inf);
    join(path, p.header, p.data);
    const std::string e = load_error(path);
    CHECK_THAT(e, Contains("encoder.embedding.weight holds 1 infinite value"));
    CHECK_THAT(e, Contains("decoder.bridge.bias holds 1 NaN value and 1 infinite value"));
  }
  SECTION("finite weights load") {
    join(path, p.header, p.data);
    CHECK(load_error(path).empty());
  }
}

TEST_CASE("limits: translate names the config key of a bad checkpoint in one line", "[limits]") {
  TempDir dir("limits_cli_config");
  const std::string path = save_tiny(dir, "m.safetensors");
  edit_config(path, [](Json& j) { j["layers"] = 4294967297u; });
  write(dir / "in.txt", "a b c\n");
  const CommandResult r = run_tapestry("translate --model m.safetensors --input in.txt", dir.str());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("tapestry translate: "));
  CHECK_THAT(r.output, Contains("config.layers: 4294967297 is out of range [1, 8]"));
  CHECK(count_lines(r.output) == 1);
}

// ---------------------------------------------------------------------------------------------
// Fault class 3: memory.

TEST_CASE("limits: memory estimates and their refusal message", "[limits]") {
  CHECK(format_bytes(512) == "512 bytes");
  CHECK(format_bytes(1023) == "1023 bytes");
  CHECK(format_bytes(1024) == "1.0 KiB");
  CHECK(format_bytes(412.0 * (1 << 30)) == "412 GiB");
  CHECK(format_bytes(1.4 * 1024 * 1024 * 1024 * 1024) == "1.4 TiB");
  const uint64_t total = physical_memory_bytes();
  REQUIRE(total > 0);
  CHECK(memory_refusal(1000, "x").empty());
  CHECK(memory_refusal(static_cast<double>(total), "x").empty());
  const std::string r = memory_refusal(2.0 * (1LL << 50), "parameters");
  CHECK_THAT(r, Contains("2.0 PiB (parameters), more than this machine's "));
  CHECK_THAT(r, Contains(format_bytes(static_cast<double>(total))));
  // The estimate counts the parameters `weight_copies` times, in float32.
  Seq2SeqConfig c = tiny_config();
  const MemoryNeed n = training_memory(c, 1, 1, 1, 4);
  CHECK(n.weights == static_cast<double>(c.parameter_count()) * 16);
  // hidden 65536: about 86 billion parameters, so more than a terabyte with Adam's state.
  c.hidden = 65536;
  CHECK(training_memory(c, 64, 25, 26, 4).weights > 1e12);
}

TEST_CASE("limits: train refuses a model too large for memory, naming the flag", "[limits]") {
  TempDir dir("limits_train");
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"--task copy --hidden 65536", "tapestry train: --hidden 65536: training would need "},
      {"--task reverse --hidden 65536 --layers 8", "tapestry train: --hidden 65536: training "},
      {"--task copy --symbols 1000000 --emb 65536", "tapestry train: --symbols 1000000: training"},
      {"--task copy --min-len 5 --max-len 1024 --batch-size 100000",
       "tapestry train: --batch-size 100000: training would need "},
      {"--task dates --hidden 65536 --emb 65536", "tapestry train: --hidden 65536: training "},
  };
  for (const auto& c : cases) {
    const CommandResult r = run_tapestry(fmt::format("train {} --out run", c.args), dir.str());
    INFO(c.args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains(c.says));
    CHECK_THAT(r.output, Contains("more than this machine's"));
    CHECK(count_lines(r.output) == 1);
    // Refused from the flags, before any data was made or the run directory created.
    CHECK(!std::filesystem::exists(dir / "run"));
  }
}

TEST_CASE("limits: the model config is checked again with the vocabularies the data gave",
          "[limits]") {
  // cmd_train calls model_config after reading the data: a vocabulary no flag is to blame for is
  // named as such (an Error, exit 1); a flag that is to blame is named (a UsageError, exit 2).
  cli::TrainSettings s;
  s.data = "pairs.tsv";
  CHECK(cli::model_config(s, 1000, 1000).hidden == s.hidden);
  try {
    (void)cli::model_config(s, 100000000, 100000000);
    FAIL("no refusal");
  } catch (const cli::UsageError& e) {
    FAIL(e.message);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("vocabularies of 100,000,000 source and 100,000,000 target "
                                  "tokens: training would need "));
    CHECK_THAT(e.what(), Contains("(--max-vocab or --min-freq make them smaller)"));
  }
  s.emb = 4096;
  try {
    (void)cli::model_config(s, 10000000, 10000000);
    FAIL("no refusal");
  } catch (const cli::UsageError& e) {
    CHECK_THAT(e.message, Contains("--emb 4096: training would need "));
  }
}

TEST_CASE("limits: train refuses toy sentences longer than decoding accepts", "[limits]") {
  TempDir dir("limits_train_len");
  const CommandResult r = run_tapestry("train --task reverse --max-len 10000 --out run", dir.str());
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("tapestry train: --max-len 10000: validation sentences are "
                                "decoded, and decoding accepts up to 1024 tokens"));
  CHECK(count_lines(r.output) == 1);
  CHECK(!std::filesystem::exists(dir / "run"));
}

TEST_CASE("limits: bench refuses sizes too large for memory or for decoding", "[limits]") {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"--config small --hidden 65536", "tapestry bench: --hidden 65536: training would need "},
      {"--config tiny --emb 65536 --hidden 65536",
       "tapestry bench: --hidden 65536: training would need "},
      {"--config small --batch 65536 --src-len 1000 --tgt-len 1000",
       "tapestry bench: --batch 65536: training would need "},
      {"--config small --src-len 5000", "--src-len 5000: decoding accepts sources of up to 1024"},
      {"--config small --tgt-len 5000", "--tgt-len 5000: decoding stops after at most 4096"},
  };
  for (const auto& c : cases) {
    const CommandResult r = run_tapestry(fmt::format("bench {}", c.args));
    INFO(c.args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains(c.says));
    CHECK(count_lines(r.output) == 1);
  }
}

TEST_CASE("limits: decoding bounds the source, the output and its memory", "[limits]") {
  Seq2Seq model(tiny_config());
  DecodeOptions o;
  // The output's length is capped whatever the ratio.
  o.max_len_ratio = 1000, o.max_len_extra = 100000;
  CHECK(max_decode_steps(o, kMaxSourceTokens) == kMaxOutputTokens);
  CHECK(max_decode_steps(DecodeOptions{}, 10) == 25);
  // A source over the limit is refused before anything is decoded.
  auto batch_of = [](int64_t rows, int64_t len) {
    std::vector<EncodedPair> pairs(static_cast<size_t>(rows));
    std::vector<int64_t> index;
    for (int64_t r = 0; r < rows; ++r) {
      pairs[r].src.assign(static_cast<size_t>(len), 4);
      index.push_back(r);
    }
    return make_batch(pairs, index);
  };
  CHECK_THROWS_MATCHES(
      greedy_decode(model, batch_of(2, kMaxSourceTokens + 1)), ValueError,
      Catch::Matchers::Message("decode: a source of 1025 tokens (batch row 0) is longer than the "
                               "1024 decoding accepts"));
  // The bound, term by term, for one sentence of 10 tokens (25 steps, V 7, K 12, A 6): greedy
  // keeps one hypothesis, 25 x 10 weights; a beam of 2 up to 2 alive and 2 finished, with its
  // candidates (2 x 7 of 24 bytes) beside the log-probabilities.
  DecodeOptions beam2;
  beam2.beam = 2;
  CHECK(decode_memory_bound(model.config(), 1, 10, DecodeOptions{}) == 1000 + 56 + 1440);
  CHECK(decode_memory_bound(model.config(), 1, 10, beam2) == 4000 + (112 + 336) + 2880);
  // A beam of 1000 over 64 sentences of 1024 tokens would keep ~2 TB of attention.
  o.beam = 1000;
  const double bound = decode_memory_bound(model.config(), 64, kMaxSourceTokens, o);
  REQUIRE(bound > static_cast<double>(physical_memory_bytes()));
  try {
    (void)beam_decode(model, batch_of(64, kMaxSourceTokens), o);
    FAIL("no refusal");
  } catch (const ValueError& e) {
    CHECK_THAT(e.what(), Contains("decode: beam 1000 over 64 sentences of up to 1024 tokens would "
                                  "need "));
    CHECK_THAT(e.what(), Contains("more than this machine's"));
  }
  // The longest source decodes, and the output stops at the bound.
  o = DecodeOptions{};
  o.max_len_ratio = 1000;
  auto hyps = greedy_decode(model, batch_of(1, kMaxSourceTokens), o);
  CHECK(hyps[0][0].steps() <= kMaxOutputTokens);
}

TEST_CASE("limits: translate cuts an over-long line to the bound and says so", "[limits]") {
  TempDir dir("limits_long_line");
  save_tiny(dir, "m.safetensors");
  std::string line;
  for (int i = 0; i < 2000; ++i) line += i % 2 ? "b " : "a ";
  write(dir / "in.txt", "a b\n" + line + "\n");
  const CommandResult r = run_tapestry("translate --model m.safetensors --input in.txt", dir.str());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("tapestry translate: line 2: 2000 tokens, more than the 1024 a "
                                "sentence may have; translating its first 1024"));
}

TEST_CASE("limits: train drops over-long pairs (--max-tokens) and says how many", "[limits]") {
  TempDir dir("limits_max_tokens");
  const std::string fast =
      "--epochs 1 --hidden 8 --emb 4 --batch-size 8 --threads 1 --valid-decode 0 --test-beam 1";
  SECTION("--data, with a given limit") {
    std::string tsv;
    for (int i = 0; i < 40; ++i)
      tsv +=
          i == 7 || i == 20 ? "a b c d e f g\tx y\n" : fmt::format("a b {}\tx {}\n", i % 3, i % 4);
    write(dir / "pairs.tsv", tsv);
    const CommandResult r = run_tapestry(
        fmt::format("train --data pairs.tsv --max-tokens 5 {} --out run", fast), dir.str());
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output,
               Contains("pairs.tsv (38 of 40 pairs kept; dropped 2 of 40 pairs longer than 5 "
                        "tokens (--max-tokens))"));
  }
  SECTION("--train-prefix, by default 100 tokens, training pairs only") {
    std::string de, en, long_line;
    for (int i = 0; i < 101; ++i) long_line += "w ";
    for (int i = 0; i < 20; ++i) {
      de += i == 3 ? long_line + "\n" : fmt::format("a {}\n", i % 3);
      en += fmt::format("x {}\n", i % 2);
    }
    for (const char* split : {"train", "valid", "test"}) {
      write(dir / fmt::format("{}.de", split), de);
      write(dir / fmt::format("{}.en", split), en);
    }
    const CommandResult r =
        run_tapestry(fmt::format("train --train-prefix train --valid-prefix valid --test-prefix "
                                 "test --src de --tgt en {} --out run",
                                 fast),
                     dir.str());
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("dropped 1 of 20 training pairs longer than 100 tokens"));
    CHECK_THAT(r.output, Contains("19 train, 20 valid, 20 test pairs"));
  }
  SECTION("a held-out sentence longer than decoding accepts is refused before training") {
    std::string de, en, long_line;
    for (int i = 0; i < 1100; ++i) long_line += "w ";
    for (int i = 0; i < 10; ++i) {
      de += fmt::format("a {}\n", i % 3);
      en += fmt::format("x {}\n", i % 2);
    }
    write(dir / "train.de", de), write(dir / "train.en", en);
    write(dir / "test.de", de), write(dir / "test.en", en);
    write(dir / "valid.de", "a\nb\nc\n" + long_line + "\n");
    write(dir / "valid.en", "x\nx\nx\nx\n");
    const CommandResult r =
        run_tapestry(fmt::format("train --train-prefix train --valid-prefix valid --test-prefix "
                                 "test --src de --tgt en {} --out run",
                                 fast),
                     dir.str());
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("tapestry train: error: valid.de:4: 1100 tokens, more than the "
                                  "1024 decoding accepts"));
    CHECK(count_lines(r.output) == 1);
    CHECK(!std::filesystem::exists(dir / "run"));
  }
  SECTION("a final beam search too large for memory is refused before training") {
    std::string de, en, long_line, test_de, test_en;
    for (int i = 0; i < 1000; ++i) long_line += "a ";
    for (int i = 0; i < 20; ++i) {
      de += fmt::format("a {}\n", i % 3);
      en += fmt::format("x {}\n", i % 2);
    }
    // 64 test sentences of 1000 tokens, decoded together: a beam of 100 keeps up to 200
    // hypotheses of 2005 x 1000 attention weights for each, 1.5 GiB a sentence, ~96 GiB in all.
    for (int i = 0; i < 64; ++i) test_de += long_line + "\n", test_en += "x\n";
    write(dir / "train.de", de), write(dir / "train.en", en);
    write(dir / "valid.de", de), write(dir / "valid.en", en);
    write(dir / "test.de", test_de), write(dir / "test.en", test_en);
    const CommandResult r = run_tapestry(
        "train --train-prefix train --valid-prefix valid --test-prefix test --src de --tgt en "
        "--epochs 1 --hidden 8 --emb 4 --batch-size 64 --threads 1 --test-beam 100 --out run",
        dir.str());
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("tapestry train: error: --batch-size 64 with --test-beam 100: "
                                  "decoding the test sentences (up to 1000 tokens) would need "));
    CHECK(count_lines(r.output) == 1);
    CHECK(!std::filesystem::exists(dir / "run"));
  }
  SECTION("--max-tokens 0 keeps every pair") {
    std::string tsv;
    for (int i = 0; i < 40; ++i) tsv += i == 7 ? "a b c d e f g\tx y\n" : "a b\tx\n";
    write(dir / "pairs.tsv", tsv);
    const CommandResult r = run_tapestry(
        fmt::format("train --data pairs.tsv --max-tokens 0 {} --out run", fast), dir.str());
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("pairs.tsv (40 of 40 pairs kept)"));
  }
}
