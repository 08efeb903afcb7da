// Packed weights: W repacked once into panels of 16 rows, multiplied by the kernels of
// core/cpu_kernels_body.inc (AVX-512, AVX2 or portable, chosen at run time); the pack cache.
#include "tapestry/core/packed.h"

#include <fmt/format.h>

#include <algorithm>

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/gemm_profile.h"
#include "tapestry/core/parallel.h"

namespace tapestry {

bool packed_kernel_available() {
  return cpu::kernels().capability != cpu::Capability::portable;
}

namespace {
// Products with at least this many multiply-adds, outside a parallel job, split their panels
// across the cores.
constexpr int64_t kSplitWork = int64_t{1} << 22;
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
  static_assert(kPanel == 16, "cpu_kernels_body.inc packs panels of 16 rows");
  float* out = buffer_.data<float>();
  cpu::kernels().pack_panels(w.data<float>(), n, k, out);
  data_ = out;
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
  const auto kernel = cpu::kernels().panels_product;
  const int parts = parallel_threads();
  if (parts >= 2 && panels >= parts && m * w.rows() * k >= kSplitWork && !in_parallel_region()) {
    parallel_run(parts, [&](int part) {
      kernel(m, w.rows(), k, a, lda, w.panel(0), panels * part / parts, panels * (part + 1) / parts,
             beta, bias, c, ldc);
    });
    return;
  }
  kernel(m, w.rows(), k, a, lda, w.panel(0), 0, panels, beta, bias, c, ldc);
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
