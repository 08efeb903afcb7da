// The median of timings, as the PyTorch references' summarize() takes it, for the benchmarks.
#pragma once

#include <algorithm>
#include <vector>

namespace tapestry::cli {

// The middle value of v, or the mean of the middle two for an even count; v is not empty.
inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tapestry::cli
