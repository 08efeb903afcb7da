// Inputs the fuzz targets (tests/fuzz/) found crashing a reader, replayed through the same reader:
// each must now fail with the reader's documented error (or load).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tapestry/models/config.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/vocab.h"
#include "tapestry/nn/checkpoint.h"
#include "tools/metrics_log.h"

using namespace tapestry;
using namespace std::string_literals;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A file of this process's own holding `bytes`, removed when the test ends.
struct TempFile {
  fs::path path;
  TempFile(const std::string& name, const std::string& bytes)
      : path(fs::temp_directory_path() /
             ("tapestry_fuzz_regression_" + std::to_string(getpid()) + "_" + name)) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

}  // namespace

// fuzz_model_json: nlohmann::json::parse throws out_of_range (not parse_error) for a number too
// large for a double; Vocab::from_json and Seq2SeqConfig::from_json let it escape, so load_model
// threw neither ValueError nor CheckpointError.
TEST_CASE("fuzz: a number overflowing a double in a vocabulary or config is a ValueError",
          "[fuzz]") {
  // The input as found (after its selector byte 'd' = vocabulary): d1e400ye\x1a"t"}
  CHECK_THROWS_AS(models::Vocab::from_json("1e400ye\x1a\"t\"}"), ValueError);
  CHECK_THROWS_WITH(models::Vocab::from_json("[\"<pad>\", 1e400]"),
                    Contains("vocab: not valid JSON"));
  CHECK_THROWS_WITH(models::Seq2SeqConfig::from_json("{\"emb\": -1e400}"),
                    Contains("model config: not valid JSON"));
  // Through load_model, the reader of a checkpoint's metadata: the file's own error.
  TempFile file("overflow.safetensors", "");
  nn::save_safetensors(file.path.string(), {},
                       {{"format", "tapestry-seq2seq"},
                        {"config", "1e400"},
                        {"src_vocab", "[]"},
                        {"tgt_vocab", "[]"},
                        {"preprocess", "{}"}});
  CHECK_THROWS_AS(models::load_model(file.path.string()), nn::CheckpointError);
}

// fuzz_model_json: an integer too long for 64 bits ("src_vocab": 9333...3, 75 digits) is parsed as
// a double, and get<int64_t>() converted it unchecked (undefined behaviour, UBSan's
// float-cast-overflow). Sizes that are not JSON integers are now a ValueError.
TEST_CASE("fuzz: a config size that is not an integer is a ValueError", "[fuzz]") {
  models::Seq2SeqConfig config;
  config.src_vocab = config.tgt_vocab = 9;
  const std::string good = config.to_json();
  CHECK_NOTHROW(models::Seq2SeqConfig::from_json(good));
  const auto with = [&](const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(good);
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  };
  CHECK_THROWS_WITH(models::Seq2SeqConfig::from_json(with("src_vocab", std::string(75, '9'))),
                    Contains("config.src_vocab: ") && Contains("is not an integer"));
  CHECK_THROWS_AS(models::Seq2SeqConfig::from_json(with("hidden", "1e30")), ValueError);
  CHECK_THROWS_AS(models::Seq2SeqConfig::from_json(with("seed", "-1e30")), ValueError);
  CHECK_THROWS_AS(models::Seq2SeqConfig::from_json(with("emb", "2.5")), ValueError);
}

// Found while reading the readers the fuzz targets cover: a probe's "align" entry outside int32
// (1e20) was converted unchecked by get<std::vector<int32_t>>() (undefined behaviour). It is now
// the report's error, naming the line.
TEST_CASE("fuzz: a probe alignment outside int32 is an error naming the line", "[fuzz]") {
  const std::string line =
      R"({"epoch":1,"train_loss":1,"valid_loss":1,"probe":{"source":["a"],"target":["b"],)"
      R"("weights":[[1]],"align":)";
  {
    TempFile file("align_ok.jsonl", line + "[0]}}\n");
    CHECK(cli::read_metrics_log_counts(file.path.string()).probes == 1);
  }
  for (const char* align : {"[1e20]", "[-1e20]", "[4294967296]", "[0.5]"}) {
    TempFile file("align.jsonl", line + align + "}}\n");
    CHECK_THROWS_WITH(cli::read_metrics_log_counts(file.path.string()),
                      Contains("align.jsonl:1: 'probe' has an alignment"));
  }
}

// fuzz_saved_model (reproduced by hand from its seed): load_model built the model from the
// configuration before checking the tensors, so a 3.6 KB file whose config said "hidden": 30000
// allocated 12 GB (libFuzzer: out-of-memory). The configuration is now checked first: each size
// against its range, then every tensor's shape against the configuration, from the header alone.
TEST_CASE("fuzz: a saved model whose config outgrows its file is refused before allocating",
          "[fuzz]") {
  models::Vocab vocab;
  for (const char* t : {"a", "b", "c", "d", "e"}) vocab.add(t);
  models::Seq2SeqConfig config;
  config.src_vocab = config.tgt_vocab = vocab.size();
  config.emb = 3;
  config.hidden = 2;
  models::Seq2Seq model(config);
  TempFile file("model.safetensors", "");
  models::save_model(file.path.string(), model, vocab, vocab, models::Preprocess{});
  CHECK_NOTHROW(models::load_model(file.path.string()));

  nn::SafetensorsFile st = nn::load_safetensors(file.path.string());
  auto j = nlohmann::json::parse(st.metadata.at("config"));
  struct Case {
    const char* key;
    int64_t value;
    const char* says;
  };
  for (const Case& c : {Case{"hidden", 30000, "does not match its tensors"},
                        Case{"emb", 100000000, "config.emb: 100000000 is out of range"},
                        Case{"attn_size", 1000000000, "config.attn_size: 1000000000 is out of"}}) {
    auto big = j;
    big[c.key] = c.value;
    st.metadata["config"] = big.dump();
    TempFile bad("big.safetensors", "");
    nn::save_safetensors(bad.path.string(), st.tensors, st.metadata);
    CHECK_THROWS_WITH(models::load_model(bad.path.string()), Contains(c.says));
  }
}
