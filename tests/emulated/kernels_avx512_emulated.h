// The AVX-512 kernels emulated with AVX2 (kernels_avx512_emulated.cpp), for the tests of a CPU
// that cannot run the real ones.
#pragma once

#include "tapestry/core/cpu_kernels.h"

namespace tapestry::testing {

#if defined(TAPESTRY_TEST_AVX512_EMULATED)
// The AVX-512 kernel set with every 512-bit intrinsic emulated, or null where this build has no
// AVX2 to emulate them with.
const cpu::Kernels* avx512_emulated_kernels();
#else
// Without libsimde-dev the emulated set is not built.
inline const cpu::Kernels* avx512_emulated_kernels() {
  return nullptr;
}
#endif

}  // namespace tapestry::testing
