// Packed weights: W repacked once into panels of 16 rows, multiplied by the kernels of
// core/cpu_kernels_panels.inc (AVX-512, AVX2 or portable, chosen at run time); the pack cache.
#include "tapestry/core/packed.h"

#include <fmt/format.h>

#include <algorithm>

#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/gemm_profile.h"
#include "tapestry/core/parallel.h"
#include "tapestry/core/scratch.h"

namespace tapestry {

bool packed_kernel_available() {
  return cpu::kernels().capability != cpu::Capability::portable;
}

namespace {
// Products with at least this many multiply-adds, outside a parallel job, split their panels
// across the cores.
constexpr int64_t kSplitWork = int64_t{1} << 22;

// This thread's room for the product kernel's packed rows of a, on a cache line boundary; null
// where the kernel reads a in place.
float* a_pack_buffer(int64_t m, int64_t k) {
  if (!cpu::kernels().packs_a || m <= 1) return nullptr;
  constexpr int64_t kLine = 16;  // floats in a 64-byte line
  float* p = scratch_buffer<float, struct ProductPack>(
      static_cast<size_t>(cpu::product_pack_floats(m, k) + kLine));
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  return p + (64 - address % 64) % 64 / sizeof(float);
}
}  // namespace

void PackedMatrix::pack(const Tensor& w, PackView view) {
  if (w.dtype() != DType::f32)
    throw DTypeError(fmt::format("pack: expected a float32 matrix, got {} {}",
                                 dtype_name(w.dtype()), w.shape().str()));
  if (w.ndim() != 2)
    throw ShapeError(fmt::format("pack: expected a matrix, got {}", w.shape().str()));
  const int64_t rows = w.dim(0), ld = w.dim(1);
  const int64_t cols = view.cols < 0 ? ld - view.col0 : view.cols;
  if (view.col0 < 0 || cols < 0 || view.col0 + cols > ld)
    throw ShapeError(fmt::format("pack: columns [{}, {}) are not inside {}", view.col0,
                                 view.col0 + cols, w.shape().str()));
  const int64_t n = view.transposed ? cols : rows, k = view.transposed ? rows : cols;
  const int64_t size = std::max<int64_t>((n + kPanel - 1) / kPanel * k * kPanel, 1);
  // The new buffer first: if it cannot be had, this pack stays as it was.
  if (!buffer_.defined() || buffer_.numel() < size) buffer_ = Tensor::empty({size}, DType::f32);
  n_ = n, k_ = k;
  static_assert(kPanel == 16, "cpu_kernels_panels.inc packs panels of 16 rows");
  float* out = buffer_.data<float>();
  const float* src = w.data<float>() + view.col0;
  if (!view.transposed) {
    cpu::kernels().pack_panels(src, n, k, ld, out);
  } else {
    // Element (j, kk) of panel p is W[p*16 + j][kk] = w[kk][col0 + p*16 + j]: 16 floats of a row.
    for (int64_t p = 0; p < panels(); ++p) {
      const int64_t j0 = p * kPanel, width = std::min(kPanel, n - j0);
      float* dst = out + p * k * kPanel;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float* row = src + kk * ld + j0;
        float* d = dst + kk * kPanel;
        for (int64_t j = 0; j < width; ++j) d[j] = row[j];
        for (int64_t j = width; j < kPanel; ++j) d[j] = 0.0f;
      }
    }
  }
  data_ = out;
}

bool whole_panels(int64_t row0, int64_t n, int64_t rows) {
  constexpr int64_t p = PackedMatrix::kPanel;
  return row0 >= 0 && n >= 0 && row0 + n <= rows && row0 % p == 0 &&
         (n % p == 0 || row0 + n == rows);
}

void gemm_packed(int64_t m, int64_t k, const float* a, int64_t lda, const PackedMatrix& w,
                 float beta, float* c, int64_t ldc, const float* bias) {
  gemm_packed_rows(m, k, a, lda, w, 0, w.rows(), beta, c, ldc, bias);
}

void gemm_packed_rows(int64_t m, int64_t k, const float* a, int64_t lda, const PackedMatrix& w,
                      int64_t row0, int64_t n, float beta, float* c, int64_t ldc,
                      const float* bias) {
  if (k != w.cols())
    throw ShapeError(fmt::format("gemm_packed: a ({},{}) does not fit the packed matrix ({},{})", m,
                                 k, w.rows(), w.cols()));
  if (!whole_panels(row0, n, w.rows()))
    throw ShapeError(fmt::format(
        "gemm_packed: rows [{}, {}) of the packed matrix ({},{}) are not whole panels of {}", row0,
        row0 + n, w.rows(), w.cols(), PackedMatrix::kPanel));
  if (m <= 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]) + (bias ? bias[j] : 0.0f);
    return;
  }
  blas::GemmTimer timer('N', 'P', m, n, k);
  // The rows' panels are a packed matrix of n rows on their own, starting at their first panel.
  const float* panels = w.panel(row0 / PackedMatrix::kPanel);
  const int64_t count = (n + PackedMatrix::kPanel - 1) / PackedMatrix::kPanel;
  const auto kernel = cpu::kernels().panels_product;
  const int parts = parallel_threads();
  if (parts >= 2 && count >= parts && m * n * k >= kSplitWork && !in_parallel_region()) {
    parallel_run(parts, [&](int part) {
      kernel(m, n, k, a, lda, panels, count * part / parts, count * (part + 1) / parts, beta, bias,
             c, ldc, a_pack_buffer(m, k));
    });
    return;
  }
  kernel(m, n, k, a, lda, panels, 0, count, beta, bias, c, ldc, a_pack_buffer(m, k));
}

// ---------------------------------------------------------------------------------------------
// WeightPacks

namespace {
// Locks mu, spinning first. A pack takes microseconds to make, and both shards of a training step
// ask for the same packs at about the same time; a thread put to sleep on the contended mutex
// instead took 100-250 us to wake on the 2-core VMs here (see parallel_workers_awake).
constexpr int kLockSpins = 8192;
std::unique_lock<std::mutex> lock_spinning(std::mutex& mu) {
  for (int i = 0; i < kLockSpins; ++i) {
    if (mu.try_lock()) return std::unique_lock(mu, std::adopt_lock);
    spin_pause();
  }
  return std::unique_lock(mu);
}
}  // namespace

WeightPacks::Entry& WeightPacks::entry(const Tensor& w, PackView& view) {
  const void* key = w.data<float>();
  if (view.cols < 0 && w.ndim() == 2) view.cols = w.dim(1) - view.col0;  // one key for "to the end"
  auto same = [&](const PackView& v) {
    return v.col0 == view.col0 && v.cols == view.cols && v.transposed == view.transposed;
  };
  const auto lock = lock_spinning(mu_);
  for (auto& e : entries_)
    if (e->key == key && e->shape == w.shape() && same(e->view)) return *e;
  entries_.push_back(std::make_unique<Entry>());
  Entry& e = *entries_.back();
  e.key = key;
  e.shape = w.shape();
  e.view = view;
  return e;
}

bool WeightPacks::count_read(Entry& e, uint64_t generation, int64_t rows) {
  if (e.read_generation != generation) {
    e.rows_read_before = e.rows_read;
    e.rows_read = 0;
    e.read_generation = generation;
  }
  e.rows_read += rows;
  return e.generation == generation;
}

namespace {
// W's rows: w's own, or its columns' for a transposed view.
int64_t view_rows(const Tensor& w, const PackView& view) {
  return view.transposed ? view.cols : w.dim(0);
}
}  // namespace

const PackedMatrix& WeightPacks::get(const Tensor& w, PackView view) {
  Entry& e = entry(w, view);
  // Packing happens under the entry's own lock: another thread wanting the same pack waits for
  // it, one wanting another pack does not.
  const auto lock = lock_spinning(e.mu);
  const uint64_t generation = generation_.load();
  if (!count_read(e, generation, view_rows(w, view))) {
    e.pack.pack(w, view);
    e.generation = generation;
  }
  return e.pack;
}

const PackedMatrix* WeightPacks::get_unless_read_once(const Tensor& w, PackView view,
                                                      int64_t rows) {
  Entry& e = entry(w, view);
  const auto lock = lock_spinning(e.mu);
  const uint64_t generation = generation_.load();
  if (!count_read(e, generation, rows)) {
    const int64_t n = view_rows(w, view);
    if (e.rows_read <= n && e.rows_read_before > 0 && e.rows_read_before <= n) return nullptr;
    e.pack.pack(w, view);
    e.generation = generation;
  }
  return &e.pack;
}

uint64_t WeightPacks::next_generation() {
  static std::atomic<uint64_t> next{1};  // entries start at 0: never a generation
  return next.fetch_add(1);
}

void WeightPacks::invalidate() {
  generation_.store(next_generation());
}

size_t WeightPacks::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace tapestry
