// Explain for the Transformer: one decoder position recorded on a tape that keeps every gradient,
// gathered per decoder layer and head (the masked self-attention and the cross-attention: q, k,
// v, scores, weights, context, each with dL_t/d of it) and checked against finite differences.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/explain.h"

namespace tapestry::cli {

// One head's block of an attention's inner tensor: (rows, cols) row-major.
struct HeadTensor {
  std::vector<int64_t> shape;
  std::vector<double> value;
  std::vector<double> grad;  // dL_t/dx; zeros where no gradient reached
};

// One head of one attention of one decoder layer. The queries are the decoder's positions
// 0..t (the rows of q, scores, weights and context); the keys are the source words
// (cross-attention) or the same decoder positions (self-attention, masked to j <= i).
struct HeadExplanation {
  int layer = 0;  // 0-based
  bool cross = false;
  int head = 0;  // 0-based
  std::vector<std::string> keys;
  HeadTensor q, k, v;          // (t+1,dk), (S,dk), (S,dk)
  HeadTensor scores, weights;  // (t+1,S): q k^T / sqrt(dk); softmax over the unmasked keys
  HeadTensor context;          // (t+1,dk): weights v, before the heads merge
  std::string name() const;    // "layer 2 cross head 1"
};

struct TransformerExplanation {
  std::string model, config_json;
  int64_t heads = 0, layers = 0, d_k = 0;
  std::vector<std::string> src_vocab, tgt_vocab;
  std::vector<std::string> source;           // tokens (<unk> where outside the vocabulary)
  std::vector<std::string> inputs;           // the decoder's inputs 0..t: <bos> y*_0 .. y*_(t-1)
  std::vector<std::string> target_sentence;  // teacher-forced, without <eos>
  int64_t step = 0;
  std::string previous, target;  // the input at t and y*_t
  int32_t target_id = 0;
  double loss = 0;  // L_t = -log p(y*_t)
  std::vector<std::pair<std::string, double>> top;
  std::vector<HeadExplanation> attention;    // by layer, then self before cross, then head
  std::vector<ExplainParameter> parameters;  // every parameter's gradient (values left out)
  std::vector<double> memory_grad;           // dL_t/dh_j of the encoder's output h (S,d)
  std::vector<std::string> story;
  std::vector<ExplainCheck> checks;
  double eps = 0, tolerance = 0;
  int64_t check_max = 0;  // elements per head tensor, those of largest gradient (0: all)
  double worst_error() const;
  const HeadExplanation& head(int layer, bool cross, int h) const;
};

// A tiny Transformer (d 8, 2 heads, feed-forward 16, 1 encoder and 2 decoder layers, GELU so that
// no finite difference crosses a kink) for explain's default model.
models::Seq2SeqConfig tiny_transformer_config();

// Records the encoder and the decoder over the inputs <bos> y*_0 .. y*_(t-1) (teacher forcing;
// the decoder is causal, so the positions after t would change nothing), position t's output
// layer and L_t = -log softmax(z_t)[y*_t]; runs backward; gathers every attention's inner tensors
// per head; checks each against central differences (the tensor moved where it is recorded, the
// whole pass run again). Throws ValueError as explain_step does.
TransformerExplanation explain_transformer_step(ExplainModel& m,
                                                const std::vector<std::string>& target,
                                                int64_t step, const CheckOptions& check);

// dL/dh_j of the encoder's output for the whole sentence's loss L = sum_t L_t (teacher-forced on
// `target`, <eos> last), from one ordinary backward pass: (S,d) row-major.
std::vector<double> transformer_sentence_gradient(ExplainModel& m,
                                                  const std::vector<std::string>& target);
// The sentence across its steps (--step all): each step's last-layer cross-attention averaged
// over the heads, and the gradient each step sends to each h_j, whose sum is checked against
// transformer_sentence_gradient.
AcrossSteps transformer_across(const std::vector<TransformerExplanation>& steps,
                               const std::vector<double>& sentence_grad);

// The step told in sentences (tools/explain_transformer_text.cpp).
std::vector<std::string> transformer_story(const TransformerExplanation& e);
std::string render_transformer_text(const TransformerExplanation& e, const TextOptions& o);
std::string render_transformer_json(const TransformerExplanation& e);
// One page for one or more steps, in the walkthrough's style (tools/explain_transformer_html.cpp).
// With `across` (--step all), the sentence's attention and story first.
std::string render_transformer_html(const std::vector<TransformerExplanation>& steps,
                                    const AcrossSteps* across = nullptr);

}  // namespace tapestry::cli
