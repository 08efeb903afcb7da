// Thin calls into OpenBLAS: row-major GEMM for float and double, and the BLAS thread count.
#pragma once

#include <cstdint>

namespace tapestry::blas {

// C = alpha * op(A) op(B) + beta * C, row-major; op(A) is (M,K), op(B) is (K,N), C is (M,N).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc);

void set_threads(int n);
int threads();

// Debian's OpenBLAS 0.3.21 does not recognise recent AMD CPUs as AVX-512 capable and runs its
// AVX2 (Haswell) kernels, at half the speed the CPU can reach. It reads OPENBLAS_CORETYPE (and
// OPENBLAS_NUM_THREADS) only when it loads, so a program calls this first thing in main: when
// the CPU has the AVX-512 subsets OpenBLAS's SkylakeX kernels use and the user has not chosen a
// core type, it sets OPENBLAS_CORETYPE=SkylakeX and OPENBLAS_NUM_THREADS=1 (Tapestry spreads
// work over the cores itself) and re-executes the program; otherwise it returns. Set
// OPENBLAS_CORETYPE yourself to opt out (e.g. OPENBLAS_CORETYPE=Haswell).
void use_fastest_kernels(char** argv);
// The core type OpenBLAS runs ("Haswell", "SkylakeX", ...).
const char* core_name();

// Where gemm leaves OpenBLAS for the kernel set's own small-product paths, for the kernel set in
// use and the OpenBLAS kernels loaded: the set's limits (cpu::Kernels, measured against OpenBLAS's
// AVX2 kernels), lowered where OpenBLAS runs its AVX-512 kernels, which multiply small matrices
// without packing them and so win at sizes where its AVX2 kernels lose to their own packing.
struct SmallProductLimits {
  int64_t small_gemm_madds;      // small_gemm up to this many multiply-adds (at most 64 columns)
  int64_t split_few_rows_madds;  // scores q k^T of up to twice few_rows_max rows, in two halves
  int64_t short_side_max;        // dx = dy W, dW += dy^T x of this many rows or depth, b in place
};
SmallProductLimits small_product_limits();

}  // namespace tapestry::blas
