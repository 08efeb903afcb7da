// Checkpoint averaging: every parameter is the mean of the checkpoints', only checkpoints of one
// run are averaged, and `tapestry average` reads files or a run's kept epochs.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "tapestry/models/average.h"
#include "tapestry/nn/checkpoint.h"
#include "tests/cli_run.h"

using namespace tapestry;
using namespace tapestry::models;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct Tiny {
  Vocab src, tgt;
  Seq2SeqConfig config;
  Tiny() {
    for (const char* w : {"the", "black", "cat"}) src.add(w);
    for (const char* w : {"le", "chat", "noir"}) tgt.add(w);
    config.src_vocab = src.size();
    config.tgt_vocab = tgt.size();
    config.emb = 5;
    config.hidden = 6;
  }
  // A model of this config with its initial weights moved by `shift` (as training moves them
  // from epoch to epoch), saved to `path`.
  std::vector<std::vector<float>> save(const std::string& path, double shift, int hidden = 6) {
    Seq2SeqConfig c = config;
    c.hidden = hidden;
    Seq2Seq model(c);
    std::vector<std::vector<float>> values;
    for (auto& [name, p] : model.named_parameters()) {
      float* x = p->value.data<float>();
      for (int64_t i = 0; i < p->value.numel(); ++i)
        x[i] += static_cast<float>(shift * std::sin(static_cast<double>(i)));
      values.emplace_back(x, x + p->value.numel());
    }
    save_model(path, model, src, tgt, Preprocess{});
    return values;
  }
};

}  // namespace

TEST_CASE("average: every parameter is the mean of the checkpoints'", "[average]") {
  testing::TempDir dir("average");
  Tiny t;
  const auto a = t.save(dir / "a.safetensors", 0);
  const auto b = t.save(dir / "b.safetensors", 0.1);
  const auto c = t.save(dir / "c.safetensors", 0.3);
  SavedModel m =
      average_models({dir / "a.safetensors", dir / "b.safetensors", dir / "c.safetensors"});
  auto params = m.model->named_parameters();
  REQUIRE(params.size() == a.size());
  size_t differ_from_a = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const float* x = params[k].second->value.data<float>();
    for (size_t i = 0; i < a[k].size(); ++i) {
      const double mean = (static_cast<double>(a[k][i]) + b[k][i] + c[k][i]) / 3;
      REQUIRE(x[i] == static_cast<float>(mean));
      differ_from_a += x[i] != a[k][i];
    }
  }
  CHECK(differ_from_a > 0);
  CHECK_THAT(m.metadata.at("averaged_from"), Contains("b.safetensors"));
}

TEST_CASE("average: checkpoints of different models are refused, naming the key", "[average]") {
  testing::TempDir dir("average");
  Tiny t;
  t.save(dir / "a.safetensors", 0);
  t.save(dir / "wide.safetensors", 0, 8);
  CHECK_THROWS_WITH(average_models({dir / "a.safetensors", dir / "wide.safetensors"}),
                    Contains("wide.safetensors': its 'config' differs"));
  CHECK_THROWS_AS(average_models({}), ValueError);
}

TEST_CASE("tapestry average: files, a run's kept epochs, and bad input", "[average]") {
  testing::TempDir dir("average");
  Tiny t;
  t.save(dir / "a.safetensors", 0);
  t.save(dir / "b.safetensors", 0.1);
  auto r = testing::run_tapestry("average " + (dir / "a.safetensors") + " " +
                                 (dir / "b.safetensors") + " --out " + (dir / "ab.safetensors"));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("averaged 2 checkpoints into"));
  CHECK(fs::exists(dir / "ab.safetensors"));

  // A run trained with --average-last keeps its last epochs; --last takes the latest of them.
  r = testing::run_tapestry(
      "train --task copy --train-size 64 --valid-size 8 --test-size 8 "
      "--emb 8 --hidden 8 --epochs 3 --average-last 2 --test-beam 1 --quiet "
      "--out " +
      (dir / "run"));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("averaged model (epochs 2,3)"));
  CHECK_FALSE(fs::exists(dir / "run/epochs/epoch-1.safetensors"));
  CHECK(fs::exists(dir / "run/averaged.safetensors"));
  r = testing::run_tapestry("average " + (dir / "run") + " --last 1 --out " +
                            (dir / "one.safetensors"));
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("epoch-3.safetensors"));
  CHECK_THAT(r.output, !Contains("epoch-2.safetensors"));

  r = testing::run_tapestry("average " + (dir / "a.safetensors"));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--out is required"));
  r = testing::run_tapestry("average " + (dir / "a.safetensors") + " " +
                            (dir / "run/model.safetensors") + " --out " + (dir / "x.safetensors"));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("differs from that of"));
  CHECK_FALSE(fs::exists(dir / "x.safetensors"));
  fs::create_directories(dir / "norun");
  r = testing::run_tapestry("average " + (dir / "norun") + " --out " + (dir / "x.safetensors"));
  CHECK(r.status == 1);
}
