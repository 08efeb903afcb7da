// SavedModel: the checkpoint metadata that rebuilds a model before its tensors are loaded.
#include "tapestry/models/saved_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tapestry/models/limits.h"
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

namespace {

// The tensors a model of `config` has, against those the file holds: every difference named.
void check_tensors(const std::string& path, const Seq2SeqConfig& config,
                   const nn::SafetensorsHeader& header) {
  std::map<std::string, const nn::TensorInfo*> in_file;
  for (const nn::TensorInfo& t : header.tensors) in_file.emplace(t.name, &t);
  const char* model_dtype = nn::safetensors_dtype(DType::f32);  // load_model builds float32
  std::vector<std::string> problems;
  std::set<std::string> expected;
  for (const auto& [name, shape] : config.parameter_shapes()) {
    expected.insert(name);
    auto it = in_file.find(name);
    if (it == in_file.end()) {
      problems.push_back(fmt::format("tensor '{}' {} is missing", name, shape.str()));
    } else if (it->second->shape != shape) {
      problems.push_back(fmt::format("tensor '{}' is {} in the file but the config makes it {}",
                                     name, it->second->shape.str(), shape.str()));
    } else if (it->second->dtype != DType::f32) {
      problems.push_back(fmt::format("tensor '{}' is {} in the file, not {}", name,
                                     nn::safetensors_dtype(it->second->dtype), model_dtype));
    }
  }
  for (const nn::TensorInfo& t : header.tensors)
    if (!expected.count(t.name))
      problems.push_back(fmt::format("tensor '{}' {} is not part of a model with this config",
                                     t.name, t.shape.str()));
  if (problems.empty()) return;
  constexpr size_t kShown = 10;
  std::string list;
  for (size_t i = 0; i < std::min(problems.size(), kShown); ++i)
    list += (i ? "; " : "") + problems[i];
  if (problems.size() > kShown) list += fmt::format("; and {} more", problems.size() - kShown);
  throw nn::CheckpointError(
      fmt::format("checkpoint '{}': its config ({}) does not match its tensors ({} problem{}): {}",
                  path, config.summary(), problems.size(), problems.size() == 1 ? "" : "s", list));
}

}  // namespace

void check_finite_parameters(const std::string& path, nn::Module& model) {
  std::vector<std::string> problems;
  for (auto& [name, parameter] : model.named_parameters()) {
    const Tensor& value =
        parameter->value;  // a lambda may not name a structured binding (clang 14)
    int64_t nan = 0, inf = 0;
    dispatch(value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = value.template data<T>();
      for (int64_t i = 0, n = value.numel(); i < n; ++i) {
        nan += std::isnan(x[i]);
        inf += std::isinf(x[i]);
      }
    });
    if (nan > 0 || inf > 0) {
      std::string what = nan > 0 ? fmt::format("{} NaN value{}", nan, nan == 1 ? "" : "s") : "";
      if (inf > 0)
        what += fmt::format("{}{} infinite value{}", what.empty() ? "" : " and ", inf,
                            inf == 1 ? "" : "s");
      problems.push_back(fmt::format("{} holds {}", name, what));
    }
  }
  if (problems.empty()) return;
  std::string list;
  for (size_t i = 0; i < problems.size(); ++i) list += (i ? "; " : "") + problems[i];
  throw nn::CheckpointError(
      fmt::format("checkpoint '{}': weights that are not finite: {}", path, list));
}

SavedModel load_model(const std::string& path) {
  // Only the header first: the config, the vocabularies and every tensor's shape are checked
  // against each other before a byte of the model is allocated.
  const nn::SafetensorsHeader header = nn::read_safetensors_header(path);
  SavedModel m;
  m.metadata = header.metadata;
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
  check_tensors(path, config, header);
  // Loading holds every weight twice for a moment: as read from the file, and in the model.
  const double weights = static_cast<double>(config.parameter_count()) * 4;
  const std::string refusal = memory_refusal(
      2 * weights, fmt::format("{} parameters, read from the file and copied into the model",
                               config.parameter_count()));
  if (!refusal.empty())
    throw nn::CheckpointError(
        fmt::format("checkpoint '{}': the model would need {}", path, refusal));
  m.model = std::make_unique<Seq2Seq>(config);
  nn::load_checkpoint(path, *m.model);
  check_finite_parameters(path, *m.model);
  return m;
}

}  // namespace tapestry::models
