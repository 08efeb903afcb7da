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

}  // namespace tapestry::blas
