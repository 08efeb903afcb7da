// tapestry export --to pytorch: tiny trained models of every attention variant, decoder and cell,
// and Transformers, translate and score in PyTorch exactly as Tapestry does; bad input is
// refused. The PyTorch checks are skipped (with a warning) where /usr/bin/python3 has no torch.
// The exported scripts' own behaviour (bounds, translate.py, bench_exported.py) is in
// test_export_scripts.cpp.
#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_run.h"
#include "export_fixtures.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/nn/checkpoint.h"
#include "tools/export_pytorch.h"
#include "tools/text_files.h"
#include "torch_run.h"

using namespace tapestry;
using namespace tapestry::testing;
using namespace tapestry::testing::exports;
using Catch::Contains;

namespace {

// What the C++ side gives for one configuration.
struct CppResult {
  std::string error;            // a failed command, with its output
  std::string greedy, beam;     // tapestry translate's output
  std::vector<double> losses;   // per test pair, each pair a batch of its own
  std::vector<int64_t> tokens;  // target tokens per pair (with <eos>)
  double corpus_loss = 0;       // evaluate_loss over all pairs, batched
};

// Trains, exports and translates (greedy and beam `beam`) one configuration in `dir` (run by
// worker threads).
void run_config(const Config& c, const std::string& dir, int beam, CppResult& r) {
  const std::string run = dir + "/run", exp = dir + "/export", err = dir + "/stderr.txt";
  auto step = [&](const std::string& args, std::string* out) {
    CommandResult s = shell(tapestry_cmd(args), err);
    if (s.status != 0 && r.error.empty())
      r.error = fmt::format("tapestry {} -> status {}: {}{}", args, s.status, s.output, read(err));
    if (out) *out = s.output;
    return s.status == 0;
  };
  fs::create_directories(dir);
  if (!step(fmt::format("train {} {} --out '{}'", c.base, c.flags, run), nullptr)) return;
  if (!step(fmt::format("export --model '{}' --to pytorch --out '{}'", run, exp), nullptr)) return;
  if (!step(fmt::format("translate --model '{}' --input '{}/test.src'", run, run), &r.greedy))
    return;
  step(fmt::format("translate --model '{}' --input '{}/test.src' --beam {}", run, run, beam),
       &r.beam);
}

// The teacher-forced losses in Tapestry, in eval mode: each pair alone, and the corpus batched.
void cpp_losses(const std::string& run, CppResult& r) {
  models::SavedModel m = models::load_model(run + "/model.safetensors");
  m.model->eval();
  const auto src = cli::read_text_lines(run + "/test.src");
  const auto ref = cli::read_text_lines(run + "/test.ref");
  std::vector<models::EncodedPair> pairs;
  for (size_t i = 0; i < src.size(); ++i)
    pairs.push_back({m.src.encode(m.preprocess.tokenize_source(src[i])),
                     m.tgt.encode(m.preprocess.tokenize_target(ref[i]))});
  for (size_t i = 0; i < pairs.size(); ++i) {
    const int64_t row[] = {static_cast<int64_t>(i)};
    models::Batch b = models::make_batch(pairs, row);
    Tape tape;
    NoGrad no_grad(tape);
    r.losses.push_back(m.model->loss(tape, b).value().item());
    r.tokens.push_back(b.target_tokens());
  }
  r.corpus_loss = models::evaluate_loss(*m.model, pairs, 64).loss;
}

// One python process for a list of exports: imports each one's translate.py and runs it four
// times (greedy, beam search, --loss in float32 and float64), as `python3 translate.py ...`
// would.
const char* kDriver = R"PY(
import contextlib, importlib, io, json, sys, time
import torch

torch.set_num_threads(1)
jobs = json.load(open(sys.argv[1]))
results = {}
for job in jobs:
    for name in ("model", "preprocess", "translate"):
        sys.modules.pop(name, None)
    sys.path.insert(0, job["dir"])
    translate = importlib.import_module("translate")
    sys.path[:] = [p for p in sys.path if p != job["dir"]]

    def run(*args):
        out = io.StringIO()
        code = translate.main(list(args), stdout=out)
        assert code == 0, (job, args, code)
        return out.getvalue()

    start = time.time()
    src, ref = job["src"], job["ref"]
    results[job["name"]] = {
        "greedy": run("--input", src),
        "beam": run("--input", src, "--beam", str(job["beam"])),
        "loss": json.loads(run("--loss", src, ref)),
        "loss64": json.loads(run("--loss", src, ref, "--dtype", "float64")),
        "seconds": time.time() - start,
    }
json.dump(results, open(sys.argv[2], "w"))
)PY";

// Loads torch_transformer.py's own model class, gives it an export's weights (strictly: the same
// names and shapes, none left over) and prints both models' loss on the export's test pairs, in
// float64.
const char* kTransformerReference = R"PY(
import importlib.util, json, os, sys
import torch

reference_path, export, src_path, ref_path = sys.argv[1:5]
sys.argv = ["torch_transformer.py"]  # the module parses its arguments on import
spec = importlib.util.spec_from_file_location("reference", reference_path)
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)
sys.path.insert(0, export)
import model
from preprocess import Preprocess, Vocab

c = model.Config.load(os.path.join(export, "config.json"))
weights = model.read_safetensors(os.path.join(export, "weights.safetensors"))
theirs = reference.TransformerSeq2Seq(c.src_vocab, c.tgt_vocab, c.d_model, c.heads, c.enc_layers,
                                      c.dec_layers, c.ffn, c.dropout, 64)
theirs.load_state_dict(weights, strict=True)
theirs = theirs.double().eval()
ours = model.load_model(export, torch.float64)
prep = Preprocess.load(os.path.join(export, "preprocess.json"))
src_vocab = Vocab.load(os.path.join(export, "src_vocab.json"))
tgt_vocab = Vocab.load(os.path.join(export, "tgt_vocab.json"))
pairs = [(src_vocab.encode(prep.tokenize(s)), tgt_vocab.encode(prep.tokenize(r)))
         for s, r in zip(open(src_path).read().splitlines(), open(ref_path).read().splitlines())]
batch = model.make_batch(pairs)
with torch.no_grad():
    print(json.dumps({
        "ours": ours.loss(batch).item(),
        "theirs": theirs(batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out).item(),
        "keys": sorted(ours.state_dict()) == sorted(weights)}))
)PY";

// Runs the driver over `names` (a share of the configurations) in `dir`; returns its results.
nlohmann::json run_driver(const std::string& dir, const std::string& tag,
                          const std::vector<std::string>& names, const std::string& work,
                          int beam) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& name : names)
    jobs.push_back({{"name", name},
                    {"beam", beam},
                    {"dir", work + "/" + name + "/export"},
                    {"src", work + "/" + name + "/run/test.src"},
                    {"ref", work + "/" + name + "/run/test.ref"}});
  const std::string in = dir + "/jobs-" + tag + ".json", out = dir + "/results-" + tag + ".json";
  write(in, jobs.dump());
  CommandResult s = shell(fmt::format("{} '{}/driver.py' '{}' '{}'", kTorchPython, dir, in, out),
                          dir + "/driver-" + tag + ".err");
  if (s.status != 0)
    return {
        {"error", fmt::format("driver {} failed: {}", tag, read(dir + "/driver-" + tag + ".err"))}};
  return nlohmann::json::parse(read(out));
}

double relative(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-30);
}

// Trains, exports and translates every configuration (greedy and beam `beam`) in `dir`, two at a
// time, then checks that the exports translate the test sentences as Tapestry does, token for
// token, and score each pair to `tolerance` relative (1e-5 over each corpus); prints the counts
// under `what`.
void check_parity(const TempDir& dir, const std::vector<Config>& configs, int beam,
                  double tolerance, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  write(dir / "driver.py", kDriver);
  std::vector<CppResult> cpp(configs.size());
  const std::string work = dir / "configs";

  // Train, export and translate two configurations at a time (one per core).
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < configs.size();)
      run_config(configs[i], work + "/" + configs[i].name, beam, cpp[i]);
  };
  {
    std::thread a(worker), b(worker);
    a.join();
    b.join();
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    INFO(configs[i].name);
    REQUIRE(cpp[i].error.empty());
  }
  for (size_t i = 0; i < configs.size(); ++i)
    cpp_losses(work + "/" + configs[i].name + "/run", cpp[i]);

  // PyTorch: two driver processes, each over half the configurations.
  std::vector<std::string> half[2];
  for (size_t i = 0; i < configs.size(); ++i) half[i % 2].push_back(configs[i].name);
  nlohmann::json py[2];
  {
    std::thread a([&] { py[0] = run_driver(dir.str(), "0", half[0], work, beam); });
    std::thread b([&] { py[1] = run_driver(dir.str(), "1", half[1], work, beam); });
    a.join();
    b.join();
  }
  for (const auto& p : py) {
    INFO(p.dump());
    REQUIRE_FALSE(p.contains("error"));
  }

  size_t sentences = 0, same_greedy = 0, same_beam = 0;
  double max_rel = 0, max_rel64 = 0, max_corpus_rel = 0;
  std::string worst;
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    const nlohmann::json& r = py[i % 2].at(c.name);
    INFO(c.name << " (" << c.flags << ")");
    const auto cg = lines_of(cpp[i].greedy), pg = lines_of(r["greedy"].get<std::string>());
    const auto cb = lines_of(cpp[i].beam), pb = lines_of(r["beam"].get<std::string>());
    REQUIRE(cg.size() == 50);
    REQUIRE(pg.size() == cg.size());
    REQUIRE(cb.size() == cg.size());
    REQUIRE(pb.size() == cb.size());
    for (size_t k = 0; k < cg.size(); ++k) {
      INFO("sentence " << k + 1);
      CHECK(pg[k] == cg[k]);
      CHECK(pb[k] == cb[k]);
      same_greedy += pg[k] == cg[k];
      same_beam += pb[k] == cb[k];
    }
    sentences += cg.size();

    const nlohmann::json& loss = r["loss"]["sentences"];
    const nlohmann::json& loss64 = r["loss64"]["sentences"];
    REQUIRE(loss.size() == cpp[i].losses.size());
    for (size_t k = 0; k < loss.size(); ++k) {
      INFO("sentence " << k + 1 << ": tapestry " << cpp[i].losses[k] << ", pytorch "
                       << loss[k]["loss"].get<double>());
      CHECK(loss[k]["tokens"].get<int64_t>() == cpp[i].tokens[k]);
      const double rel = relative(loss[k]["loss"].get<double>(), cpp[i].losses[k]);
      CHECK(rel < tolerance);
      if (rel > max_rel) max_rel = rel, worst = c.name;
      max_rel64 = std::max(max_rel64, relative(loss64[k]["loss"].get<double>(), cpp[i].losses[k]));
    }
    const double corpus_rel = relative(r["loss"]["loss"].get<double>(), cpp[i].corpus_loss);
    CHECK(corpus_rel < 1e-5);
    max_corpus_rel = std::max(max_corpus_rel, corpus_rel);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "export parity ({}): {} configurations, {} sentences: greedy {} identical, beam {} {} "
      "identical; loss max relative difference {:.2e} per sentence ({}), {:.2e} over each "
      "corpus; PyTorch in float64 against Tapestry's float32: {:.2e}; {:.0f} s\n",
      what, configs.size(), sentences, same_greedy, beam, same_beam, max_rel, worst, max_corpus_rel,
      max_rel64, seconds);
}

}  // namespace

TEST_CASE("export refuses bad input with one clear line and writes nothing", "[cli][export]") {
  TempDir dir("export_bad");
  auto check = [&](const std::string& args, int status, const std::string& says) {
    CommandResult r = run_tapestry(args, dir.str());
    INFO(args << "\n" << r.output);
    CHECK(r.status == status);
    CHECK_THAT(r.output, Contains(says));
    CHECK(lines_of(r.output).size() == 1);
  };
  check("export --to pytorch --out out", 2, "tapestry export: --model is required");
  check("export --model run --to onnx --out out", 2,
        "tapestry export: --to: 'onnx' is not a valid value (valid: pytorch)");
  check("export --model run --to pytorch", 2, "tapestry export: --out is required");
  check("export --model nowhere --out out", 1,
        "tapestry export: error: model 'nowhere' does not exist");
  CHECK_FALSE(fs::exists(dir / "out"));

  REQUIRE(run_tapestry(fmt::format("train {} --out run", kTiny), dir.str()).status == 0);
  // An --out that holds files is refused and left as it was.
  fs::create_directories(dir / "full");
  write(dir / "full/notes.txt", "mine\n");
  check("export --model run --out full", 1,
        "tapestry export: error: 'full' exists and is not empty: give a new or empty directory "
        "(nothing is overwritten)");
  CHECK(read(dir / "full/notes.txt") == "mine\n");
  CHECK(std::distance(fs::directory_iterator(dir / "full"), fs::directory_iterator()) == 1);
  write(dir / "file", "x");
  check("export --model run --out file", 1, "'file' exists and is not a directory");
  // No temporary directory is left behind.
  for (const auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);

  // An empty directory is fine: it becomes the package.
  fs::create_directories(dir / "empty");
  CommandResult ok = run_tapestry("export --model run --to pytorch --out empty/", dir.str());
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  CHECK_THAT(ok.output, Contains("exported run/model.safetensors to empty/: model.py"));
  for (const char* f :
       {"model.py", "preprocess.py", "translate.py", "README.md", "config.json", "src_vocab.json",
        "tgt_vocab.json", "preprocess.json", "weights.safetensors"})
    CHECK(fs::exists(dir / ("empty/" + std::string(f))));
  // The weights keep their names and values.
  nn::SafetensorsFile model = nn::load_safetensors(dir / "run/model.safetensors");
  nn::SafetensorsFile weights = nn::load_safetensors(dir / "empty/weights.safetensors");
  REQUIRE(model.tensors.size() == weights.tensors.size());
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    CHECK(model.tensors[i].first == weights.tensors[i].first);
    CHECK(model.tensors[i].second.to_vector() == weights.tensors[i].second.to_vector());
  }
  CHECK(nlohmann::json::parse(read(dir / "empty/config.json")) ==
        nlohmann::json::parse(model.metadata.at("config")));
  CHECK(nlohmann::json::parse(read(dir / "empty/tgt_vocab.json")) ==
        nlohmann::json::parse(model.metadata.at("tgt_vocab")));
  check("export --model run --out empty", 1, "'empty' exists and is not empty");
}

TEST_CASE("the exported preprocess.py tokenises and joins text as Tapestry does", "[export]") {
  if (!python_available()) {
    WARN("no /usr/bin/python3: the exported preprocessing is not checked");
    return;
  }
  TempDir dir("export_text");
  write(dir / "preprocess.py", std::string(cli::pytorch_preprocess_py()));
  const std::vector<std::string> lines = {
      "Über DAS Café, l'homme!",
      "  ÀÉÎÕÜ àéîõü ÇÑÝŸ ĀĂĄĆČĎĐĒĘĚĞĠĦĨĪĮİĲĴĶĹĻĽĿŁŃŅŇŊŌŐŒŔŘŚŞŠŢŤŦŨŪŬŮŰŲŴŶŹŻŽ ſ ŉ ĸ ß Æ Ø ×  ",
      "ΑΒΓ ΣΩ Ϊ АБВГД ЯЁЂЏ Ѐ ǅ",
      "«Bonjour», dit-il… „Guten Tag“ — ¿Qué? ¡Sí! (a) [b] {c}; d: \"e\" – f",
      "tab\there\u00a0nbsp\u2003em-space\r",
      "Je suis CONTENT !? N'est-ce pas... 3 €?",
      "",
      "   ",
      "a_b c",
      "E.S.E. sells 3.50, 1,000 (\"big\") “Ulysses”, „Faust“ for 2 . 5 at I. A"};
  std::vector<models::Preprocess> modes(6);
  modes[1].text.lowercase = true;
  modes[2].text.split_punctuation = true;
  modes[3].text = {true, true};
  modes[4].mode = models::Preprocess::Mode::chars;
  modes[5].mode = models::Preprocess::Mode::tutorial;
  nlohmann::json cases = nlohmann::json::array(), expected = nlohmann::json::array();
  for (const auto& p : modes)
    for (const auto& line : lines) {
      const auto tokens = p.tokenize_source(line);
      cases.push_back({{"preprocess", nlohmann::json::parse(p.to_json())}, {"line", line}});
      expected.push_back({{"tokens", tokens}, {"text", p.detokenize_target(tokens)}});
    }
  write(dir / "cases.json", cases.dump());
  write(dir / "check.py", R"PY(
import json, sys
sys.path.insert(0, sys.argv[1])
from preprocess import Preprocess
out = []
for case in json.load(open(sys.argv[2], encoding="utf-8")):
    p = Preprocess(**{"mode": case["preprocess"]["mode"],
                      "lowercase": case["preprocess"]["lowercase"],
                      "split_punctuation": case["preprocess"]["split_punctuation"]})
    tokens = p.tokenize(case["line"])
    out.append({"tokens": tokens, "text": p.detokenize(tokens)})
print(json.dumps(out))
)PY");
  CommandResult s = shell(fmt::format("{} '{}' '{}' '{}'", kTorchPython, dir / "check.py",
                                      dir.str(), dir / "cases.json"));
  REQUIRE(s.status == 0);
  const nlohmann::json got = nlohmann::json::parse(s.output);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(cases[i].dump());
    CHECK(got[i] == expected[i]);
  }
}

TEST_CASE("exported PyTorch models translate and score exactly as Tapestry does",
          "[export][torch]") {
  if (!torch_available()) {
    WARN("python3 with torch not found (" << kTorchPython
                                          << "): the PyTorch export is not checked");
    return;
  }
  TempDir dir("export_parity");
  check_parity(dir, configurations(), 3, 1e-5, "rnn");
}

TEST_CASE("exported PyTorch Transformers translate and score exactly as Tapestry does",
          "[export][torch][transformer]") {
  if (!torch_available()) {
    WARN("python3 with torch not found (" << kTorchPython
                                          << "): the Transformer's export is not "
                                             "checked");
    return;
  }
  TempDir dir("export_transformer");
  const std::vector<Config> configs = transformer_configurations();
  // A pair's loss, about 0.05 here, goes through LayerNorms, GELU and 2 layers of attention in
  // float32 on either side: each is within 1e-5 of PyTorch's float64 (Tapestry 8.1e-6, PyTorch
  // 9.9e-6 at worst), so the two may differ by twice that.
  check_parity(dir, configs, 5, 3e-5, "transformer");

  // The package describes a Transformer, and holds no RNN.
  for (const Config& c : configs) {
    INFO(c.name);
    const std::string exp = dir / ("configs/" + c.name + "/export");
    const std::string readme = read(exp + "/README.md"), model = read(exp + "/model.py");
    CHECK_THAT(readme, Contains("A Transformer encoder-decoder trained by Tapestry"));
    CHECK_THAT(readme, Contains("`torch.nn.TransformerEncoderLayer`"));
    CHECK_THAT(readme, !Contains("Bahdanau"));
    CHECK_THAT(model, Contains("self.transformer = nn.Transformer("));
    CHECK_THAT(model, !Contains("class Encoder("));
  }
  const std::string post = read(dir / "configs/transformer-post-relu-sinusoidal/export/README.md");
  CHECK_THAT(post, Contains("post-norm (x = LN(x + sublayer(x))"));
  CHECK_THAT(post, Contains("plus sinusoidal positions"));
  CHECK_THAT(post, Contains("`generator` (`nn.Linear`)"));
  const std::string pre =
      read(dir / "configs/transformer-pre-gelu-learned-shared/export/README.md");
  CHECK_THAT(pre, Contains("`norm_first=True`"));
  CHECK_THAT(pre, Contains("learned positions (`src_pos`, `tgt_pos`, 32 rows each"));
  CHECK_THAT(pre, Contains("with GELU"));
  CHECK_THAT(pre, Contains("`tgt_emb.weight` (shared)"));

  // The 2017 configuration is torch_transformer.py's model: it takes the weights as they are and
  // computes the same loss.
  const fs::path reference =
      fs::path(TAPESTRY_SOURCE_DIR) / ".." / "shared" / "bench" / "torch_transformer.py";
  if (!fs::exists(reference)) {
    WARN("the reference " << reference.string()
                          << " not found: the export is not compared with it");
    return;
  }
  write(dir / "reference.py", kTransformerReference);
  const std::string base = dir / "configs/transformer-post-relu-sinusoidal";
  CommandResult s =
      shell(fmt::format("{} '{}' '{}' '{}/export' '{}/run/test.src' '{}/run/test.ref'",
                        kTorchPython, dir / "reference.py", reference.string(), base, base, base),
            dir / "reference.err");
  INFO(read(dir / "reference.err"));
  REQUIRE(s.status == 0);
  const nlohmann::json r = nlohmann::json::parse(s.output);
  INFO(r.dump());
  CHECK(r["keys"].get<bool>());
  // The reference computes its sinusoids in float32, the export in float64 (as Tapestry does).
  CHECK(relative(r["ours"].get<double>(), r["theirs"].get<double>()) < 1e-6);
  fmt::print(
      "export: torch_transformer.py's model on the exported weights: loss {:.9f}, the "
      "export's {:.9f}\n",
      r["theirs"].get<double>(), r["ours"].get<double>());
}

TEST_CASE("exported subword models segment, translate and score exactly as Tapestry does",
          "[export][torch][subword]") {
  if (!torch_available() ||
      shell(fmt::format("{} -c 'import sentencepiece; print(\"yes\")'", kTorchPython))
              .output.find("yes") == std::string::npos) {
    WARN("python3 with torch and sentencepiece not found (" << kTorchPython
                                                            << "): subword exports not checked");
    return;
  }
  TempDir dir("export_subword");
  // A cased corpus with accents: 100 sentences, their words reversed as the translation; the
  // first 50 are the test split.
  const char* subjects[] = {"Ein Mann", "Eine Frau", "Zwei Kinder", "Der Hund", "Die Ärztin"};
  const char* verbs[] = {"läuft", "springt", "schläft", "isst", "grüßt"};
  const char* places[] = {"im Park.", "über die Straße.", "am Strand.", "vor dem Café."};
  std::string de, en, test_de, test_en;
  int n = 0;
  for (const char* a : subjects)
    for (const char* v : verbs)
      for (const char* p : places) {
        const std::string line = fmt::format("{} {} {}", a, v, p);
        std::vector<std::string> w;
        std::istringstream in(line);
        for (std::string x; in >> x;) w.push_back(x);
        std::string rev;
        for (auto it = w.rbegin(); it != w.rend(); ++it) {
          if (!rev.empty()) rev += ' ';
          rev += *it;
        }
        de += line + "\n";
        en += rev + "\n";
        if (n++ < 50) {
          test_de += line + "\n";
          test_en += rev + "\n";
        }
      }
  write(dir / "train.de", de);
  write(dir / "train.en", en);
  write(dir / "test.de", test_de);
  write(dir / "test.en", test_en);
  const std::string base = fmt::format(
      "--train-prefix '{0}/train' --valid-prefix '{0}/test' --test-prefix '{0}/test' --src de "
      "--tgt en --vocab-size 320 --batch-size 16 --epochs 30 --threads 1 --test-beam 1 "
      "--valid-decode 0 --quiet",
      dir.str());
  const std::vector<Config> configs = {
      {"gru-bpe-joint", "--subword bpe --joint-vocab --emb 16 --hidden 32", base},
      {"transformer-unigram",
       "--subword unigram --arch transformer --d-model 32 --heads 2 --ffn 64", base}};
  check_parity(dir, configs, 3, 3e-5, "subword");
  // The package holds the SentencePiece models its preprocess.json names.
  CHECK(fs::exists(dir / "configs/gru-bpe-joint/export/source.model"));
  CHECK_FALSE(fs::exists(dir / "configs/gru-bpe-joint/export/target.model"));
  CHECK(fs::exists(dir / "configs/transformer-unigram/export/target.model"));
  const std::string prep = read(dir / "configs/transformer-unigram/export/preprocess.json");
  CHECK_THAT(prep, Contains("\"target.model\""));
}
