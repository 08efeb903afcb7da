// RunDir: the files of one training run (model, resumable state, metrics, test split, command).
#pragma once

#include <string>
#include <vector>

#include "tapestry/core/file_io.h"
#include "tapestry/models/example.h"
#include "tapestry/models/preprocess.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/nn/optim.h"
#include "tools/cli.h"

namespace tapestry::cli {

struct RunState {
  int64_t epoch = 0;           // epochs completed
  double best_valid_loss = 0;  // the loss of DIR/model.safetensors
  double seconds = 0;          // training time so far
};

// DIR/model.safetensors   the best model so far (tapestry translate/eval/report read it)
// DIR/last.safetensors    the last epoch's parameters and optimizer state, for --resume
// DIR/metrics.jsonl       one JSON object per epoch
// DIR/command.json        the flags the run was started with
// DIR/test.src, test.ref  the test split as text, one sentence per line
// DIR/result.json         the best model's test scores
class RunDir {
 public:
  RunDir() = default;
  // Creates DIR (and parents). Throws Error if it already holds a run (use --resume or another
  // --out) or cannot be created.
  static RunDir create(const std::string& dir);
  // Opens an existing run; throws Error naming what is missing.
  static RunDir open(const std::string& dir);

  const std::string& path() const { return dir_; }
  std::string model_path() const { return dir_ + "/model.safetensors"; }
  std::string file(const char* name) const { return dir_ + "/" + name; }

  void write_command(const Args& args) const;
  Args read_command() const;
  // test.src and test.ref, and test.align where every example knows its true alignment.
  void write_test_split(const std::vector<models::Example>& test,
                        const models::Preprocess& prep) const;
  void append_metrics(const std::string& json_line) const;
  void write_result(const std::string& json) const;

  void save_state(nn::Module& model, const nn::Optimizer& opt, const RunState& st) const;
  // Restores parameters and optimizer state saved by save_state; throws nn::CheckpointError.
  RunState load_state(nn::Module& model, nn::Optimizer& opt) const;

 private:
  explicit RunDir(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The whole file; throws Error naming the path and the system's reason.
std::string read_file(const std::string& path);

}  // namespace tapestry::cli
