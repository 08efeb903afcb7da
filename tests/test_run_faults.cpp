// A run directory under faults: an epoch's save interrupted at every one of its writes (no space,
// file too large, killed) resumes exactly as the uninterrupted run went on, and the report reads
// what it left; a real file-size limit; output that cannot be written; the run directory's rules.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli_run.h"
#include "page_check.h"
#include "tapestry/nn/checkpoint.h"

using namespace tapestry;
using namespace tapestry::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// Three epochs of a tiny model, one core, each epoch better than the last (so each save writes a
// new best model as well).
constexpr const char* kRun =
    "--task reverse --min-len 3 --max-len 6 --symbols 8 --train-size 200 --valid-size 20 "
    "--test-size 20 --hidden 8 --emb 4 --batch-size 32 --threads 1 --optimizer sgd --quiet";

// `tapestry <args>` with `env` (VAR=value ...) before it; stdout and stderr apart.
struct Ran {
  int status = -1;  // -1: killed by a signal
  std::string out, err;
};
Ran run_env(const std::string& env, const std::string& args, const TempDir& dir) {
  const std::string err_path = dir / "stderr.txt";
  const std::string cmd = fmt::format("cd '{}' && {} '{}/tapestry' {} 2>'{}'", dir.str(), env,
                                      TAPESTRY_BINARY_DIR, args, err_path);
  const CommandResult c = run_command(cmd);
  Ran r;
  r.out = c.output;
  // The shell reports a child killed by signal s as exit status 128 + s.
  r.status = c.status < 128 ? c.status : -1;
  r.err = slurp(err_path);
  return r;
}

// The tensors of a safetensors file, by name.
std::map<std::string, std::vector<double>> tensors(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : nn::load_safetensors(path).tensors) out[name] = t.to_vector();
  return out;
}

// The metrics log without the fields that measure time.
std::vector<nlohmann::json> metrics(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* key : {"elapsed_seconds", "tokens_per_s", "epoch_seconds"}) j.erase(key);
    out.push_back(j);
  }
  return out;
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().filename().string());
  return out;
}

// The run `dir/name` holds what the uninterrupted run `dir/straight` holds.
void check_same_as_straight(const TempDir& dir, const std::string& name) {
  CHECK(tensors(dir / (name + "/last.safetensors")) == tensors(dir / "straight/last.safetensors"));
  CHECK(tensors(dir / (name + "/model.safetensors")) ==
        tensors(dir / "straight/model.safetensors"));
  CHECK(nn::read_checkpoint_metadata(dir / (name + "/model.safetensors")).at("epoch") ==
        nn::read_checkpoint_metadata(dir / "straight/model.safetensors").at("epoch"));
  CHECK(metrics(dir / (name + "/metrics.jsonl")) == metrics(dir / "straight/metrics.jsonl"));
  CHECK(temporaries(dir / name).empty());
  CHECK(!fs::exists(dir / (name + "/model.next.safetensors")));
}

// The file of every write of the run `dir/traced` (kRun for `epochs` epochs), in order: the
// write numbers that TAPESTRY_FAULT_INJECT counts, less one.
std::vector<std::string> traced_writes(const TempDir& dir, int epochs) {
  const Ran traced = run_env("TAPESTRY_FAULT_INJECT=trace:1",
                             fmt::format("train {} --epochs {} --out traced", kRun, epochs), dir);
  REQUIRE(traced.status == 0);
  std::vector<std::string> files;
  const std::regex line("tapestry: write (\\d+): (.*)");
  std::istringstream in(traced.err);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    REQUIRE(std::regex_match(l, m, line));
    REQUIRE(std::stoul(m[1]) == files.size() + 1);
    files.push_back(m[2]);
  }
  return files;
}

}  // namespace

TEST_CASE("an epoch's save interrupted at any of its writes resumes exactly", "[faults]") {
  TempDir dir("faults");
  REQUIRE(run_env("", fmt::format("train {} --epochs 3 --out straight", kRun), dir).status == 0);

  // Every write of the run, numbered, to find epoch 2's save: from the first write after epoch
  // 1's commit (last.safetensors) and its model's rename, to epoch 2's rename.
  const std::vector<std::string> files = traced_writes(dir, 3);  // files[n - 1]: write n's file
  auto is_last = [&](size_t i) {
    return files[i].find("/last.safetensors.tmp.") != std::string::npos;
  };
  std::vector<size_t> commits;  // the last write of each last.safetensors
  for (size_t i = 0; i + 1 < files.size(); ++i)
    if (is_last(i) && !is_last(i + 1)) commits.push_back(i);
  REQUIRE(commits.size() == 3);
  const size_t first = commits[0] + 2, last = commits[1] + 1;     // 0-based, inclusive
  REQUIRE(files[first - 1].ends_with("model.next.safetensors"));  // epoch 1's rename
  REQUIRE(files[last].ends_with("model.next.safetensors"));       // epoch 2's rename
  INFO("epoch 2's save: writes " << first + 1 << " to " << last + 1);
  CHECK(last - first > 50);  // the model, the log's line, the state, the rename

  int runs = 0;
  for (size_t n = first; n <= last; ++n) {
    for (const char* kind : {"enospc", "efbig", "kill"}) {
      INFO("fault " << kind << " at write " << n + 1 << " (" << files[n] << ")");
      fs::remove_all(dir / "r");
      const Ran failed = run_env(fmt::format("TAPESTRY_FAULT_INJECT={}:{}", kind, n + 1),
                                 fmt::format("train {} --epochs 3 --out r", kRun), dir);
      if (std::string(kind) == "kill") {
        CHECK(failed.status == -1);
      } else {
        // One line, naming the file and the system's reason; nothing temporary left.
        CHECK(failed.status == 1);
        CHECK_THAT(failed.err,
                   Contains("tapestry train: error: ") &&
                       Contains(kind == std::string("enospc") ? "No space left on device"
                                                              : "File too large"));
        CHECK(std::count(failed.err.begin(), failed.err.end(), '\n') == 1);
        CHECK(temporaries(dir / "r").empty());
      }
      // What the fault left: the report reads it (epoch 1 at least was committed).
      if (n % 7 == 0 || kind == std::string("kill")) {
        const Ran report = run_env("", "report --model r --samples 1 --max-sentences 4", dir);
        CHECK(report.status == 0);
        CHECK(report.err.find("error") == std::string::npos);
      }
      const Ran resumed = run_env("", "train --resume r --epochs 3", dir);
      INFO(resumed.err);
      REQUIRE(resumed.status == 0);
      check_same_as_straight(dir, "r");
      ++runs;
    }
  }
  CHECK(runs == static_cast<int>(3 * (last - first + 1)));
}

TEST_CASE("a run whose first epoch never saved resumes from the start", "[faults]") {
  TempDir dir("faults_first");
  REQUIRE(run_env("", fmt::format("train {} --epochs 2 --out straight", kRun), dir).status == 0);
  // Killed in epoch 1's first write of its model: command.json and the test split are there.
  const std::vector<std::string> files = traced_writes(dir, 2);
  const auto model = std::find_if(files.begin(), files.end(), [](const std::string& f) {
    return f.find("model.next.safetensors.tmp.") != std::string::npos;
  });
  REQUIRE(model != files.end());
  const auto n = model - files.begin() + 1;
  REQUIRE(run_env(fmt::format("TAPESTRY_FAULT_INJECT=kill:{}", n),
                  fmt::format("train {} --epochs 2 --out r", kRun), dir)
              .status == -1);
  CHECK(fs::exists(dir / "r/command.json"));
  CHECK(!fs::exists(dir / "r/last.safetensors"));
  const Ran resumed = run_env("", "train --resume r --epochs 2", dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.err, Contains("removed 'model.next.safetensors.tmp.") &&
                              Contains("left by an interrupted write"));
  check_same_as_straight(dir, "r");
}

TEST_CASE("a real file-size limit fails the save with a message, not a signal", "[faults]") {
  TempDir dir("faults_fsize");
  REQUIRE(run_env("", fmt::format("train {} --epochs 2 --out straight", kRun), dir).status == 0);
  // 8 KB: the test split and command.json fit, the first model does not. Without SIGXFSZ
  // ignored the signal would kill the program (status -1) with no word said.
  const Ran limited =
      run_env("ulimit -f 16 &&", fmt::format("train {} --epochs 2 --out r", kRun), dir);
  CHECK(limited.status == 1);
  CHECK_THAT(limited.err, Contains("tapestry train: error: ") && Contains("File too large"));
  CHECK(temporaries(dir / "r").empty());
  const Ran resumed = run_env("", "train --resume r --epochs 2", dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  check_same_as_straight(dir, "r");
}

TEST_CASE("a partial last line in metrics.jsonl is skipped by report and cut by resume",
          "[faults]") {
  TempDir dir("faults_partial");
  REQUIRE(run_env("", fmt::format("train {} --epochs 2 --out straight", kRun), dir).status == 0);
  REQUIRE(run_env("", fmt::format("train {} --epochs 1 --out r", kRun), dir).status == 0);
  {
    std::ofstream log(dir / "r/metrics.jsonl", std::ios::app);
    log << "{\"epoch\": 2, \"train_lo";  // a crash in the middle of a line
  }
  const Ran report = run_env("", "report --model r --samples 0", dir);
  CHECK(report.status == 0);
  CHECK_THAT(report.err, Contains("metrics.jsonl:2: a partial last line") && Contains("skipped"));
  const Ran resumed = run_env("", "train --resume r --epochs 2", dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.err, Contains("metrics.jsonl: dropped 1 line logged after epoch 1's save"));
  check_same_as_straight(dir, "r");
}

TEST_CASE("output that cannot be written is an error, not a silent exit 0", "[faults]") {
  TempDir dir("faults_full");
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full here: the full-disk case is not run");
    return;
  }
  REQUIRE(run_env("", fmt::format("train {} --epochs 1 --out r", kRun), dir).status == 0);
  std::ofstream(dir / "in.txt") << "a b c\nd e f\n";
  std::ofstream(dir / "ref.txt") << "c b a\nf e d\n";
  for (const char* args : {"gradcheck --list", "translate --model r --input in.txt",
                           "bleu in.txt ref.txt", "eval --model r", "help"}) {
    INFO(args);
    const Ran r = run_env("", std::string(args) + " >/dev/full", dir);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains("cannot write standard output: No space left on device"));
    CHECK(r.err.rfind("tapestry ", 0) == 0);
  }
}

TEST_CASE("the run directory: --out never writes over other files, --resume keeps its place",
          "[faults]") {
  TempDir dir("faults_dirs");
  fs::create_directories(dir / "mine");
  std::ofstream(dir / "mine/notes.txt") << "my notes\n";
  const Ran into_mine = run_env("", fmt::format("train {} --epochs 1 --out mine", kRun), dir);
  CHECK(into_mine.status == 1);
  CHECK_THAT(into_mine.err, Contains("--out 'mine' holds other files and is not a Tapestry run"));
  CHECK(slurp(dir / "mine/notes.txt") == "my notes\n");
  std::ofstream(dir / "afile") << "x";
  CHECK_THAT(run_env("", fmt::format("train {} --epochs 1 --out afile", kRun), dir).err,
             Contains("--out 'afile' exists and is not a directory"));

  REQUIRE(run_env("", fmt::format("train {} --epochs 1 --out r", kRun), dir).status == 0);
  const Ran moved = run_env("", "train --resume r --epochs 2 --out elsewhere", dir);
  CHECK(moved.status == 2);
  CHECK_THAT(moved.err, Contains("--out cannot move it"));
  CHECK(!fs::exists(dir / "elsewhere"));
  // The saved flags of a run never ask for help: said, with nothing printed and nothing run.
  std::ofstream(dir / "r/command.json", std::ios::trunc) << "[\"--help\"]\n";
  const Ran help = run_env("", "train --resume r --epochs 2", dir);
  CHECK(help.status == 1);
  CHECK_THAT(help.err, Contains("command.json' holds --help, not the flags of a run"));
  CHECK(help.out.empty());
}

TEST_CASE("a saved state with an absurd epoch or loss is refused by name", "[faults]") {
  TempDir dir("faults_state");
  REQUIRE(run_env("", fmt::format("train {} --epochs 1 --out r", kRun), dir).status == 0);
  const nn::SafetensorsFile saved = nn::load_safetensors(dir / "r/last.safetensors");
  struct Case {
    const char* key;
    const char* value;
    const char* says;
  };
  for (const Case& c : {Case{"epoch", "-3", "metadata epoch = '-3' is not a whole number"},
                        Case{"epoch", "1.5", "metadata epoch = '1.5' is not a whole number"},
                        Case{"best_valid_loss", "nan", "best_valid_loss = 'nan' is not a number"},
                        Case{"seconds", "-1", "seconds = '-1' is not a finite number"},
                        Case{"best_epoch", "7", "best_epoch = '7' is not a whole number in [0, 1]"},
                        Case{"metrics_bytes", "x", "metrics_bytes = 'x' is not a whole number"}}) {
    INFO(c.key << " = " << c.value);
    auto metadata = saved.metadata;
    metadata[c.key] = c.value;
    nn::save_safetensors(dir / "r/last.safetensors", saved.tensors, metadata);
    const Ran r = run_env("", "train --resume r --epochs 2", dir);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains("last.safetensors") && Contains(c.says));
  }
  // A parameter holding NaN is named too.
  nn::NamedTensors broken = saved.tensors;
  REQUIRE(broken.front().first.rfind("model.", 0) == 0);
  broken.front().second = broken.front().second.clone();
  broken.front().second.set(0, std::nan(""));
  nn::save_safetensors(dir / "r/last.safetensors", broken, saved.metadata);
  const Ran r = run_env("", "train --resume r --epochs 2", dir);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Contains("last.safetensors") &&
                        Contains(broken.front().first.substr(6) + " holds 1 NaN value"));
}
