// Internal to models/rnn_inference.cpp: the pieces RNN decoding is built from on raw buffers: a
// weight's product through its pack, a recurrent cell's weights, the table of an embedding's rows
// already multiplied by a product, and one step of a cell (in rnn_inference_parts.cpp).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>
#include <vector>

#include "tapestry/core/packed.h"
#include "tapestry/nn/parameter.h"
#include "tapestry/nn/rnn.h"

namespace tapestry::models::detail {

using Buffer = std::vector<float>;  // keeps its capacity from batch to batch

inline float* sized(Buffer& b, int64_t n) {
  b.resize(static_cast<size_t>(n));
  return b.data();
}

// A weight (or a block of its columns) with its pack, resolved once per batch, and its bias
// (null: none).
struct Product {
  const nn::Parameter* weight = nullptr;
  const nn::Parameter* bias = nullptr;
  const PackedMatrix* pack = nullptr;
  PackView view;  // the columns multiplied: all of them by default

  // Points pack at this batch's pack of the weight (none for a product the model lacks).
  void resolve(WeightPacks& packs) {
    if (weight) pack = &packs.get(weight->value, view);
  }
  int64_t out() const { return weight->value.dim(0); }
  int64_t in() const { return view.cols >= 0 ? view.cols : weight->value.dim(1) - view.col0; }
  // y (rows,N) = x (rows,K) W^T + b: the call ops::affine and ops::matmul make with a pack.
  static Product of(const nn::Parameter* weight, const nn::Parameter* bias, PackView view = {}) {
    Product p;
    p.weight = weight;
    p.bias = bias;
    p.view = view;
    return p;
  }
  void run(const float* x, int64_t rows, float* y) const {
    gemm_packed(rows, in(), x, in(), *pack, 0.0f, y, out(),
                bias ? bias->value.data<float>() : nullptr);
  }
  // y (1,N) = x W^T (+ b) in two halves of whole panels, the second half first if `second_first`.
  // One sentence's recurrent product reads W (a 64-wide GRU's W_hh: 48 KB, more than L1 holds)
  // from L2 at every step; read in turn in either order, each step finds in L1 the half it read
  // last (48 KB from L2 at every step: 565 -> 475 ns on the AVX2-only Zen 4 of the README). Every
  // column is the one run() gives.
  void run_halves(const float* x, float* y, bool second_first) const {
    const int64_t n = out(), panels = (n + PackedMatrix::kPanel - 1) / PackedMatrix::kPanel;
    if (panels < 2) return run(x, 1, y);
    const int64_t half = panels / 2 * PackedMatrix::kPanel;
    const float* b = bias ? bias->value.data<float>() : nullptr;
    const auto part = [&](int64_t row0, int64_t rows) {
      gemm_packed_rows(1, in(), x, in(), *pack, row0, rows, 0.0f, y + row0, n,
                       b ? b + row0 : nullptr);
    };
    if (second_first) {
      part(half, n - half);
      part(0, half);
    } else {
      part(0, half);
      part(half, n - half);
    }
  }
  // y (1,N) = x W^T + add: a product without a bias of its own, then a separate add of `add`
  // (N), as ops::add adds it (the kernel adds a bias last, once the product is rounded).
  void run_adding(const float* x, float* y, const float* add) const {
    assert(!bias && "run_adding: the product has a bias of its own");
    gemm_packed(1, in(), x, in(), *pack, 0.0f, y, out(), add);
  }
};

// One recurrent cell's weights: the input product (with b_ih), the hidden product and b_hh.
struct CellWeights {
  Product ih, hh;
  const float* b_hh = nullptr;
};

// Copies n floats.
inline void copy(const float* from, float* to, int64_t n) {
  std::copy(from, from + n, to);
}

// The rows id -> (embedding row id) W^T + b of one product whose input is an embedding row, for
// decoding one sentence at a time: a one-row product reads all of W for its single row, the table
// reads one row. Kept only for a vocabulary small enough (kMaxBytes); a batch of rows reads W
// once for all of them and takes no table. A row is made the first time its id is read, by the
// product's own kernel, so it is the row the product gives (gemm_packed computes a row the same
// whatever rows are beside it), and kept while the weights stay: the caller invalidates the table
// when the weight packs' generation changes. Its memory is kept from one generation to the next.
class TokenTable {
 public:
  static constexpr int64_t kMaxBytes = int64_t{2} << 20;

  // A table for `vocab` ids of `width` floats, off if that is more than kMaxBytes.
  void reset(int64_t vocab, int64_t width) {
    on_ = vocab * width * static_cast<int64_t>(sizeof(float)) <= kMaxBytes;
    vocab_ = vocab;
    width_ = width;
    rows_.reset();
    ready_.clear();
  }
  bool on() const { return on_; }
  void invalidate() { std::fill(ready_.begin(), ready_.end(), uint8_t{0}); }
  // The row of `id` (in range), made now from `embedding` (V,K) through `product` if missing.
  const float* row(int32_t id, const float* embedding, const Product& product) {
    if (ready_.empty()) {  // rows are written before they are read: no need to zero them
      rows_ = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(vocab_ * width_));
      ready_.assign(static_cast<size_t>(vocab_), 0);
    }
    float* r = rows_.get() + id * width_;
    if (!ready_[id]) {
      product.run(embedding + id * product.in(), 1, r);
      ready_[id] = 1;
    }
    return r;
  }

 private:
  bool on_ = false;
  int64_t vocab_ = 0, width_ = 0;
  std::unique_ptr<float[]> rows_;
  std::vector<uint8_t> ready_;
};

// One step of a cell of `kind` for `n` rows of width hs: gx row i at gx + i * gx_stride (with
// b_ih), hw = h W_hh^T (n,G*H), the state h, c (n,H) -> h2, c2. The ops' arithmetic:
// ops::gru_cell's and ops::lstm_cell's rows, or tanh(gx + (hw + b_hh)) over all n*H elements at
// once. `scratch` holds the gates (or the RNN's pre-activations) during the call; the caller
// keeps it for its capacity.
void cell_step(nn::CellKind kind, int64_t hs, const CellWeights& w, const float* gx,
               int64_t gx_stride, const float* hw, const float* h, const float* c, float* h2,
               float* c2, int64_t n, Buffer& scratch);

}  // namespace tapestry::models::detail
