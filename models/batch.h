// Batches: examples encoded to ids, padded into (B,S) sources and (B,T) targets, grouped by length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/models/example.h"
#include "tapestry/models/vocab.h"

namespace tapestry::models {

// A pair as ids (no <bos> or <eos>).
struct EncodedPair {
  std::vector<int32_t> src, tgt;
};

std::vector<EncodedPair> encode_pairs(std::span<const Example> examples, const Vocab& src,
                                      const Vocab& tgt);

struct Batch {
  int64_t size = 0;                  // B
  int64_t src_len = 0;               // S: the longest source
  int64_t tgt_len = 0;               // T: the longest target plus <eos>
  std::vector<int32_t> src;          // (B,S), <pad> after each row's length
  std::vector<int64_t> src_lengths;  // B
  std::vector<int32_t> tgt_in;       // (B,T): <bos> y_1 .. y_n, then <pad>
  std::vector<int32_t> tgt_out;      // (B,T): y_1 .. y_n <eos>, then <pad>
  std::vector<int64_t> tgt_lengths;  // B: n + 1
  std::vector<int64_t> index;        // B: each row's position in the pair list it came from

  // Real target tokens (with <eos>): the tokens the loss is averaged over.
  int64_t target_tokens() const;
};

// Pads the pairs at `indices` into one batch. A pair may have an empty target; an empty source
// throws ValueError naming its index (nothing to attend to).
Batch make_batch(std::span<const EncodedPair> pairs, std::span<const int64_t> indices);

// Rows [begin, begin + count) of a batch as a batch of their own, its S and T cut to the longest
// source and target among them.
Batch slice_rows(const Batch& batch, int64_t begin, int64_t count);
// The same into `out`, reusing its lists' capacity (no heap allocation once they are large enough).
void slice_rows_into(const Batch& batch, int64_t begin, int64_t count, Batch& out);

// Splits 0..n-1 into batches of at most batch_size, pairs of similar source length together (less
// padding). With `rng` (training), the pairs are shuffled, sorted by length within chunks of 50
// batches, and the batches shuffled; without (evaluation), all pairs are sorted by source length,
// stably. Batch::index maps rows back to pairs.
std::vector<std::vector<int64_t>> make_batches(std::span<const EncodedPair> pairs,
                                               int64_t batch_size, Rng* rng);

}  // namespace tapestry::models
