// tapestry average: one model whose parameters are the mean of several checkpoints of a run.
#include <fmt/format.h>

#include <filesystem>

#include "tapestry/models/average.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/run_dir.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAbout =
    "Averages the parameters of checkpoints of one run (the same model, vocabularies and text\n"
    "processing) into one model, which often translates better than any of them. A run\n"
    "directory stands for the epochs' models that `train --average-last N` kept\n"
    "(DIR/epochs/epoch-E.safetensors); --last takes only the latest of them.\n\n"
    "examples:\n"
    "  tapestry average runs/m30k --out runs/m30k/averaged.safetensors\n"
    "  tapestry average a.safetensors b.safetensors c.safetensors --out abc.safetensors";

}  // namespace

int cmd_average(const Args& args) {
  std::string out;
  int64_t last = 0;
  Flags f("tapestry average (FILE | DIR)... --out FILE [--last N]", kAbout);
  f.add("out", &out, "the averaged model's file (required)");
  f.add("last", &last, "of a run directory's epoch models, only the last N (0: all)", 0, 1000000);
  std::vector<std::string> inputs;
  f.add_rest("CHECKPOINT", &inputs, "checkpoint files, or run directories");
  if (!f.parse(args)) return 0;
  if (out.empty()) throw UsageError{"--out is required (the averaged model's file)"};
  if (inputs.empty())
    throw UsageError{"give the checkpoints to average (files or run directories)"};
  check_output_file("--out", out);
  std::vector<std::string> paths;
  for (const std::string& in : inputs) {
    if (!fs::is_directory(in)) {
      paths.push_back(model_file(in));
      continue;
    }
    auto epochs = RunDir::open(in).epoch_models();
    if (epochs.empty())
      throw Error(
          fmt::format("'{}' has no epoch models (DIR/epochs/epoch-E.safetensors): train it with "
                      "--average-last N, or give checkpoint files",
                      in));
    if (last > 0 && static_cast<int64_t>(epochs.size()) > last)
      epochs.erase(epochs.begin(), epochs.end() - last);
    for (const auto& e : epochs) paths.push_back(e.second);
  }
  models::SavedModel m = models::average_models(paths);
  models::save_model(out, *m.model, m.src, m.tgt, m.preprocess, m.metadata);
  fmt::print("averaged {} checkpoint{} into {}\n", paths.size(), paths.size() == 1 ? "" : "s", out);
  for (const auto& p : paths) fmt::print("  {}\n", p);
  return 0;
}

}  // namespace tapestry::cli
