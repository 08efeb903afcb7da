// Rng: a seeded xoshiro256** generator; same seed, same numbers on every platform.
#pragma once

#include <cstdint>

#include "tapestry/core/tensor.h"

namespace tapestry {

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
