// Catch2's runner, after choosing OpenBLAS's fastest kernels for this CPU (as the program does).
// TAPESTRY_TEST_KERNELS=avx512-emulated runs the tests with the AVX-512 kernels emulated
// (tests/emulated/), for a CPU without AVX-512; where this build cannot, it skips (exit 77).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "emulated/kernels_avx512_emulated.h"
#include "tapestry/core/blas.h"
#include "tapestry/core/cpu_kernels.h"

int main(int argc, char** argv) {
  tapestry::blas::use_fastest_kernels(argv);
  if (const char* want = std::getenv("TAPESTRY_TEST_KERNELS"); want && *want) {
    if (std::strcmp(want, "avx512-emulated") != 0) {
      std::fprintf(stderr, "TAPESTRY_TEST_KERNELS=%s: not a test kernel set (avx512-emulated)\n",
                   want);
      return 2;
    }
    const tapestry::cpu::Kernels* k = tapestry::testing::avx512_emulated_kernels();
    if (!k) {
      std::printf("skipped: this build has no emulated AVX-512 kernels (libsimde-dev, AVX2)\n");
      return 77;
    }
    tapestry::cpu::replace_kernels_for_testing(k);
  }
  return Catch::Session().run(argc, argv);
}
