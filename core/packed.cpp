// Packed weights and their product kernel: up to 6 rows of a against a 16-column panel per call
// of the micro-kernel, 12 AVX2 accumulators, the panel read in order (portable loops without AVX2).
#include "tapestry/core/packed.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tapestry/core/gemm_profile.h"
#include "tapestry/core/parallel.h"

namespace tapestry {

bool packed_kernel_available() {
#if defined(__AVX2__) && defined(__FMA__)
  return true;
#else
  return false;
#endif
}

namespace {

constexpr int64_t kPanel = PackedMatrix::kPanel;
constexpr int kLanes = 8;               // floats per AVX register
constexpr int kVecs = kPanel / kLanes;  // registers per row of a panel
constexpr int kRows = 6;                // most rows of a (and c) per micro-kernel call
// K is taken in blocks of at most this many, so a panel's block (16 x 512 floats, 32 KB) stays
// close while every row tile of a passes over it.
constexpr int64_t kDepth = 512;
// Products with at least this many multiply-adds, outside a parallel job, split their panels
// across the cores.
constexpr int64_t kSplitWork = int64_t{1} << 22;

// c rows (MR,nr) = a rows (MR,kc) x panel block (kc,16)^T, then c = (acc + beta c) + bias (the
// bias, if any, is given on the last block of k only). Every element
// is the chain acc = fma(a_k, w_k, acc) over the block's k in order. 6 rows x 2 registers are 12
// accumulators; a step of k loads 2 panel registers and broadcasts 6 elements of a for 12 fused
// multiply-adds, so the loads keep up with both FMA units. Each step of k also prefetches one line
// of the next panel block: line (k * pf_step) >> 16 from pf (see panels_product).
template <int MR>
void micro(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b,
           float* __restrict c, int64_t ldc, int64_t nr, float beta, const float* bias,
           const float* pf, int64_t pf_step) {
  alignas(32) float t[MR][kPanel];
#if defined(__AVX2__) && defined(__FMA__)
  // Loops over constant indices, fully unrolled, so that GCC keeps acc in registers.
  __m256 acc[MR][kVecs];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(pf + ((k * pf_step) >> 16) * kPanel), _MM_HINT_T0);
    // Rows of 64 bytes in a 64-byte aligned buffer.
    const __m256 b0 = _mm256_load_ps(b + k * kPanel), b1 = _mm256_load_ps(b + k * kPanel + kLanes);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * lda + k);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) _mm256_store_ps(t[i] + kLanes * v, acc[i][v]);
  if (nr == kPanel) {
    const __m256 vb = _mm256_set1_ps(beta);
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < kVecs; ++v) {
        float* p = c + i * ldc + kLanes * v;
        __m256 x = _mm256_load_ps(t[i] + kLanes * v);
        // beta = 0 must not read c, which may be uninitialised (0 * NaN is NaN).
        if (beta != 0.0f) x = _mm256_fmadd_ps(vb, _mm256_loadu_ps(p), x);
        if (bias) x = _mm256_add_ps(x, _mm256_loadu_ps(bias + kLanes * v));
        _mm256_storeu_ps(p, x);
      }
    return;
  }
#else
  (void)pf, (void)pf_step;
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < kPanel; ++j) t[i][j] = 0.0f;
  for (int64_t k = 0; k < kc; ++k)
    for (int i = 0; i < MR; ++i)
      for (int64_t j = 0; j < kPanel; ++j)
        t[i][j] = std::fma(a[i * lda + k], b[k * kPanel + j], t[i][j]);
#endif
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      float* p = c + i * ldc + j;
      const float x = beta == 0.0f ? t[i][j] : std::fma(beta, *p, t[i][j]);
      *p = bias ? x + bias[j] : x;
    }
}

using Micro = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t,
                       float, const float*, const float*, int64_t);
constexpr Micro kMicro[kRows + 1] = {nullptr,  micro<1>, micro<2>, micro<3>,
                                     micro<4>, micro<5>, micro<6>};

// Panels [p0, p1) of c = a W^T + beta c (+ bias). The rows are cut into tiles of nearly equal
// height (at most 6): 32 rows are 6, 6, 5, 5, 5, 5 rather than five 6s and a 2, whose kernel would
// keep only 4 accumulators busy. A panel block is read from memory by the first tile only, in a
// burst of one line per step of k that the hardware prefetcher does not keep up with (a weight
// such as the 8000x512 output layer does not stay in cache between steps), so while the tiles
// pass over block p they prefetch block p+1, each tile its share of the lines.
void panels_product(int64_t m, const float* a, int64_t lda, const PackedMatrix& w, int64_t p0,
                    int64_t p1, float beta, const float* bias, float* c, int64_t ldc) {
  const int64_t k = w.cols(), n = w.rows();
  const int64_t tiles = (m + kRows - 1) / kRows;
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - k0);
    const float b_here = k0 == 0 ? beta : 1.0f;  // later blocks add to the earlier ones
    const bool last = k0 + kc == k;
    const int64_t chunk = (kc + tiles - 1) / tiles;  // lines of the next block per tile
    for (int64_t p = p0; p < p1; ++p) {
      const float* b = w.panel(p) + k0 * kPanel;
      // The next block: the next panel's, or the first panel's next k block, or none.
      const float* next = p + 1 < p1 ? w.panel(p + 1) + k0 * kPanel
                          : !last    ? w.panel(p0) + (k0 + kc) * kPanel
                                     : nullptr;
      const int64_t next_kc = p + 1 < p1 ? kc : std::min(kDepth, k - k0 - kc);
      const int64_t j0 = p * kPanel, nr = std::min(kPanel, n - j0);
      for (int64_t tile = 0, i = 0; tile < tiles; ++tile) {
        const int64_t rows = m * (tile + 1) / tiles - i;
        // This tile's lines of the next block, spread over its kc steps by a 16.16 fixed-point
        // step rounded up so that step kc-1 lands on the last line and every line is touched;
        // with none left (or no next block) it touches its own block's first line.
        const int64_t lines = next ? std::min(chunk, next_kc - tile * chunk) : 0;
        const float* pf = lines > 0 ? next + tile * chunk * kPanel : b;
        const int64_t pf_step = lines > 1 ? (((lines - 1) << 16) + kc - 2) / (kc - 1) : 0;
        kMicro[rows](kc, a + i * lda + k0, lda, b, c + i * ldc + j0, ldc, nr, b_here,
                     last && bias ? bias + j0 : nullptr, pf, pf_step);
        i += rows;
      }
    }
  }
}

// Rows [r0, r0+8) x columns [k0, k0+8) of w (row stride ldw) into the panel (row length 16) at
// column offset j0: 8 rows read in order, transposed in registers, written as 8 32-byte runs.
#if defined(__AVX2__) && defined(__FMA__)
void pack_block8(const float* w, int64_t ldw, float* panel, int64_t k0, int64_t j0) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(w + i * ldw);
  // The usual 8x8 transpose: pairs, then quads, then the 128-bit halves.
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  const __m256 out[8] = {
      _mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
      _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
      _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
      _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
  for (int i = 0; i < 8; ++i) _mm256_store_ps(panel + (k0 + i) * kPanel + j0, out[i]);
}
#endif

}  // namespace

void PackedMatrix::pack(const Tensor& w) {
  if (w.dtype() != DType::f32)
    throw DTypeError(fmt::format("pack: expected a float32 matrix, got {} {}",
                                 dtype_name(w.dtype()), w.shape().str()));
  if (w.ndim() != 2)
    throw ShapeError(fmt::format("pack: expected an (N,K) matrix, got {}", w.shape().str()));
  const int64_t n = w.dim(0), k = w.dim(1);
  const int64_t size = std::max<int64_t>((n + kPanel - 1) / kPanel * k * kPanel, 1);
  // The new buffer first: if it cannot be had, this pack stays as it was.
  if (!buffer_.defined() || buffer_.numel() < size) buffer_ = Tensor::empty({size}, DType::f32);
  n_ = n, k_ = k;
  float* out = buffer_.data<float>();
  data_ = out;
  const float* src = w.data<float>();
  for (int64_t p = 0; p < panels(); ++p) {
    float* panel = out + p * k_ * kPanel;
    int64_t done = 0;  // columns packed by whole 8x8 blocks, for the rows that have them
#if defined(__AVX2__) && defined(__FMA__)
    if (p * kPanel + kPanel <= n_) {
      done = k_ / 8 * 8;
      for (int64_t k0 = 0; k0 < done; k0 += 8)
        for (int64_t j0 = 0; j0 < kPanel; j0 += 8)
          pack_block8(src + (p * kPanel + j0) * k_ + k0, k_, panel, k0, j0);
    }
#endif
    for (int64_t j = 0; j < kPanel; ++j) {
      const int64_t row = p * kPanel + j;
      const float* wr = src + row * k_;
      for (int64_t k = done; k < k_; ++k) panel[k * kPanel + j] = row < n_ ? wr[k] : 0.0f;
    }
  }
}

void gemm_packed(int64_t m, int64_t k, const float* a, int64_t lda, const PackedMatrix& w,
                 float beta, float* c, int64_t ldc, const float* bias) {
  if (k != w.cols())
    throw ShapeError(fmt::format("gemm_packed: a ({},{}) does not fit the packed matrix ({},{})", m,
                                 k, w.rows(), w.cols()));
  if (m <= 0 || w.rows() == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < w.rows(); ++j)
        c[i * ldc + j] = (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]) + (bias ? bias[j] : 0.0f);
    return;
  }
  blas::GemmTimer timer('N', 'P', m, w.rows(), k);
  const int64_t panels = w.panels();
  const int parts = parallel_threads();
  if (parts >= 2 && panels >= parts && m * w.rows() * k >= kSplitWork && !in_parallel_region()) {
    parallel_run(parts, [&](int part) {
      panels_product(m, a, lda, w, panels * part / parts, panels * (part + 1) / parts, beta, bias,
                     c, ldc);
    });
    return;
  }
  panels_product(m, a, lda, w, 0, panels, beta, bias, c, ldc);
}

// ---------------------------------------------------------------------------------------------
// WeightPacks

const PackedMatrix& WeightPacks::get(const Tensor& w) {
  const void* key = w.data<float>();
  Entry* entry = nullptr;
  {
    std::lock_guard lock(mu_);
    for (auto& e : entries_)
      if (e->key == key && e->shape == w.shape()) {
        entry = e.get();
        break;
      }
    if (!entry) {
      entries_.push_back(std::make_unique<Entry>());
      entry = entries_.back().get();
      entry->key = key;
      entry->shape = w.shape();
    }
  }
  // Packing happens under the entry's own lock: another thread wanting the same pack waits for
  // it, one wanting another pack does not.
  std::lock_guard lock(entry->mu);
  const uint64_t generation = generation_.load();
  if (entry->generation != generation) {
    entry->pack.pack(w);
    entry->generation = generation;
  }
  return entry->pack;
}

void WeightPacks::invalidate() {
  generation_.fetch_add(1);
}

size_t WeightPacks::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace tapestry
