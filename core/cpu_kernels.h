// The hot loops compiled once per vector width (AVX-512, AVX2, portable) and the table of them
// chosen at start-up from the CPU's features, or forced with TAPESTRY_KERNELS.
#pragma once

#include <cstdint>
#include <string_view>

#include "tapestry/core/vector_loops.h"

namespace tapestry::cpu {

// What a set of kernels needs of the CPU, from the most to the least.
//   avx512:   AVX-512 F, BW, DQ, VL with AVX2 and FMA (x86-64-v4): 16 floats per register.
//   avx2:     AVX2 and FMA (x86-64-v3): 8 floats per register.
//   portable: plain loops, the reference the others are tested against; any CPU.
enum class Capability { portable, avx2, avx512 };

std::string_view capability_name(Capability c);

// panels_product takes K in blocks of kProductDepth (its sums' blocks) and packs a's rows for its
// micro-kernels at most kProductPackRows at a time (with the 16-row panels of a block, 1.5 MB:
// a 2 MB L2 keeps them while every panel passes).
inline constexpr int64_t kProductDepth = 512;
inline constexpr int64_t kProductPackRows = 768;
inline constexpr int64_t kProductPackSlack = 8;  // floats past the rows that packing may write
inline int64_t product_pack_floats(int64_t m, int64_t k) {
  return (m < kProductPackRows ? m : kProductPackRows) * (k < kProductDepth ? k : kProductDepth) +
         kProductPackSlack;
}

// The kernels of one capability. Each is compiled from core/cpu_kernels_body.inc with that
// capability's instruction set, so one build carries all three and runs on any x86-64 CPU.
struct Kernels {
  Capability capability;
  // Panels [p0, p1) of c (M,N) = (a (M,K) W^T + beta c) + bias, W packed as PackedMatrix
  // describes (panels of 16 rows of W, k-major, panel p at panels + p*K*16); lda, ldc are row
  // strides; bias (N) may be null; beta = 0 never reads c. Every element is the same chain of
  // fused multiply-adds in every capability (over each block of 512 k in order, the blocks added
  // in order, then beta c, then the bias), so all three give the same bits.
  // Where packs_a, a_pack is room for product_pack_floats(m, k) floats into which the kernel
  // copies a's rows (m > 1); elsewhere it reads a in place and a_pack may be null.
  void (*panels_product)(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* panels, int64_t p0, int64_t p1, float beta, const float* bias,
                         float* c, int64_t ldc, float* a_pack);
  bool packs_a;
  // W (N,K) row-major with row stride ldw into panels of 16 rows (rows past N are zero), as
  // panels_product reads it.
  void (*pack_panels)(const float* w, int64_t n, int64_t k, int64_t ldw, float* panels);
  // c[i*ldc] += alpha * dot(row i of w (N,K), x) for each of the N rows, row stride ldw: a
  // matrix-vector product for sizes where OpenBLAS's call overhead dominates. The sums' order
  // differs between capabilities (the width of the lanes).
  void (*gemv_rows)(int64_t n, int64_t k, float alpha, const float* w, int64_t ldw, const float* x,
                    float* c, int64_t ldc);
  // c (M,N) = alpha op(a) op(b) + beta c for small products (loops::small_gemm); bt is room for
  // K x N floats where tb, unused (may be null) where not. Each element's sum runs over k in
  // order.
  void (*small_gemm)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                     float* bt);
  // The size (multiply-adds, at most loops::kSmallGemmCols columns) up to which blas::gemm sends
  // a product to small_gemm rather than OpenBLAS, whose call and packing dominate there; 0 in the
  // portable set (its small_gemm is the reference loop). This and short_side_max below were
  // measured against OpenBLAS's AVX2 kernels; blas::small_product_limits() lowers them where
  // OpenBLAS runs its AVX-512 ones.
  int64_t small_gemm_madds;
  // The shortest side (rows of c, or k) up to which a product with b read in place (not
  // transposed), at least 16 columns wide and of at most kShortSideMadds multiply-adds, runs in
  // small_gemm rather than OpenBLAS: dx = dy W and dW += dy^T x for the 10 positions of one
  // sentence. 0: never (the portable set).
  int64_t short_side_max;
  // c (M,N) = (a (M,K) W^T + beta c) + bias for W (N,K) row-major read in place (row stride
  // ldw), with 1 <= M <= few_rows_max and K <= kProductDepth; bias (N) may be null; beta = 0
  // never reads c. Each element has the bits panels_product gives it, so a weight read once needs
  // no pack. The portable set's is the plain reference.
  void (*few_rows_product)(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                           const float* w, int64_t ldw, float beta, const float* bias, float* c,
                           int64_t ldc);
  int64_t few_rows_max;

  // The elementwise loops of core/vector_loops.h in float, each as described there. Their sums
  // and fused multiply-adds differ between capabilities in the last bits.
  void (*exp)(const float* x, float* y, int64_t n);      // y = e^x; y may be x
  void (*tanh)(const float* x, float* y, int64_t n);     // y = tanh x
  void (*sigmoid)(const float* x, float* y, int64_t n);  // y = 1 / (1 + e^-x)
  float (*max_value)(const float* x, int64_t n);
  float (*softmax_rest)(const float* x, int64_t n, float m);
  void (*softmax_grad)(const float* z, float* d, int64_t n, float m, float r, float g, float u);
  void (*tanh_of_sum)(const float* p, const float* q, float* y, int64_t n);
  void (*tanh_dots)(const float* p, const float* q, const float* v, int64_t n, int64_t rows,
                    float* e);
  void (*gru_row)(const float* x, const float* w, const float* bias, const float* h, float* r,
                  float* z, float* n, float* ghn, float* y, int64_t hs);
  void (*lstm_row)(const float* x, const float* w, const float* bias, const float* c, float* g,
                   float* c2, float* h2, int64_t hs);
  void (*adam_update)(float* x, float* dx, float* m, float* v, int64_t n,
                      const loops::AdamScalars<float>& k);
};

inline constexpr int64_t kShortSideMadds = int64_t{1} << 20;

// Whether this CPU can run the kernels of c.
bool cpu_supports(Capability c);

// The kernels of c, or null where this CPU cannot run them (or the build lacks them: on a CPU
// other than x86-64 only portable exists).
const Kernels* kernels_for(Capability c);

// Whether this is a CPU with AVX-512 whose units are 256 bits wide, each 16-float instruction
// taking two passes (AMD's family 19h, Zen 4).
bool splits_512_bit_vectors();

// The kernels in use: the best this CPU supports, unless TAPESTRY_KERNELS names another
// (avx512, avx2 or portable; chosen once, at the first call). Where splits_512_bit_vectors(),
// the avx512 set takes the avx2 set's Adam step, which is faster there. A name that is not one of
// those, or one this CPU cannot run, throws ValueError naming the variable and the value.
const Kernels& kernels();

// Makes k the kernels in use from now on, in place of kernels()'s choice; null restores that
// choice. For the tests, which run the AVX-512 set emulated (tests/emulated/) on a CPU without
// AVX-512: call it before any work, as a set's packs are not another's.
void replace_kernels_for_testing(const Kernels* k);

// The kernels in use's few_rows_product where it takes c = a W^T of m rows and depth k (2 <= m <=
// few_rows_max, 0 < k <= kProductDepth; one row has kernels of its own) and the kernels are
// vectorised; null elsewhere (the portable set's is the reference, not a fast path).
decltype(Kernels::few_rows_product) few_rows_kernel(int64_t m, int64_t k);

// The capability TAPESTRY_KERNELS's value `name` asks for; throws ValueError for any other
// name, or for one this CPU cannot run.
Capability parse_capability(std::string_view name);

}  // namespace tapestry::cpu
