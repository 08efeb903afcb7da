// Checkpoint averaging: checks that the checkpoints belong together, then means every parameter.
#include "tapestry/models/average.h"

#include <fmt/format.h>

#include "tapestry/nn/checkpoint.h"

namespace tapestry::models {

SavedModel average_models(const std::vector<std::string>& paths) {
  if (paths.empty()) throw ValueError("average: no checkpoints to average");
  SavedModel first = load_model(paths[0]);
  auto named = first.model->named_parameters();
  std::vector<std::vector<double>> sums(named.size());
  auto add = [&](std::vector<std::pair<std::string, nn::Parameter*>>& params) {
    for (size_t k = 0; k < params.size(); ++k) {
      const Tensor& v = params[k].second->value;
      const float* x = v.data<float>();
      auto& sum = sums[k];
      sum.resize(static_cast<size_t>(v.numel()), 0.0);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += x[i];
    }
  };
  add(named);
  // What makes two checkpoints averageable: the same model, the same ids for the same tokens,
  // and the same text processing.
  static const char* const kSame[] = {"config", "src_vocab", "tgt_vocab", "preprocess"};
  for (size_t f = 1; f < paths.size(); ++f) {
    const auto meta = nn::read_checkpoint_metadata(paths[f]);
    for (const char* key : kSame) {
      const auto it = meta.find(key);
      if (it == meta.end() || it->second != first.metadata.at(key))
        throw nn::CheckpointError(fmt::format(
            "checkpoint '{}': its '{}' differs from that of '{}': only checkpoints of one run "
            "can be averaged",
            paths[f], key, paths[0]));
    }
    SavedModel m = load_model(paths[f]);
    auto params = m.model->named_parameters();
    add(params);
  }
  const double n = static_cast<double>(paths.size());
  for (size_t k = 0; k < named.size(); ++k) {
    float* x = named[k].second->value.data<float>();
    for (size_t i = 0; i < sums[k].size(); ++i) x[i] = static_cast<float>(sums[k][i] / n);
  }
  std::string from;
  for (const auto& p : paths) from += (from.empty() ? "" : ", ") + p;
  first.metadata["averaged_from"] = from;
  return first;
}

}  // namespace tapestry::models
