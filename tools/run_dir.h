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
  int64_t best_epoch = 0;      // the epoch DIR/model.safetensors comes from (0: none yet)
  // The length of DIR/metrics.jsonl that belongs to this state; -1 where unknown (a state saved
  // before the length was kept).
  int64_t metrics_bytes = -1;
};

// DIR/model.safetensors   the best model so far (tapestry translate/eval/report read it)
// DIR/last.safetensors    the last epoch's parameters and optimizer state, for --resume
// DIR/metrics.jsonl       one JSON object per epoch (and per --log-every steps)
// DIR/command.json        the flags the run was started with
// DIR/test.src, test.ref  the test split as text, one sentence per line
// DIR/result.json         the best model's test scores
// DIR/epochs/             with --average-last N: the last N epochs' models (written before the
//                         epoch commits, the oldest removed after), and DIR/averaged.safetensors
//                         their average, written at the end
//
// An epoch's end is a transaction whose commit is writing last.safetensors: a better model goes
// first to DIR/model.next.safetensors, the epoch's line is appended to metrics.jsonl, then
// last.safetensors is replaced (recording the log's length and the best model's epoch), and only
// then model.next.safetensors is renamed over model.safetensors. Whatever write fails or is
// killed, recover() brings the directory back to the state last.safetensors describes.
class RunDir {
 public:
  RunDir() = default;
  // Creates DIR (and parents). Throws Error if it already holds a run (use --resume or another
  // --out), holds other files (never written over), is not a directory, or cannot be created.
  static RunDir create(const std::string& dir);
  // The checks of create() alone, to refuse a bad --out before any work.
  static void check_new(const std::string& dir);
  // Opens an existing run (its command.json); throws Error naming what is missing.
  static RunDir open(const std::string& dir);

  const std::string& path() const { return dir_; }
  std::string model_path() const { return dir_ + "/model.safetensors"; }
  // Where an epoch's better model waits until the epoch is committed.
  std::string next_model_path() const { return dir_ + "/model.next.safetensors"; }
  std::string file(const char* name) const { return dir_ + "/" + name; }
  // train --average-last N: the last N epochs' models, DIR/epochs/epoch-E.safetensors.
  std::string epoch_model_path(int64_t epoch) const;
  // Those files in epoch order (epoch, path); only names of that form count.
  std::vector<std::pair<int64_t, std::string>> epoch_models() const;
  bool has_state() const;  // whether an epoch was committed (last.safetensors exists)

  void write_command(const Args& args) const;
  Args read_command() const;
  // test.src and test.ref, and test.align where every example knows its true alignment.
  void write_test_split(const std::vector<models::Example>& test,
                        const models::Preprocess& prep) const;
  void append_metrics(const std::string& json_line) const;
  void write_result(const std::string& json) const;

  // Commits an epoch: last.safetensors with the parameters, the optimizer state and `st`
  // (metrics_bytes is taken from metrics.jsonl as it is now).
  void save_state(nn::Module& model, const nn::Optimizer& opt, RunState st) const;
  // After the commit: model.next.safetensors becomes model.safetensors.
  void promote_next_model() const;
  // Restores parameters and optimizer state saved by save_state; throws nn::CheckpointError,
  // also for a state whose epoch, losses or lengths are absurd (naming the key).
  RunState load_state(nn::Module& model, nn::Optimizer& opt) const;
  // Brings the directory back to `st` (a fresh RunState where no epoch was committed): removes
  // temporary files a killed write left, finishes or undoes a model.next.safetensors, and cuts
  // metrics.jsonl back to the committed length. Returns what it did, a sentence each.
  std::vector<std::string> recover(const RunState& st) const;

 private:
  explicit RunDir(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The whole file; throws Error naming the path and the system's reason.
std::string read_file(const std::string& path);

}  // namespace tapestry::cli
