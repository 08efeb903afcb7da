// Metrics: counting matches, alignment agreement and length buckets.
#include "tapestry/models/metrics.h"

#include <fmt/format.h>

#include <algorithm>

#include "tapestry/core/errors.h"

namespace tapestry::models {

void MatchCounts::add(std::span<const int32_t> hyp, std::span<const int32_t> ref) {
  ++sentences;
  if (std::equal(hyp.begin(), hyp.end(), ref.begin(), ref.end())) ++exact;
  const size_t common = std::min(hyp.size(), ref.size());
  for (size_t t = 0; t < common; ++t) correct += hyp[t] == ref[t];
  tokens += static_cast<int64_t>(std::max(hyp.size(), ref.size()));
}

void MatchCounts::add(const MatchCounts& o) {
  sentences += o.sentences;
  exact += o.exact;
  tokens += o.tokens;
  correct += o.correct;
}

void AlignmentCounts::add(std::span<const float> attention, int64_t src_len,
                          std::span<const int32_t> align) {
  if (src_len <= 0) return;
  const auto rows = static_cast<int64_t>(attention.size()) / src_len;
  if (rows * src_len != static_cast<int64_t>(attention.size()))
    throw ShapeError(
        fmt::format("alignment: {} weights are not rows of {}", attention.size(), src_len));
  for (int64_t t = 0; t < std::min<int64_t>(rows, static_cast<int64_t>(align.size())); ++t) {
    if (align[t] < 0) continue;
    const float* row = attention.data() + t * src_len;
    const auto best = std::max_element(row, row + src_len) - row;
    ++positions;
    agree += best == align[t];
  }
}

size_t LengthBuckets::bucket(int64_t length) const {
  return static_cast<size_t>(std::lower_bound(upper.begin(), upper.end(), length) - upper.begin());
}

std::string LengthBuckets::label(size_t b) const {
  const int64_t lo = b == 0 ? 1 : upper[b - 1] + 1;
  if (b >= upper.size()) return fmt::format("{}+", lo);
  return fmt::format("{}-{}", lo, upper[b]);
}

}  // namespace tapestry::models
