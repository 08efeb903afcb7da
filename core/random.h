// Rng: a seeded xoshiro256** generator; same seed, same numbers on every platform.
#pragma once

#include <cstdint>

#include "tapestry/core/tensor.h"

namespace tapestry {

// A counter-based 32-bit draw: element i of a stream named by `key` (two rounds of Wellons'
// lowbias32 mixer). Each element is independent of the others, so a loop over i vectorises,
// where a sequential generator would cost a call and a dependency chain per element. Distinct
// i < 2^32 under one key give distinct values.
inline uint32_t counter_hash32(uint64_t key, uint64_t i) {
  auto mix = [](uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
  };
  return mix(mix(static_cast<uint32_t>(i) ^ static_cast<uint32_t>(key)) +
             static_cast<uint32_t>(key >> 32));
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);

  uint64_t next_u64();
  double uniform();                      // [0, 1)
  double uniform(double lo, double hi);  // [lo, hi)
  double normal(double mean = 0, double stddev = 1);
  int64_t randint(int64_t n);  // [0, n)
  // An independent generator derived from this one (for a sub-component that needs its own).
  Rng split();

  void fill_uniform(Tensor& t, double lo, double hi);
  void fill_normal(Tensor& t, double mean, double stddev);
  Tensor uniform_tensor(const Shape& shape, double lo, double hi, DType dtype);
  Tensor normal_tensor(const Shape& shape, double mean, double stddev, DType dtype);

 private:
  uint64_t s_[4];
};

}  // namespace tapestry
