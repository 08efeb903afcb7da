// Export to PyTorch: a trained model as a self-contained package of Python sources, weights,
// vocabularies and preprocessing, written into a new directory all at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tapestry/models/saved_model.h"

namespace tapestry::cli {

// The fixed Python sources, the same for every configuration of an architecture: each reads
// config.json, weights.safetensors, the vocabularies and preprocess.json from its own directory.
// model.py: the architecture's modules, then the part both share (batches, the loss, greedy and
// beam search, loading).
std::string pytorch_model_py(models::Arch arch);
std::string_view pytorch_preprocess_py();  // preprocess.py: tokenisation and vocabularies
std::string_view pytorch_translate_py();   // translate.py: the command line
// The parts of model.py: each architecture's opening (docstring, imports, Config, modules,
// Seq2Seq and its decoding state), and the part both share.
std::string_view pytorch_rnn_py();
std::string_view pytorch_transformer_py();
std::string_view pytorch_common_py();

// README.md of the package: how to use it, this model's shape and the model's conventions.
// `source` is the checkpoint the model came from.
std::string pytorch_readme(const models::SavedModel& m, const std::string& source);

struct ExportResult {
  std::string dir;                 // the package's directory
  std::vector<std::string> files;  // the files written there, in the order written
};

// Writes the package of the model in the checkpoint `model_path` into the directory `out`, which
// must not exist or be empty (never overwritten otherwise). The files go into a temporary
// directory beside `out` that is renamed to `out` at the end, so `out` is complete or absent.
// Throws ValueError for an `out` that exists and is not an empty directory, FileError naming the
// path and the reason when a file cannot be written, nn::CheckpointError for a checkpoint that
// does not load.
ExportResult export_pytorch(const std::string& model_path, const std::string& out);

}  // namespace tapestry::cli
