// Catch2's runner, after choosing OpenBLAS's fastest kernels for this CPU (as the program does).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tapestry/core/blas.h"

int main(int argc, char** argv) {
  tapestry::blas::use_fastest_kernels(argv);
  return Catch::Session().run(argc, argv);
}
