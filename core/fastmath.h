// Fast float32 exp, tanh and sigmoid: branch-free, so loops over them vectorise, within a few
// units in the last place of the C library's (tests/test_fastmath.cpp measures it). float64 code
// keeps the C library's functions, which the gradient checks rely on.
#pragma once

#include <cstdint>

// Always inlined: core/cpu_kernels_body.inc compiles these loops once per instruction set, and an
// out-of-line copy could be the one the linker keeps for every caller. For the same reason the
// functions below call the compiler's builtins, never an inline function of the C++ library.
#define TAPESTRY_LOOP [[gnu::always_inline]] inline

namespace tapestry::fastmath {

// The pieces of e^x = 2^n e^r, shared by exp and tanh: n = round(x / ln 2), the rest
// r = x - n ln 2 (|r| <= ln2 / 2), (e^r - 1) / r by its Taylor series to r^6 (remainder below
// 3e-9 relative once multiplied by r and 1 added), and 2^n built from the exponent bits.
TAPESTRY_LOOP float ln2_multiple(float x) {
  return __builtin_nearbyintf(x * 1.44269504088896341f);
}
TAPESTRY_LOOP float ln2_rest(float x, float n) {
  // ln 2 split into a part exact in float and the rest, so r keeps its low bits.
  return (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
}
TAPESTRY_LOOP float expm1_over_r(float r) {
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p;
}
TAPESTRY_LOOP float pow2(float n) {
  return __builtin_bit_cast(float, static_cast<int32_t>(n + 127.0f) << 23);
}

// e^x = 2^n (1 + r (e^r - 1) / r). x must lie in [-87, 88], where the result is a normal float.
TAPESTRY_LOOP float exp_in_range(float x) {
  const float n = ln2_multiple(x), r = ln2_rest(x, n);
  const float p = expm1_over_r(r) * r + 1.0f;
  return p * pow2(n);
}

// e^x, x clamped to [-87, 88] first. The clamps compare with x second, so a NaN passes through
// them: exp(NaN) is NaN, and a diverged model's loss is not made finite.
TAPESTRY_LOOP float exp(float x) {
  x = -87.0f > x ? -87.0f : x;
  x = 88.0f < x ? 88.0f : x;
  return exp_in_range(x);
}

// tanh x = m / (m + 2) with m = e^{2x} - 1, x clamped to [-10, 10] (beyond which tanh rounds to
// +-1 in float). m is computed as expm1 is, 2^n (e^r - 1) + (2^n - 1) with 2x = n ln 2 + r and
// (e^r - 1) / r from exp's series (remainder below 2e-8 relative), so that near 0, where m is
// about 2x, it keeps every digit without a separate small-x series. The sign is x's, so
// tanh(-0) = -0. Within 3 units in the last place of the correctly rounded tanh for every
// float (tests/test_fastmath.cpp sweeps it); one division, no branch.
TAPESTRY_LOOP float tanh(float x) {
  float c = -10.0f > x ? -10.0f : x;  // the clamps compare with x second: NaN passes
  c = 10.0f < c ? 10.0f : c;
  const float y = 2.0f * c;
  const float n = ln2_multiple(y), r = ln2_rest(y, n), two_n = pow2(n);
  const float m = two_n * (r * expm1_over_r(r)) - (1.0f - two_n);
  return __builtin_copysignf(m / (m + 2.0f), x);
}

// 1 / (1 + e^{-x}); e^{-x} is clamped by exp, so the result is exact 0 or 1 only in the far tails.
TAPESTRY_LOOP float sigmoid(float x) {
  return 1.0f / (1.0f + exp(-x));
}

}  // namespace tapestry::fastmath
