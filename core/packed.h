// Packed weights: a float32 weight matrix W (N,K) repacked once for products c = a W^T, so the
// product kernel reads it in order instead of OpenBLAS repacking it at every call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "tapestry/core/tensor.h"

namespace tapestry {

// Whether gemm_packed has its AVX2 kernel in this build of the library (a function, so a program
// built with other flags than the library sees the library's answer). Without it the products
// that could read packs go to BLAS instead (the portable loops are there for correctness, not
// speed).
bool packed_kernel_available();

// Which matrix of a stored (R,C) float32 tensor w a pack holds: W = the columns [col0, col0 +
// cols) of w (all of them by default), or, transposed, W = that block's transpose. A pack of a
// block serves a weight whose copy the model multiplies (a decoder cell's W_ih split at the
// embedding); a transposed pack serves the backward pass's dx = dy W of a forward x W^T.
struct PackView {
  int64_t col0 = 0;
  int64_t cols = -1;  // -1: to the last column
  bool transposed = false;
};

// W (N,K) in panels of kPanel rows of W (columns of c), each panel k-major: element (j, k) of
// panel p is W[p*kPanel + j][k], at (p*K + k)*kPanel + j; rows past N are zero.
class PackedMatrix {
 public:
  static constexpr int64_t kPanel = 16;

  // Packs the view's W of w, a contiguous (R,C) float32 tensor, reusing this pack's memory when
  // it is big enough. Transposed, W is never made: a panel of W = w^T holds 16 adjacent columns
  // of w, one 16-float run from each row. Throws ShapeError naming w and the view if the
  // columns are not inside w.
  void pack(const Tensor& w, PackView view = {});
  int64_t rows() const { return n_; }  // N
  int64_t cols() const { return k_; }  // K
  int64_t panels() const { return (n_ + kPanel - 1) / kPanel; }
  const float* panel(int64_t p) const { return data_ + p * k_ * kPanel; }

 private:
  Tensor buffer_;
  const float* data_ = nullptr;
  int64_t n_ = 0, k_ = 0;
};

// c (M,N) = (a (M,K) W^T + beta c) + bias, row-major with row strides lda and ldc; bias (N) may
// be null. Each element of c is computed the same way whatever M and however the work is split
// (a chain of fused multiply-adds over each block of 512 k, the blocks added in order), so a
// row's result does not depend on the rows beside it; the bias is added last, as a separate add
// after the product would. Products big enough, called outside a parallel job, are split by
// panels across the cores. Throws ShapeError naming both shapes if K differs from w's.
void gemm_packed(int64_t m, int64_t k, const float* a, int64_t lda, const PackedMatrix& w,
                 float beta, float* c, int64_t ldc, const float* bias = nullptr);

// The same product with rows [row0, row0 + n) of W alone: c (M,n) = (a W[row0 : row0 + n]^T +
// beta c) + bias (n), each element the bits gemm_packed gives it. The rows must be whole panels:
// row0 a multiple of 16, and n one too unless the rows run to the end of W; ShapeError otherwise.
void gemm_packed_rows(int64_t m, int64_t k, const float* a, int64_t lda, const PackedMatrix& w,
                      int64_t row0, int64_t n, float beta, float* c, int64_t ldc,
                      const float* bias = nullptr);
// Whether rows [row0, row0 + n) of a matrix of `rows` rows are whole panels of its pack.
bool whole_panels(int64_t row0, int64_t n, int64_t rows);

// Packs of weights that stay unchanged for as long as the cache is in use: one decoding call, or
// one training step (invalidate() after the weights change). A pack is made the first time it is
// asked for, by whichever thread asks; keys are the weights' storage, so only long-lived tensors
// (parameters) may be looked up, never temporaries whose memory could be reused.
class WeightPacks {
 public:
  // The pack of the view's W of w (float32), made now if it is missing or out of date; each
  // view of w has its own pack. Thread-safe.
  const PackedMatrix& get(const Tensor& w, PackView view = {});
  // The same pack, or null where making it would likely serve one read: it is not made yet for
  // these weights, and in the generation before, its products read each row of W once in all
  // (`rows` of them here: a block's, or all N). The caller then multiplies w in place (a
  // Transformer's layer weights in a training step; a weight read at every time step keeps its
  // pack). Reads through get() count as reading all of W.
  const PackedMatrix* get_unless_read_once(const Tensor& w, PackView view, int64_t rows);
  // Every pack is out of date (the weights have changed); their memory is kept for the repacking.
  // Call it between uses only: never while another thread is in get() or reads a pack.
  void invalidate();
  size_t size() const;
  // The weights' version as this cache knows it: a value no cache has had before, changed by
  // invalidate(). What a caller derives from the weights besides packs (the raw decoder's tables
  // of projected embeddings) stays valid while the generation does.
  uint64_t generation() const { return generation_.load(); }

 private:
  struct Entry {
    const void* key = nullptr;
    Shape shape;
    PackView view;
    uint64_t generation = 0;  // of the weights the pack was made from
    // Rows of W read in the generation read_generation, and in the one before that read any.
    uint64_t read_generation = 0;
    int64_t rows_read = 0, rows_read_before = 0;
    std::mutex mu;
    PackedMatrix pack;
  };
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Entry& entry(const Tensor& w, PackView& view);
  // Counts a read of `rows` rows of e's W in the current generation; true if the pack is made.
  static bool count_read(Entry& e, uint64_t generation, int64_t rows);
  static uint64_t next_generation();  // unique across every cache
  std::atomic<uint64_t> generation_{next_generation()};
};

}  // namespace tapestry
