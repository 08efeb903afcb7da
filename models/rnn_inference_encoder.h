// Internal to models/rnn_inference.cpp: the encoder of RNN decoding on raw buffers, every layer
// and direction of nn::RNN::forward in eval mode, and the model's parameters looked up by name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tapestry/core/packed.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/rnn_inference_parts.h"
#include "tapestry/models/seq2seq.h"

namespace tapestry::models::detail {

// The model's parameters by name; a missing one is a ValueError naming it.
class ParamsByName {
 public:
  explicit ParamsByName(Seq2Seq& model);
  nn::Parameter& operator()(const std::string& name) const;
  // A recurrent cell's weights: prefix + "weight_ih" + suffix and the rest.
  CellWeights cell(const std::string& prefix, const std::string& suffix) const;

 private:
  std::map<std::string, nn::Parameter*> params_;
};

// The encoder over a padded batch: padded steps leave a row's state unchanged and its output 0.
// Its outputs are buffers the caller may swap out (they keep their capacity for the next batch).
class EncoderRun {
 public:
  EncoderRun(const Seq2SeqConfig& config, const ParamsByName& params);

  // This batch's packs (from `packs`), and the per-token tables dropped where `tables_stale`.
  void resolve(WeightPacks& packs, bool tables_stale);
  // Encodes `batch`: keys (B,S,K), summary (B,K) (each direction's last state), and, where
  // `keys_product` is given (Bahdanau's U), projected (B,S,A) = keys U^T, once per batch.
  void encode(const Batch& batch, const Product* keys_product);

  Buffer keys, summary, projected;

 private:
  Seq2SeqConfig config_;
  nn::CellKind kind_;
  std::vector<CellWeights> cells_;  // layer-major, then direction
  TokenTable tables_[2];            // each direction's first cell's input rows per token
  const nn::Parameter* embedding_ = nullptr;
  Buffer layer_in_, layer_out_, gx_, hw_, h_, c_, h2_, c2_, cell_scratch_;
};

}  // namespace tapestry::models::detail
