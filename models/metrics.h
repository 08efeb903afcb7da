// Metrics on token sequences: exact match, per-token accuracy, attention-alignment agreement, and
// the same by source-length bucket.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tapestry::models {

struct MatchCounts {
  int64_t sentences = 0, exact = 0;
  // Positions where hypothesis and reference agree, over the longer of the two (so both missing
  // and extra tokens count against it).
  int64_t tokens = 0, correct = 0;

  void add(std::span<const int32_t> hyp, std::span<const int32_t> ref);
  void add(const MatchCounts& o);
  double exact_match() const { return sentences ? double(exact) / double(sentences) : 0; }
  double token_accuracy() const { return tokens ? double(correct) / double(tokens) : 0; }
};

struct AlignmentCounts {
  int64_t positions = 0, agree = 0;  // target positions with a true alignment; where argmax agrees
  // attention (T,S) row-major with S = `src_len`; align[t] the true source position or -1. Rows
  // beyond the alignment (the <eos> row) are ignored.
  void add(std::span<const float> attention, int64_t src_len, std::span<const int32_t> align);
  double rate() const { return positions ? double(agree) / double(positions) : 0; }
};

// Buckets of source length: [lo, hi] inclusive, e.g. 1-10, 11-20, ...
struct LengthBuckets {
  std::vector<int64_t> upper;  // each bucket's last length, ascending; the last is open-ended
  explicit LengthBuckets(std::vector<int64_t> upper_bounds) : upper(std::move(upper_bounds)) {}
  size_t bucket(int64_t length) const;
  std::string label(size_t bucket) const;  // "1-10", "41+"
  size_t size() const { return upper.size() + 1; }
};

}  // namespace tapestry::models
