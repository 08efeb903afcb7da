// The AVX-512 kernels emulated with AVX2 (kernels_avx512_emulated.cpp), for the tests of a CPU
// that cannot run the real ones.
#pragma once

#include <string>

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

// A kernel set's name for the tests' messages, with " (emulated)" after the emulated one.
inline std::string set_name(const cpu::Kernels& k) {
  std::string name(cpu::capability_name(k.capability));
  if (&k == avx512_emulated_kernels()) name += " (emulated)";
  return name;
}

}  // namespace tapestry::testing
