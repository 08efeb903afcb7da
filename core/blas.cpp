// Thin calls into OpenBLAS's CBLAS interface.
#include "core/blas.h"

#include <cblas.h>

#include <algorithm>

namespace tapestry::blas {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}

void set_threads(int n) {
  openblas_set_num_threads(n);
}
int threads() {
  return openblas_get_num_threads();
}

}  // namespace tapestry::blas
