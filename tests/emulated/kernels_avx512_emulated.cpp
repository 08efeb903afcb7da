// The AVX-512 kernels of core/cpu_kernels_body.inc built for a CPU without AVX-512: each 512-bit
// intrinsic is SIMDe's (libsimde-dev) portable version, so their loops, tails and masks run and
// are tested on any x86-64 CPU with AVX2, where the real set cannot run at all.
//
// The body chooses its paths by the compiler's macros, so this file includes the intrinsics it
// emulates first and then says the compiler has AVX-512. What SIMDe 0.7 lacks is written below
// from the instructions' definitions, each lane by itself, so a masked load or store touches
// no float outside its mask (a sanitized build's AddressSanitizer sees one that does); the
// aligned load and store abort on an address the hardware would fault on. rcp14 and rsqrt14
// keep 14 bits of the float result, truncated: the hardware's estimates are that far off
// (though not these bits), and the Newton steps after them must bring the kernels back to the
// reference.
#include "kernels_avx512_emulated.h"

#if defined(__AVX512F__)
#error "this file emulates AVX-512 on a CPU without it (tests/CMakeLists.txt adds -mno-avx512f)"
#endif
#if !(defined(__AVX2__) && defined(__FMA__))
// The body's AVX-512 paths stand on its AVX2 paths, which this build does not have.
const tapestry::cpu::Kernels* tapestry::testing::avx512_emulated_kernels() {
  return nullptr;
}
#else
#define TAPESTRY_KERNELS_ISA avx512_emulated
#define TAPESTRY_KERNELS_CAPABILITY Capability::avx512
#define TAPESTRY_KERNELS_TABLE kernels_avx512_emulated

#include <immintrin.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tapestry::cpu::avx512_emulated {
namespace {

using F16 = simde__m512_private;

inline simde__m512 maskz_loadu_ps(uint16_t k, const float* p) {
  F16 r{};
  for (int i = 0; i < 16; ++i) r.f32[i] = (k >> i) & 1 ? p[i] : 0.0f;
  return simde__m512_from_private(r);
}

inline void mask_storeu_ps(float* p, uint16_t k, simde__m512 a) {
  const F16 x = simde__m512_to_private(a);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) p[i] = x.f32[i];
}

// The float y with its last 9 of 23 fraction bits cleared: within 2^-14 of it. Zero, subnormal,
// infinite and NaN values stay as they are (a subnormal has fewer bits to keep).
inline float keep_14_bits(float y) {
  uint32_t u;
  std::memcpy(&u, &y, 4);
  const uint32_t exponent = u & 0x7f800000u;
  if (exponent != 0 && exponent != 0x7f800000u) u &= ~uint32_t{0x1ff};
  std::memcpy(&y, &u, 4);
  return y;
}

// The aligned load and store fault on hardware when p is not 64-byte aligned; SIMDe's would
// not, so they are checked here.
inline const float* aligned_64(const float* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 64 != 0) {
    std::fprintf(stderr, "%s of %p: not 64-byte aligned (a fault on AVX-512 hardware)\n", what,
                 static_cast<const void*>(p));
    std::abort();
  }
  return p;
}

inline simde__m512 rcp14_ps(simde__m512 a) {
  F16 r = simde__m512_to_private(a);
  for (int i = 0; i < 16; ++i) r.f32[i] = keep_14_bits(1.0f / r.f32[i]);
  return simde__m512_from_private(r);
}

inline simde__m512 rsqrt14_ps(simde__m512 a) {
  F16 r = simde__m512_to_private(a);
  for (int i = 0; i < 16; ++i) r.f32[i] = keep_14_bits(1.0f / std::sqrt(r.f32[i]));
  return simde__m512_from_private(r);
}

// Truncation to int32, a float out of range (or a NaN) giving the hardware's 0x80000000.
inline simde__m512i cvttps_epi32(simde__m512 a) {
  const F16 x = simde__m512_to_private(a);
  simde__m512i_private r;
  for (int i = 0; i < 16; ++i) {
    const float f = x.f32[i];
    r.i32[i] = f >= -2147483648.0f && f < 2147483648.0f ? static_cast<int32_t>(f) : INT32_MIN;
  }
  return simde__m512i_from_private(r);
}

}  // namespace
}  // namespace tapestry::cpu::avx512_emulated

#define _mm512_maskz_loadu_ps(k, p) ::tapestry::cpu::avx512_emulated::maskz_loadu_ps(k, p)
#define _mm512_mask_storeu_ps(p, k, a) ::tapestry::cpu::avx512_emulated::mask_storeu_ps(p, k, a)
#define _mm512_rcp14_ps(a) ::tapestry::cpu::avx512_emulated::rcp14_ps(a)
#define _mm512_rsqrt14_ps(a) ::tapestry::cpu::avx512_emulated::rsqrt14_ps(a)
#define _mm512_cvttps_epi32(a) ::tapestry::cpu::avx512_emulated::cvttps_epi32(a)
#undef _mm512_load_ps
#define _mm512_load_ps(p) \
  simde_mm512_load_ps(::tapestry::cpu::avx512_emulated::aligned_64(p, "_mm512_load_ps"))
#undef _mm512_store_ps
#define _mm512_store_ps(p, a) \
  simde_mm512_store_ps(       \
      const_cast<float*>(::tapestry::cpu::avx512_emulated::aligned_64(p, "_mm512_store_ps")), a)
// SIMDe 0.7's roundscale puts its imm8 into `imm8 >> 4` unbracketed, so _MM_FROUND_CUR_DIRECTION |
// _MM_FROUND_NO_EXC (0x0C) took a scale of 2^4 there and rounded to sixteenths.
#undef _mm512_roundscale_ps
#define _mm512_roundscale_ps(a, imm8) simde_mm512_roundscale_ps(a, (imm8))
// SIMDe 0.7 has no alias for this one; GCC without optimisation and clang define it as a macro.
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4(a, b, imm8)

#define __AVX512F__ 1
#define __AVX512DQ__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#include "../../core/cpu_kernels_body.inc"

const tapestry::cpu::Kernels* tapestry::testing::avx512_emulated_kernels() {
  return &tapestry::cpu::kernels_avx512_emulated;
}
#endif
