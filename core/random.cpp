// Rng: xoshiro256** (Blackman and Vigna) seeded through splitmix64; Box-Muller normals.
#include "tapestry/core/random.h"

#include <cmath>
#include <numbers>

namespace tapestry {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Rng::uniform(double lo, double hi) {
  return lo + (hi - lo) * uniform();
}

double Rng::normal(double mean, double stddev) {
  double u1 = uniform();
  while (u1 <= 0) u1 = uniform();
  double u2 = uniform();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int64_t Rng::randint(int64_t n) {
  return n <= 0 ? 0 : static_cast<int64_t>(next_u64() % static_cast<uint64_t>(n));
}

Rng Rng::split() {
  return Rng(next_u64());
}

void Rng::fill_uniform(Tensor& t, double lo, double hi) {
  dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(uniform(lo, hi));
  });
}

void Rng::fill_normal(Tensor& t, double mean, double stddev) {
  dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(normal(mean, stddev));
  });
}

Tensor Rng::uniform_tensor(const Shape& shape, double lo, double hi, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_uniform(t, lo, hi);
  return t;
}

Tensor Rng::normal_tensor(const Shape& shape, double mean, double stddev, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_normal(t, mean, stddev);
  return t;
}

}  // namespace tapestry
