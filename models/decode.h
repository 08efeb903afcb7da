// Decoding: batched greedy and beam search, each output with its attention matrix (T,S).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tapestry/core/packed.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/seq2seq.h"

namespace tapestry::models {

// Decoding's bounds, so that its memory stays bounded whatever the input and the options: a
// source longer than kMaxSourceTokens is refused (ValueError naming its length; callers reading
// text truncate or refuse first, naming the line), and no output runs past kMaxOutputTokens
// steps, whatever max_len_ratio and max_len_extra say (the hypothesis then ends unfinished).
// Every hypothesis keeps its attention, steps x S floats: at most 4096 x 1024 x 4 = 16 MB.
inline constexpr int64_t kMaxSourceTokens = 1024;
inline constexpr int64_t kMaxOutputTokens = 4096;

class DecodeWorkspace;

struct DecodeOptions {
  int64_t beam = 1;   // beam width k (1: greedy)
  int64_t nbest = 1;  // hypotheses returned per sentence, at most k
  // A sentence stops after ceil(max_len_ratio * S_b) + max_len_extra tokens (with <eos>), at
  // most kMaxOutputTokens.
  double max_len_ratio = 2.0;
  int64_t max_len_extra = 5;
  // Hypotheses are ranked by log p / steps^length_penalty (0: raw log-probability).
  double length_penalty = 1.0;
  // false: keep stepping every row to the longest limit even once all have ended (the work of a
  // fixed-length decoder, for benchmarks); the hypotheses are the same either way.
  bool early_exit = true;
  // The batch's rows are decoded in this many shards, in parallel on the cores of
  // core/parallel.h; always the same shards, so results do not depend on the number of cores.
  int64_t shards = 2;
  // Weight packs (core/packed.h) kept across calls, for a caller decoding many batches with a
  // model it does not change meanwhile (translate() over a corpus); null: each call packs the
  // weights it needs anew.
  WeightPacks* packs = nullptr;
  // Greedy decoding's buffers kept across calls (see DecodeWorkspace); null: each call makes its
  // own.
  DecodeWorkspace* workspace = nullptr;
  // true: every step through the ops, on a tape that records nothing, even for a model the raw
  // path of models/rnn_inference.h covers (the reference that path is tested against; both give
  // the same bits).
  bool through_ops = false;
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // without <eos>
  bool finished = false;        // ended with <eos> (false: stopped at the maximum length)
  double log_prob = 0;          // sum of the log-probabilities of every step taken
  double score = 0;             // log_prob / steps^length_penalty
  int64_t src_len = 0;          // S_b
  // (steps, S_b) row-major: step t's weights over the real source positions; steps counts the
  // tokens and the final <eos>. Empty for the `none` attention.
  std::vector<float> attention;
  int64_t steps() const { return static_cast<int64_t>(tokens.size()) + (finished ? 1 : 0); }
};

// Beam search's stopping rule for one sentence, given the normalised scores of its finished
// hypotheses (the k best kept) and of its live ones at their current length: done when nothing
// is alive, or when k have finished and no live one scores above the k-th finished. (Stopping
// once k have finished would let a confident model's early, unlikely <eos> candidates, in the
// top k only because every other candidate is unlikely too, end the search before its live,
// near-certain hypothesis finishes.)
bool beam_settled(const std::vector<double>& finished, const std::vector<double>& alive, int64_t k);

// The maximum number of steps for a source of length s (at most kMaxOutputTokens).
int64_t max_decode_steps(const DecodeOptions& options, int64_t s);
// The same for a model of configuration c: a Transformer with learned positions also stops at
// its last position (the hypothesis then ends unfinished, as at any other limit).
int64_t max_decode_steps(const Seq2SeqConfig& c, const DecodeOptions& options, int64_t s);

// An upper bound on the bytes decoding a batch of `rows` sentences of up to `src_len` tokens
// takes: the hypotheses' attention matrices, the beam's log-probabilities and candidates, the
// encoder states copied for every beam row.
double decode_memory_bound(const Seq2SeqConfig& config, int64_t rows, int64_t src_len,
                           const DecodeOptions& options);

// What greedy decoding keeps between calls, so that a caller decoding batch after batch (translate
// over a corpus, a server, a benchmark) makes no heap allocation once its batch shapes have been
// seen: per shard a tape that records nothing, the decoder's state (the encoder's memory, the
// recurrent state or the Transformer's key/value caches, all in the tensor pool) and the rows'
// limits and tokens; for a one-sentence RNN batch, the raw path's tables of projected embeddings
// too (models/rnn_inference.h), kept while the weight packs' generation stays. One workspace
// serves one call at a time and one model at a time (it starts afresh when given another model).
class DecodeWorkspace {
 public:
  DecodeWorkspace();
  ~DecodeWorkspace();
  DecodeWorkspace(const DecodeWorkspace&) = delete;
  DecodeWorkspace& operator=(const DecodeWorkspace&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Greedy decoding into `out`, one hypothesis per batch row (options.nbest must be 1), reusing the
// hypotheses' lists in `out` and the buffers of options.workspace: a steady call (its shapes seen
// before, the lists already as long) makes no heap allocation. The same checks and results as
// greedy_decode.
void greedy_decode_into(Seq2Seq& model, const Batch& batch, const DecodeOptions& options,
                        std::vector<Hypothesis>& out);

// Per batch row, the options.nbest best hypotheses, best first. The model is switched to eval
// mode for the call (and back). Throws ValueError for beam < 1 or nbest outside [1, beam], a
// source longer than kMaxSourceTokens, or a batch whose decode_memory_bound is more than this
// machine's memory (before decoding starts).
std::vector<std::vector<Hypothesis>> greedy_decode(Seq2Seq& model, const Batch& batch,
                                                   const DecodeOptions& options = {});
std::vector<std::vector<Hypothesis>> beam_decode(Seq2Seq& model, const Batch& batch,
                                                 const DecodeOptions& options);
// greedy_decode for beam 1, beam_decode otherwise.
std::vector<std::vector<Hypothesis>> decode(Seq2Seq& model, const Batch& batch,
                                            const DecodeOptions& options);

}  // namespace tapestry::models
