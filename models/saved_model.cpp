// SavedModel: the checkpoint metadata that rebuilds a model before its tensors are loaded.
#include "tapestry/models/saved_model.h"

#include <fmt/format.h>

#include "tapestry/nn/checkpoint.h"

namespace tapestry::models {

void save_model(const std::string& path, Seq2Seq& model, const Vocab& src, const Vocab& tgt,
                const Preprocess& preprocess, const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> meta = extra;
  meta["format"] = "tapestry-seq2seq";
  meta["config"] = model.config().to_json();
  meta["src_vocab"] = src.to_json();
  meta["tgt_vocab"] = tgt.to_json();
  meta["preprocess"] = preprocess.to_json();
  nn::save_checkpoint(path, model, meta);
}

SavedModel load_model(const std::string& path) {
  SavedModel m;
  m.metadata = nn::read_checkpoint_metadata(path);
  auto get = [&](const char* key) -> const std::string& {
    auto it = m.metadata.find(key);
    if (it == m.metadata.end())
      throw nn::CheckpointError(fmt::format(
          "checkpoint '{}': not a Tapestry model (its metadata has no '{}')", path, key));
    return it->second;
  };
  Seq2SeqConfig config;
  try {
    config = Seq2SeqConfig::from_json(get("config"));
    m.src = Vocab::from_json(get("src_vocab"));
    m.tgt = Vocab::from_json(get("tgt_vocab"));
    m.preprocess = Preprocess::from_json(get("preprocess"));
  } catch (const ValueError& e) {
    throw nn::CheckpointError(fmt::format("checkpoint '{}': {}", path, e.what()));
  }
  if (m.src.size() != config.src_vocab || m.tgt.size() != config.tgt_vocab)
    throw nn::CheckpointError(fmt::format(
        "checkpoint '{}': the vocabularies ({} and {} tokens) do not match the configuration "
        "({} and {})",
        path, m.src.size(), m.tgt.size(), config.src_vocab, config.tgt_vocab));
  m.model = std::make_unique<Seq2Seq>(config);
  nn::load_checkpoint(path, *m.model);
  return m;
}

}  // namespace tapestry::models
