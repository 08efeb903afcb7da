// The tapestry program end to end: train, translate, eval and resume on a tiny task, and a clear
// message with a non-zero exit for every kind of bad input.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "tapestry/nn/checkpoint.h"

using namespace tapestry;
using namespace tapestry::testing;
using Catch::Contains;

namespace {

constexpr const char* kTiny =
    "--task reverse --min-len 3 --max-len 6 --symbols 8 --train-size 400 --valid-size 40 "
    "--test-size 40 --hidden 16 --emb 8 --batch-size 32 --threads 1 --test-beam 2";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("train, translate and eval a tiny model end to end", "[cli]") {
  TempDir dir("cli_e2e");
  const std::string run = dir / "run";
  CommandResult t = run_tapestry(fmt::format("train {} --epochs 2 --out '{}'", kTiny, run));
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK_THAT(t.output, Contains("epoch 2/2"));
  CHECK_THAT(t.output, Contains("greedy:  BLEU"));
  CHECK_THAT(t.output, Contains("beam 2:  BLEU"));
  for (const char* f : {"model.safetensors", "last.safetensors", "metrics.jsonl", "command.json",
                        "test.src", "test.ref", "result.json"})
    CHECK(std::filesystem::exists(dir / ("run/" + std::string(f))));
  CHECK(count_lines(read(dir / "run/metrics.jsonl")) == 2);
  CHECK(count_lines(read(dir / "run/test.src")) == 40);

  write(dir / "in.txt", "a b c\n\nd e f g h\n");
  CommandResult tr =
      run_tapestry(fmt::format("translate --model '{}' --input '{}' --beam 2 --attention '{}'", run,
                               dir / "in.txt", dir / "attn.json"));
  INFO(tr.output);
  REQUIRE(tr.status == 0);
  CHECK(count_lines(tr.output) == 3);  // the empty line keeps its place
  CHECK_THAT(read(dir / "attn.json"), Contains("\"weights\""));

  CommandResult ev =
      run_tapestry(fmt::format("eval --model '{}' --json '{}'", run, dir / "e.json"));
  INFO(ev.output);
  REQUIRE(ev.status == 0);
  CHECK_THAT(ev.output, Contains("BLEU = "));
  CHECK_THAT(ev.output, Contains("src length"));
  CHECK_THAT(ev.output, Contains("sentences/s (greedy, batch 64)"));
  const nlohmann::json e = nlohmann::json::parse(read(dir / "e.json"));
  CHECK(e["decode_seconds"].get<double>() > 0);
  CHECK(e["parameters"].get<int64_t>() > 0);
  CHECK_THAT(e["model"].get<std::string>(), Contains("attention"));
  // Each bucket's mean source length lies inside the bucket ("1-10", "11-20", ..., "41+").
  REQUIRE(!e["by_length"].empty());
  for (const auto& b : e["by_length"]) {
    const std::string name = b["bucket"].get<std::string>();
    const double lo = std::stod(name), mean = b["mean_source_length"].get<double>();
    INFO(name << " mean " << mean);
    CHECK(mean >= lo);
    if (name.find('-') != std::string::npos)
      CHECK(mean <= std::stod(name.substr(name.find('-') + 1)));
  }
}

TEST_CASE("a resumed run continues exactly where an uninterrupted one would be", "[cli]") {
  TempDir dir("cli_resume");
  REQUIRE(run_tapestry(
              fmt::format("train {} --epochs 3 --dropout 0.1 --out '{}'", kTiny, dir / "straight"))
              .status == 0);
  REQUIRE(run_tapestry(
              fmt::format("train {} --epochs 2 --dropout 0.1 --out '{}'", kTiny, dir / "split"))
              .status == 0);
  CommandResult r = run_tapestry(fmt::format("train --resume '{}' --epochs 3", dir / "split"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("resumed after epoch 2"));
  CHECK(count_lines(read(dir / "split/metrics.jsonl")) == 3);
  // Same parameters and optimizer state, bit for bit.
  nn::SafetensorsFile a = nn::load_safetensors(dir / "straight/last.safetensors");
  nn::SafetensorsFile b = nn::load_safetensors(dir / "split/last.safetensors");
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    INFO(a.tensors[i].first);
    CHECK(a.tensors[i].first == b.tensors[i].first);
    CHECK(a.tensors[i].second.to_vector() == b.tensors[i].second.to_vector());
  }
}

TEST_CASE("a noam run takes its lr per step and resumes the schedule exactly", "[cli]") {
  TempDir dir("cli_noam");
  const std::string flags = fmt::format(
      "{} --schedule noam --warmup 5 --adam-beta2 0.98 --adam-eps 1e-9 --log-every 1", kTiny);
  REQUIRE(
      run_tapestry(fmt::format("train {} --epochs 3 --out '{}'", flags, dir / "straight")).status ==
      0);
  REQUIRE(
      run_tapestry(fmt::format("train {} --epochs 2 --out '{}'", flags, dir / "split")).status ==
      0);
  // The schedule's flags come back from the run's command.json.
  CommandResult r = run_tapestry(fmt::format("train --resume '{}' --epochs 3", dir / "split"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  nn::SafetensorsFile a = nn::load_safetensors(dir / "straight/last.safetensors");
  nn::SafetensorsFile b = nn::load_safetensors(dir / "split/last.safetensors");
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    INFO(a.tensors[i].first);
    CHECK(a.tensors[i].second.to_vector() == b.tensors[i].second.to_vector());
  }
  // Every step line holds the lr its update took: 1e-3 min(s / 5, sqrt(5 / s)).
  std::istringstream log(read(dir / "split/metrics.jsonl"));
  int64_t steps = 0;
  for (std::string line; std::getline(log, line);) {
    const auto m = nlohmann::json::parse(line);
    if (m.value("kind", "") != "step") continue;
    const auto s = m["step"].get<double>();
    INFO("step " << s);
    CHECK(m["lr"].get<double>() == Approx(1e-3 * std::min(s / 5, std::sqrt(5 / s))).epsilon(1e-15));
    CHECK(s == static_cast<double>(++steps));
  }
  CHECK(steps > 30);  // three epochs of 13 steps, the schedule's peak at step 5
}

TEST_CASE("bad flags exit with status 2 and say what is valid", "[cli]") {
  auto check = [](const std::string& args, const std::string& says) {
    CommandResult r = run_tapestry(args);
    INFO(args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains(says));
  };
  check("trian", "unknown command 'trian' (valid: train, translate, eval");
  check("train --task reverse --epoch 3", "unknown option '--epoch'; did you mean --epochs?");
  check("train --task reverse --cell transformer",
        "--cell: 'transformer' is not a valid value (valid: rnn, gru, lstm)");
  check("train --task reverse --attention luong",
        "(valid: none, bahdanau, dot, general, concat, scaled-dot, cosine, local-m, local-p)");
  check("train --task reverse --epochs many", "--epochs: 'many' is not a whole number");
  check("train --task reverse --dropout 1.5", "--dropout: 1.5 is outside [0, 0.95]");
  check("train --epochs 3", "give exactly one data source");
  check("train --task reverse --data x.txt", "give exactly one data source");
  check("train --train-prefix x --src de", "--train-prefix needs --src and --tgt");
  check("train --task reverse --lr", "--lr needs a value");
  check("translate", "--model is required");
  check("eval --model x --src a.txt", "give both --src and --ref");
  check("train --task reverse --arch transformer --hidden 64",
        "--hidden applies to --arch rnn, not --arch transformer");
  check("train --task reverse --heads 4", "--heads applies to --arch transformer, not --arch rnn");
  check("train --task reverse --arch transformer --d-model 60 --heads 8",
        "--d-model 60 must be a multiple of --heads 8");
  check("train --task reverse --arch transformer --d-model 9 --heads 3",
        "--d-model 9: sinusoidal positions need an even width");
  check("train --task reverse --arch lstm",
        "--arch: 'lstm' is not a valid value (valid: rnn, transformer)");
}

TEST_CASE("a Transformer trains, translates, evaluates and resumes from the command line",
          "[cli]") {
  TempDir dir("cli_transformer");
  const std::string run = dir / "run";
  const std::string tiny =
      "--task reverse --min-len 3 --max-len 6 --symbols 8 --train-size 400 --valid-size 40 "
      "--test-size 40 --arch transformer --d-model 16 --heads 2 --ffn 32 --enc-layers 1 "
      "--dec-layers 1 --batch-size 32 --threads 1 --test-beam 2 --schedule noam --warmup 20";
  CommandResult t = run_tapestry(fmt::format("train {} --epochs 2 --out '{}'", tiny, run));
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK_THAT(t.output, Contains("transformer 1+1 layers d 16 heads 2 ffn 32"));
  CHECK_THAT(t.output, Contains("beam 2:  BLEU"));
  write(dir / "in.txt", "a b c\nd e f g h\n");
  CommandResult tr = run_tapestry(
      fmt::format("translate --model '{}' --input '{}' --beam 2", run, dir / "in.txt"));
  INFO(tr.output);
  REQUIRE(tr.status == 0);
  CHECK(count_lines(tr.output) == 2);
  CommandResult ev = run_tapestry(fmt::format("eval --model '{}'", run));
  INFO(ev.output);
  REQUIRE(ev.status == 0);
  CHECK_THAT(ev.output, Contains("exact match"));
  // Resumed for a third epoch, the run reads its architecture from its command.
  CommandResult r = run_tapestry(fmt::format("train --resume '{}' --epochs 3", run));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("epoch 3/3"));
}

TEST_CASE("bad files give one readable message and exit 1, never a crash", "[cli]") {
  TempDir dir("cli_files");
  auto check = [&](const std::string& args, const std::string& says) {
    CommandResult r = run_tapestry(args, dir.str());
    INFO(args << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains(says));
    CHECK(count_lines(r.output) <= 2);
  };
  check("train --data missing.tsv", "missing.tsv: cannot open: No such file or directory");
  write(dir / "bad.tsv", "a b\tx y\nonly one column\n");
  check("train --data bad.tsv", "bad.tsv:2: expected 2 or 3 tab-separated columns");
  write(dir / "empty.tsv", "");
  check("train --data empty.tsv", "empty.tsv: no sentence pairs (empty file)");
  write(dir / "p.de", "a\nb\nc\n");
  write(dir / "p.en", "a\nb\n");
  check("train --train-prefix p --valid-prefix p --test-prefix p --src de --tgt en",
        "p.de has 3 lines but p.en has 2");
  check("translate --model nowhere", "model 'nowhere' does not exist");
  check("eval --model .", "'.' has no model.safetensors");

  // A checkpoint whose configuration does not match its tensors (another model's shape).
  REQUIRE(run_tapestry(fmt::format("train {} --epochs 1 --out run", kTiny), dir.str()).status == 0);
  nn::SafetensorsFile f = nn::load_safetensors(dir / "run/model.safetensors");
  std::string& config = f.metadata.at("config");
  config.replace(config.find("\"hidden\":16"), 11, "\"hidden\":24");
  nn::save_safetensors(dir / "other.safetensors", f.tensors, f.metadata);
  check("eval --model other.safetensors --src run/test.src --ref run/test.ref",
        "does not match its tensors");
  // A truncated checkpoint.
  const std::string bytes = read(dir / "run/model.safetensors");
  write(dir / "cut.safetensors", bytes.substr(0, bytes.size() / 2));
  check("translate --model cut.safetensors --input run/test.src", "cut.safetensors");
  // Not a Tapestry model: a safetensors file without the metadata.
  nn::save_safetensors(dir / "plain.safetensors", f.tensors, {});
  check("translate --model plain.safetensors --input run/test.src", "not a Tapestry model");
  // A run directory is not overwritten.
  check(fmt::format("train {} --epochs 1 --out run", kTiny), "already holds a run");
  check("train --resume nowhere", "'nowhere' is not a run directory");
}
