// The scripts `tapestry export --to pytorch` writes, run by python3 with torch: model.py bounds
// decoding as Tapestry does, translate.py prints what `tapestry translate` prints, and
// bench_exported.py times the batches `tapestry bench --model` times. Skipped (with a warning)
// where /usr/bin/python3 has no torch.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "export_fixtures.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/saved_model.h"
#include "tools/export_pytorch.h"
#include "tools/text_files.h"
#include "torch_run.h"

using namespace tapestry;
using namespace tapestry::testing;
using namespace tapestry::testing::exports;
using Catch::Contains;

TEST_CASE("the exported model.py bounds decoding as Tapestry does", "[export][torch]") {
  if (!torch_available()) {
    WARN("python3 with torch not found (" << kTorchPython
                                          << "): model.py's bounds are not checked");
    return;
  }
  TempDir dir("export_bounds");
  write(dir / "model.py", cli::pytorch_model_py(models::Arch::rnn));
  struct Case {
    double ratio;
    int64_t extra, src_len;
  };
  // Around the 4096-step cap, and far beyond it: the largest flags tapestry translate takes.
  const std::vector<Case> cases = {{2, 5, 10},   {0.5, 1, 3},  {0, 0, 7},    {2, 5, 2045},
                                   {2, 5, 2046}, {1, 4095, 1}, {1, 4096, 1}, {1000, 100000, 1024}};
  std::string py =
      "import json, sys\nsys.path.insert(0, sys.argv[1])\nimport model\nprint(json.dumps([";
  for (const Case& c : cases)
    py += fmt::format(
        "model.max_decode_steps(model.DecodeOptions(max_len_ratio={}, "
        "max_len_extra={}), {}), ",
        c.ratio, c.extra, c.src_len);
  // A model with a last position (learned positions) stops there; one without keeps the bound.
  py +=
      "model.max_decode_steps(model.DecodeOptions(max_len_ratio=float('inf')), 1), "
      "model.MAX_SOURCE_TOKENS, model.MAX_OUTPUT_TOKENS, "
      "model.step_limit(type('Learned', (), {'position_limit': 8})(), "
      "model.DecodeOptions(max_len_ratio=3), 7), "
      "model.step_limit(object(), model.DecodeOptions(max_len_ratio=3), 7)]))\n";
  write(dir / "bounds.py", py);
  CommandResult s = shell(fmt::format("{} '{}' '{}'", kTorchPython, dir / "bounds.py", dir.str()),
                          dir / "bounds.err");
  INFO(read(dir / "bounds.err"));
  REQUIRE(s.status == 0);
  const nlohmann::json got = nlohmann::json::parse(s.output);
  REQUIRE(got.size() == cases.size() + 5);
  for (size_t i = 0; i < cases.size(); ++i) {
    models::DecodeOptions o;
    o.max_len_ratio = cases[i].ratio;
    o.max_len_extra = cases[i].extra;
    INFO(cases[i].ratio << " " << cases[i].extra << " " << cases[i].src_len);
    CHECK(got[i].get<int64_t>() == models::max_decode_steps(o, cases[i].src_len));
  }
  models::DecodeOptions inf;
  inf.max_len_ratio = std::numeric_limits<double>::infinity();
  CHECK(got[cases.size()].get<int64_t>() == models::max_decode_steps(inf, 1));
  CHECK(got[cases.size() + 1].get<int64_t>() == models::kMaxSourceTokens);
  CHECK(got[cases.size() + 2].get<int64_t>() == models::kMaxOutputTokens);
  models::Seq2SeqConfig learned;
  learned.arch = models::Arch::transformer;
  learned.positions = models::Positions::learned;
  learned.max_positions = 8;
  models::DecodeOptions three;
  three.max_len_ratio = 3;
  CHECK(got[cases.size() + 3].get<int64_t>() == models::max_decode_steps(learned, three, 7));
  CHECK(got[cases.size() + 3].get<int64_t>() == 8);
  CHECK(got[cases.size() + 4].get<int64_t>() == models::max_decode_steps(three, 7));
}

TEST_CASE("python3 translate.py prints what tapestry translate prints", "[export][torch]") {
  if (!torch_available()) {
    WARN("python3 with torch not found (" << kTorchPython << "): translate.py is not checked");
    return;
  }
  TempDir dir("export_cli");
  const std::vector<Config> configs = configurations();
  for (const Config& c :
       {configs[configs.size() - 3], configs.back(), transformer_configurations().back()}) {
    INFO(c.name);
    const std::string run = dir / (c.name + "/run"), exp = dir / (c.name + "/export");
    REQUIRE(
        shell(tapestry_cmd(fmt::format("train {} {} --out '{}'", c.base, c.flags, run))).status ==
        0);
    REQUIRE(shell(tapestry_cmd(fmt::format("export --model '{}' --out '{}'", run, exp))).status ==
            0);
    // Real sentences, an empty line, a line of spaces, unknown words, no final newline.
    const auto test = cli::read_text_lines(run + "/test.src");
    const std::string input =
        test[0] + "\n\n   \n" + test[1] + " zz unknown\n" + test[2] + "\n" + test[3];
    write(dir / "input.txt", input);
    for (const char* flags : {"", "--beam 3 --nbest 3",
                              "--beam 4 --nbest 2 --length-penalty 0 --max-len-ratio 1 "
                              "--max-len-extra 2 --batch-size 2",
                              // Long limits (past the learned model's 32 positions).
                              "--beam 2 --max-len-ratio 4 --max-len-extra 40"}) {
      INFO(flags);
      CommandResult ours = shell(tapestry_cmd(
          fmt::format("translate --model '{}' {} < '{}'", run, flags, dir / "input.txt")));
      CommandResult theirs = shell(fmt::format("{} '{}/translate.py' {} < '{}'", kTorchPython, exp,
                                               flags, dir / "input.txt"));
      REQUIRE(ours.status == 0);
      REQUIRE(theirs.status == 0);
      const auto a = lines_of(ours.output), b = lines_of(theirs.output);
      CHECK(a.size() >= 6);
      REQUIRE(b.size() == a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("tapestry: " << a[i] << "\npytorch:  " << b[i]);
        const size_t cut = a[i].rfind(" ||| ");
        if (cut == std::string::npos) {
          CHECK(b[i] == a[i]);
          continue;
        }
        // Index and translation exactly; the score as printed, to 4 decimals, may differ by one
        // unit in its last digit where float32 rounding puts the two sides of a ...5 boundary.
        CHECK(b[i].substr(0, cut + 5) == a[i].substr(0, cut + 5));
        CHECK(std::abs(std::stod(b[i].substr(cut + 5)) - std::stod(a[i].substr(cut + 5))) <=
              1.000001e-4);
      }
    }
    if (c.base != kTrain) continue;  // 32 learned positions: no room for a long line
    // A line of more than 1024 tokens is cut to its first 1024 by both, and said so; the
    // translation (its first 3 tokens) depends on where: the tail differs from the head.
    const models::Preprocess prep = models::load_model(run + "/model.safetensors").preprocess;
    std::string line = test[4];
    while (prep.tokenize_source(line).size() < 1024) line += " " + test[4];
    for (int i = 0; i < 20; ++i) line += " " + test[5];
    write(dir / "long.txt", test[0] + "\n" + line + "\n");
    const char* flags = "--max-len-ratio 0 --max-len-extra 3";
    CommandResult ours = shell(tapestry_cmd(fmt::format("translate --model '{}' {} --input '{}'",
                                                        run, flags, dir / "long.txt")),
                               dir / "ours.err");
    CommandResult theirs = shell(fmt::format("{} '{}/translate.py' {} --input '{}'", kTorchPython,
                                             exp, flags, dir / "long.txt"),
                                 dir / "theirs.err");
    REQUIRE(ours.status == 0);
    REQUIRE(theirs.status == 0);
    CHECK(lines_of(theirs.output).size() == 2);
    CHECK(theirs.output == ours.output);
    CHECK_THAT(read(dir / "ours.err"), Contains("more than the 1024 a sentence may have"));
    CHECK_THAT(
        read(dir / "theirs.err"),
        Contains("translate.py: line 2: " + std::to_string(prep.tokenize_source(line).size()) +
                 " tokens, more than the 1024 a sentence may have; translating its first "
                 "1024"));
  }
}

TEST_CASE("tapestry bench --model and bench_exported.py time the same batches", "[export][torch]") {
  if (!torch_available()) {
    WARN("python3 with torch not found (" << kTorchPython
                                          << "): the recipe benchmark is not checked");
    return;
  }
  TempDir dir("bench_recipe");
  const std::string run = dir / "run", exp = dir / "export", batches = dir / "batches.json";
  REQUIRE(shell(tapestry_cmd(fmt::format("train {} --out '{}'", kTiny, run))).status == 0);
  REQUIRE(shell(tapestry_cmd(fmt::format("export --model '{}' --to pytorch --out '{}'", run, exp)))
              .status == 0);
  auto result = [](const CommandResult& s) {
    INFO(s.output);
    const auto at = s.output.rfind("RESULT ");
    REQUIRE(at != std::string::npos);
    return nlohmann::json::parse(s.output.substr(at + 7, s.output.find('\n', at) - at - 7));
  };
  const CommandResult t = shell(tapestry_cmd(fmt::format(
      "bench --model '{}' --src-text '{}/test.src' --tgt-text '{}/test.ref' --batch 8 --pool 2 "
      "--warmup 1 --iters 2 --threads 1 --dump-batches '{}'",
      run, run, run, batches)));
  REQUIRE(t.status == 0);
  const nlohmann::json tr = result(t);
  const CommandResult p =
      shell(fmt::format("{} '{}/tools/bench_exported.py' '{}' '{}' --warmup 1 --iters 2",
                        kTorchPython, TAPESTRY_SOURCE_DIR, exp, batches));
  REQUIRE(p.status == 0);
  const nlohmann::json pr = result(p);
  CHECK(tr["params"] == pr["params"]);
  CHECK(tr["pool"] == 2);
  CHECK(pr["pool"] == 2);
  CHECK(pr["batch"] == 8);
  CHECK(tr["train_ms_median"].get<double>() > 0);
  CHECK(pr["train_ms_median"].get<double>() > 0);
  // Without dropout the first step's loss, before any update, is the same function of the same
  // batch on both sides.
  CHECK(pr["loss_first"].get<double>() == Approx(tr["loss_first"].get<double>()).epsilon(1e-5));
  // A bad flag value is one line naming the flag.
  const CommandResult bad =
      shell(tapestry_cmd(fmt::format("bench --model '{}'", run)), dir / "err.txt");
  CHECK(bad.status == 2);
  CHECK_THAT(read(dir / "err.txt"), Contains("--src-text"));
}
