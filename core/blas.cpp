// Thin calls into OpenBLAS's CBLAS interface.
#include "tapestry/core/blas.h"

#include <cblas.h>
#include <fmt/format.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/gemm_profile.h"
#include "tapestry/core/parallel.h"
#include "tapestry/core/scratch.h"

namespace tapestry::blas {

namespace {

// Matrix-vector products up to this many multiply-adds run in the kernels' gemv_rows
// (core/cpu_kernels_small.inc), whose vector paths beat OpenBLAS's sgemv where its call overhead
// matters; larger ones, and every one when only the portable kernels run, go to OpenBLAS.
constexpr int64_t kSmallGemv = int64_t{1} << 16;

// The kernels' gemv_rows when the product is small enough and they are vectorised, else null.
auto small_gemv(int64_t madds) {
  const cpu::Kernels& k = cpu::kernels();
  return madds <= kSmallGemv && k.capability != cpu::Capability::portable ? k.gemv_rows : nullptr;
}

// Products at least this large (multiply-adds) and this wide, called outside a parallel job, are
// split by columns across the cores: each part packs only its columns of b, so a wide weight
// matrix is packed once in all (batch shards would each pack all of it), and every element of c
// is the same dot product in the same order as unsplit.
constexpr int64_t kSplitWork = int64_t{1} << 22;
constexpr int64_t kSplitColumns = 256;

template <class T, class Part>
bool split_columns(bool tb, int64_t m, int64_t n, int64_t k, const T* b, int64_t ldb, T* c,
                   Part&& part) {
  if (m * n * k < kSplitWork || n < kSplitColumns || in_parallel_region() || parallel_threads() < 2)
    return false;
  const int parts = parallel_threads();
  parallel_run(parts, [&](int p) {
    const int64_t begin = n * p / parts, end = n * (p + 1) / parts;
    part(end - begin, tb ? b + begin * ldb : b + begin, c + begin);
  });
  return true;
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (split_columns(tb, m, n, k, b, ldb, c, [&](int64_t cols, const float* bp, float* cp) {
        gemm(ta, tb, m, cols, k, alpha, a, lda, bp, ldb, beta, cp, ldc);
      }))
    return;
  GemmTimer timer(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);
  // A product with one row or one column is a matrix-vector product: sgemv skips the packing
  // sgemm does for its blocked kernel, which dominates at these sizes.
  if ((m == 1 || n == 1) && k > 0 && beta == 0.0f) {
    // sgemv scales y by beta before adding, and 0 * NaN (an uninitialised output) is NaN.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = 0.0f;
    beta = 1.0f;
  }
  if (m == 1 && k > 0) {  // c (1,N) = a (1,K) op(b): c^T = op(b)^T a^T
    const int64_t a_step = ta ? lda : 1;
    if (auto gemv = small_gemv(n * k); tb && a_step == 1 && gemv)
      return gemv(n, k, alpha, b, ldb, a, c, 1);
    if (tb)  // b is (N,K): c = b a
      cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)k, alpha, b, (blasint)ldb, a,
                  (blasint)a_step, beta, c, 1);
    else  // b is (K,N): c = b^T a
      cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)k, (blasint)n, alpha, b, (blasint)ldb, a,
                  (blasint)a_step, beta, c, 1);
    return;
  }
  if (n == 1 && k > 0) {  // c (M,1) = op(a) b (K,1)
    const int64_t b_step = tb ? 1 : ldb;
    if (auto gemv = small_gemv(m * k); !ta && b_step == 1 && gemv)
      return gemv(m, k, alpha, a, lda, b, c, ldc);
    if (ta)  // a is (K,M): c = a^T b
      cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)k, (blasint)m, alpha, a, (blasint)lda, b,
                  (blasint)b_step, beta, c, (blasint)ldc);
    else  // a is (M,K)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)m, (blasint)k, alpha, a, (blasint)lda, b,
                  (blasint)b_step, beta, c, (blasint)ldc);
    return;
  }
  // A few rows against b^T at alpha 1 (an attention head's scores q k^T): the few-rows kernel
  // transposes b in registers as it goes, where small_gemm copies b^T first (10 x 10 x 16: half
  // small_gemm's time) and OpenBLAS's transposed products of 10 rows ran at 40 GFLOP/s.
  if (auto few_rows = !ta && tb && alpha == 1.0f ? cpu::few_rows_kernel(m, k) : nullptr)
    return few_rows(m, n, k, a, lda, b, ldb, beta, nullptr, c, ldc);
  // Up to twice as many rows, of a product small_gemm would take (at most kSmallGemmCols
  // columns), in two halves, each transposing b again: a `small` Transformer head's 15 x 15 x 32
  // scores ran at 28 GFLOP/s this way and at 16 in small_gemm (AVX2-only Zen 4). A wider b^T (a
  // weight) would be read twice: it keeps OpenBLAS's transposed product below.
  const SmallProductLimits limits = small_product_limits();
  if (auto few_rows = !ta && tb && alpha == 1.0f && n <= loops::kSmallGemmCols &&
                              m * n * k <= limits.split_few_rows_madds
                          ? cpu::few_rows_kernel((m + 1) / 2, k)
                          : nullptr) {
    const int64_t half = (m + 1) / 2;
    few_rows(half, n, k, a, lda, b, ldb, beta, nullptr, c, ldc);
    few_rows(m - half, n, k, a + half * lda, lda, b, ldb, beta, nullptr, c + half * ldc, ldc);
    return;
  }
  // Small products (an attention head's) in the kernels' small_gemm, up to the size where the
  // kernel set was measured faster than OpenBLAS.
  if (limits.small_gemm_madds > 0 && k > 0 && n <= loops::kSmallGemmCols &&
      m * n * k <= limits.small_gemm_madds) {
    float* bt = scratch_buffer<float, struct SmallGemmB>(static_cast<size_t>(k * n));
    return cpu::kernels().small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bt);
  }
  // A short side (a few rows of c, or a short k) with b read in place: dx = dy W and
  // dW += dy^T x for one sentence's positions (cpu::Kernels::short_side_max says where and why),
  // with a whole block of 16 columns at least, as the products measured.
  if (!tb && k > 0 && n >= 16 && (m <= limits.short_side_max || k <= limits.short_side_max) &&
      m * n * k <= cpu::kShortSideMadds)
    return cpu::kernels().small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
  // A few rows against a weight matrix, (M,K) x (N,K)^T with M <= 32: OpenBLAS runs the
  // transposed product c^T = b a^T 10-20% faster (measured at M 16-32, N 128-1536, K 128-768,
  // the transpose into c included), since its kernels block the long side better.
  if (!ta && tb && m >= 2 && m <= 32 && n >= 64 && n <= 2048 && k >= 32) {
    float* t = scratch_buffer<float, struct GemmTransposed>(static_cast<size_t>(m * n));  // (N,M)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)m, (blasint)k, alpha,
                b, (blasint)ldb, a, (blasint)lda, 0.0f, t, (blasint)m);
    for (int64_t i = 0; i < m; ++i) {
      float* ci = c + i * ldc;
      if (beta == 0.0f)  // c may be uninitialised: 0 * NaN would be NaN
        for (int64_t j = 0; j < n; ++j) ci[j] = t[j * m + i];
      else
        for (int64_t j = 0; j < n; ++j) ci[j] = beta * ci[j] + t[j * m + i];
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (split_columns(tb, m, n, k, b, ldb, c, [&](int64_t cols, const double* bp, double* cp) {
        gemm(ta, tb, m, cols, k, alpha, a, lda, bp, ldb, beta, cp, ldc);
      }))
    return;
  GemmTimer timer(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);
  // beta 0 must not read c, which may be uninitialised (a gradient's first share): OpenBLAS
  // versions that hand one-row products to gemv scale y by beta, and 0 * NaN is NaN.
  if (beta == 0.0)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = 0.0;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}

void use_fastest_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("TAPESTRY_BLAS_REEXEC")) return;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  if (!avx512) return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  setenv("TAPESTRY_BLAS_REEXEC", "1", 1);  // once only, even if exec fails
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the kernels already loaded.
}

const char* core_name() {
  return openblas_get_corename();
}

namespace {

// Whether OpenBLAS runs one of its AVX-512 kernel sets (read once: OpenBLAS chooses when it loads).
// A build for one target names it in capitals (SKYLAKEX), a DYNAMIC_ARCH build as SkylakeX.
bool openblas_runs_avx512() {
  static const bool avx512 = [] {
    const char* core = openblas_get_corename();
    for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids"})
      if (strcasecmp(core, name) == 0) return true;
    return false;
  }();
  return avx512;
}

// Against OpenBLAS's AVX-512 kernels, on a Zen 5 (`tapestry products`, one core, GFLOP/s, the
// AVX-512 set against OpenBLAS SkylakeX; the first runs, whose figures the later runs in the
// README's "A thirteenth session" repeat within 10-25%): small_gemm won up to 4,096 multiply-adds
// (16x16x16 NN 129 against 104; 10x16x16 96 against 84) and lost from about 5,000 (10x32x16 105
// against 122; 15x32x15 114 against 134; 32x64x32 126 against 206). The split few-rows scores won
// at 15x15x32 (73 against 64) and lost at 20x20x32 (63 against 96). Every short side lost
// (10x64x192 NN 115 against 186; 192x64x10 TN 112 against 182).
constexpr SmallProductLimits kAgainstAvx512Blas = {
    .small_gemm_madds = 4096, .split_few_rows_madds = 8192, .short_side_max = 0};

}  // namespace

SmallProductLimits small_product_limits() {
  const cpu::Kernels& k = cpu::kernels();
  SmallProductLimits limits = {.small_gemm_madds = k.small_gemm_madds,
                               .split_few_rows_madds = INT64_MAX,
                               .short_side_max = k.short_side_max};
  if (openblas_runs_avx512()) {
    limits.small_gemm_madds =
        std::min(limits.small_gemm_madds, kAgainstAvx512Blas.small_gemm_madds);
    limits.split_few_rows_madds = kAgainstAvx512Blas.split_few_rows_madds;
    limits.short_side_max = std::min(limits.short_side_max, kAgainstAvx512Blas.short_side_max);
  }
  return limits;
}

void set_threads(int n) {
  openblas_set_num_threads(n);
}
int threads() {
  return openblas_get_num_threads();
}

}  // namespace tapestry::blas
