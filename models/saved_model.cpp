// SavedModel: the checkpoint metadata that rebuilds a model before its tensors are loaded.
#include "tapestry/models/saved_model.h"

#include <fmt/format.h>

#include <filesystem>

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
  // The model is built before its tensors are checked, so a configuration asking for more
  // parameters than the file can hold (4 bytes or more each) is refused first: a few bytes of
  // metadata must not allocate gigabytes. A lower bound: the two embeddings, one recurrent H x H
  // block, and the A x H of the attentions that have an attention size.
  using nn::AttentionKind;
  const double h = static_cast<double>(config.hidden);
  const double a = config.attn_size > 0 ? static_cast<double>(config.attn_size) : h;
  const bool sized = config.attention == AttentionKind::bahdanau ||
                     config.attention == AttentionKind::concat ||
                     config.attention == AttentionKind::local_p;
  const double least =
      static_cast<double>(config.src_vocab + config.tgt_vocab) * static_cast<double>(config.emb) +
      h * h + (sized ? a * h : 0.0);
  std::error_code ec;
  const double bytes = static_cast<double>(std::filesystem::file_size(path, ec));
  if (!ec && 4 * least > bytes)
    throw nn::CheckpointError(fmt::format(
        "checkpoint '{}': the configuration ({}) needs at least {:.0f} parameters, more than the "
        "file's {:.0f} bytes can hold",
        path, config.summary(), least, bytes));
  m.model = std::make_unique<Seq2Seq>(config);
  nn::load_checkpoint(path, *m.model);
  return m;
}

}  // namespace tapestry::models
