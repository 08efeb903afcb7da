// SavedModel: a trained model with what it takes to use it (configuration, vocabularies,
// preprocessing) in one safetensors checkpoint.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "tapestry/models/preprocess.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/models/vocab.h"

namespace tapestry::models {

struct SavedModel {
  std::unique_ptr<Seq2Seq> model;
  Vocab src, tgt;
  Preprocess preprocess;
  std::map<std::string, std::string> metadata;  // everything the file's header holds
};

// Writes the parameters and, as metadata, "config", "src_vocab", "tgt_vocab", "preprocess" (JSON)
// and `extra` (e.g. "epoch", "valid_loss"), atomically.
void save_model(const std::string& path, Seq2Seq& model, const Vocab& src, const Vocab& tgt,
                const Preprocess& preprocess, const std::map<std::string, std::string>& extra = {});

// Reads a model written by save_model. Throws nn::CheckpointError naming the file and the reason:
// not a safetensors file, not a Tapestry model (missing metadata), a configuration or vocabulary
// that does not parse (the config key named, with its type or range), a config that does not
// match the tensors (each differing tensor named), a model too large for this machine's memory,
// weights that are NaN or infinite (each tensor named with its count). All but the last are
// found from the header alone, before the model is built.
SavedModel load_model(const std::string& path);

// Refuses a module holding a NaN or an infinity (it turns every translation into noise): throws
// nn::CheckpointError naming the file `path` it was read from and each tensor with its counts.
void check_finite_parameters(const std::string& path, nn::Module& model);

}  // namespace tapestry::models
