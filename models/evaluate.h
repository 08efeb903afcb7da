// Evaluation over a whole pair list: loss and perplexity, translations in input order, and the
// attention of the reference translation (teacher forced), batched.
#pragma once

#include <span>
#include <vector>

#include "tapestry/models/batch.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/seq2seq.h"

namespace tapestry::models {

struct LossResult {
  double loss = 0;        // mean cross-entropy per real target token (with <eos>)
  double perplexity = 0;  // exp(loss)
  int64_t tokens = 0;
};
LossResult evaluate_loss(Seq2Seq& model, std::span<const EncodedPair> pairs, int64_t batch_size);

// The n-best translations of every pair's source, in the pairs' order.
std::vector<std::vector<Hypothesis>> translate(Seq2Seq& model, std::span<const EncodedPair> pairs,
                                               int64_t batch_size, const DecodeOptions& options);

// For every pair, the attention weights while the decoder reads the reference: (n+1, S) row-major
// for a target of n tokens and <eos>; row t is the attention used to predict target token t.
// Empty for the `none` attention.
std::vector<std::vector<float>> reference_attention(Seq2Seq& model,
                                                    std::span<const EncodedPair> pairs,
                                                    int64_t batch_size);

}  // namespace tapestry::models
