// Shared by the tests of `tapestry export --to pytorch` (test_export.cpp and
// test_export_scripts.cpp): shell and file helpers, and the training flags and configurations the
// exports are made from.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "torch_run.h"

namespace tapestry::testing::exports {

namespace fs = std::filesystem;

// Runs a shell command; its standard error goes to `err_file` (or is dropped), so the result's
// output is its standard output only.
inline CommandResult shell(const std::string& cmd, const std::string& err_file = "/dev/null") {
  return run_command(cmd + " 2>'" + err_file + "'");
}

inline std::string tapestry_cmd(const std::string& args) {
  return fmt::format("'{}/tapestry' {}", TAPESTRY_BINARY_DIR, args);
}

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline bool python_available() {
  return fs::exists(kTorchPython);
}

// A tiny run for the bad-input checks (one epoch, seconds).
inline constexpr const char* kTiny =
    "--task reverse --min-len 3 --max-len 6 --symbols 8 --train-size 200 --valid-size 20 "
    "--test-size 20 --hidden 16 --emb 8 --batch-size 32 --threads 1 --test-beam 1 "
    "--valid-decode 0 --epochs 1 --quiet";

// Every configuration is trained on the same toy task for a few hundred steps: enough that the
// greedy choices are clear, not near-ties of an untrained model.
inline constexpr const char* kTrain =
    "--min-len 3 --max-len 8 --symbols 10 --train-size 2000 --valid-size 50 --test-size 50 "
    "--emb 16 --hidden 32 --batch-size 32 --epochs 5 --threads 1 --test-beam 1 "
    "--valid-decode 0 --quiet";

// The Transformers likewise, at the size of a toy (d 32, 2 heads, a feed-forward width of 64), for
// 20 epochs, a few seconds: at 5 they get a fifth of the test sentences right, at 20 most.
inline constexpr const char* kTrainTransformer =
    "--min-len 3 --max-len 8 --symbols 10 --train-size 2000 --valid-size 50 --test-size 50 "
    "--arch transformer --d-model 32 --heads 2 --ffn 64 --batch-size 32 --epochs 20 --threads 1 "
    "--test-beam 1 --valid-decode 0 --quiet";

struct Config {
  std::string name;           // also the directory name
  std::string flags;          // tapestry train flags beside `base`
  std::string base = kTrain;  // the flags every configuration of its architecture shares
};

inline std::vector<Config> configurations() {
  std::vector<Config> out;
  for (const char* cell : {"gru", "lstm", "rnn"})
    for (const char* decoder : {"bahdanau", "luong"})
      for (const char* attention : {"none", "bahdanau", "dot", "general", "concat", "scaled-dot",
                                    "cosine", "local-m", "local-p"}) {
        // dot, scaled-dot and cosine compare the decoder state with h_j: K = H, unidirectional.
        const std::string a = attention;
        const bool same_size = a == "dot" || a == "scaled-dot" || a == "cosine";
        out.push_back({fmt::format("{}-{}-{}", cell, decoder, attention),
                       fmt::format("--task reverse --cell {} --decoder {} --attention {}{}", cell,
                                   decoder, attention, same_size ? " --no-bidirectional" : "")});
      }
  out.push_back({"lstm-luong-general-2layers",
                 "--task reverse --cell lstm --decoder luong --attention general --layers 2 "
                 "--no-bidirectional"});
  out.push_back({"gru-bahdanau-bahdanau-2layers-nodeep",
                 "--task reverse --cell gru --decoder bahdanau --attention bahdanau --layers 2 "
                 "--no-deep-output --attn-size 24"});
  // Characters (the dates task), with spaces that become "_" and back.
  out.push_back({"gru-luong-local-p-chars",
                 "--task dates --cell gru --decoder luong --attention local-p --window 3"});
  return out;
}

// The Transformer of the 2017 paper (post-norm, ReLU, sinusoidal positions, its own output
// layer): torch_transformer.py's model; and the other choice of every option, with two layers.
inline std::vector<Config> transformer_configurations() {
  return {{"transformer-post-relu-sinusoidal", "--task reverse --enc-layers 1 --dec-layers 1",
           kTrainTransformer},
          {"transformer-pre-gelu-learned-shared",
           "--task reverse --enc-layers 2 --dec-layers 2 --norm pre --activation gelu "
           "--positions learned --max-positions 32 --share-embeddings",
           kTrainTransformer}};
}

}  // namespace tapestry::testing::exports
