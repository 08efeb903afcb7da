// Running `tapestry explain` from the explain tests, and rebuilding a step's batch from its JSON.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "page_check.h"
#include "shell_run.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/vocab.h"

namespace tapestry::testing {

using Run = CommandResult;  // its output: stdout and stderr together

inline Run run_shell(const std::string& cmd) {
  return run_command(cmd + " 2>&1");
}

inline Run explain(const std::string& args) {
  return run_shell(fmt::format("'{}/tapestry' explain {}", TAPESTRY_BINARY_DIR, args));
}

// A fresh directory for this process's files, removed at the end of the test.
struct ExplainDir {
  std::filesystem::path path;
  explicit ExplainDir(const std::string& tag = "explain") {
    path = std::filesystem::temp_directory_path() / fmt::format("tapestry_{}_{}", tag, getpid());
    std::filesystem::create_directories(path);
  }
  ~ExplainDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// explain's JSON for `args` (which must succeed).
inline nlohmann::json explain_json(const ExplainDir& dir, const std::string& args) {
  const std::string out = dir.file("explain.json");
  Run r = explain(fmt::format("{} --format json --out '{}'", args, out));
  INFO(r.output);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(slurp(out));
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// The whole teacher-forced sentence of one step's JSON as a batch of one: <bos> y*_0 .. y*_(T-2)
// in, y*_0 .. <eos> out.
inline models::Batch sentence_batch(const nlohmann::json& j) {
  models::Vocab src = models::Vocab::from_json(j["src_vocab"].dump());
  models::Vocab tgt = models::Vocab::from_json(j["tgt_vocab"].dump());
  models::Batch batch;
  batch.size = 1;
  for (const auto& w : j["source"]) batch.src.push_back(src.id(w.get<std::string>()));
  batch.src_len = static_cast<int64_t>(batch.src.size());
  batch.src_lengths = {batch.src_len};
  const auto sentence = j["target_sentence"].get<std::vector<std::string>>();
  batch.tgt_len = static_cast<int64_t>(sentence.size()) + 1;
  batch.tgt_in = {models::Vocab::kBos};
  for (const auto& w : sentence) {
    batch.tgt_in.push_back(tgt.id(w));
    batch.tgt_out.push_back(tgt.id(w));
  }
  batch.tgt_out.push_back(models::Vocab::kEos);
  batch.tgt_lengths = {batch.tgt_len};
  return batch;
}

// The same with every target but the JSON's step masked (<pad>), so the training loss is L_t.
inline models::Batch step_batch(const nlohmann::json& j) {
  models::Batch batch = sentence_batch(j);
  batch.tgt_out.assign(static_cast<size_t>(batch.tgt_len), models::Vocab::kPad);
  batch.tgt_out[j["step"].get<size_t>()] = j["target_id"].get<int32_t>();
  return batch;
}

}  // namespace tapestry::testing
