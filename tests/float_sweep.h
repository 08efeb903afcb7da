// Helpers of the float32 function tests: distance in ulps, equality to the bit, and a sweep over a
// range of floats.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tapestry::testing {

// Distance in units in the last place between two finite floats of the same sign.
inline int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

// Whether a and b are the same float to the bit (+0 and -0 differ, a NaN equals only its own bits).
inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Calls f for every float in [lo, hi] with a relative step of 1e-5 (and 1e-9 near zero): about 3
// million points over the functions' useful ranges.
template <class F>
void sweep(float lo, float hi, F f) {
  for (float x = lo; x < hi;) {
    f(x);
    const float step = std::fabs(x) > 1e-4f ? std::fabs(x) * 1e-5f : 1e-9f;
    x = std::nextafter(x + step, hi + 1);
  }
}

}  // namespace tapestry::testing
