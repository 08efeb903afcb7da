// Packed weights: gemm_packed against a plain loop in double for every edge of the kernel (row
// tiles, panel tails, depth blocks), rows independent of their neighbours, the same result on one
// core or split across two, packs of column blocks and transposes, and the pack cache's reuse and
// invalidation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "tapestry/core/packed.h"
#include "tapestry/core/parallel.h"
#include "tapestry/core/random.h"
#include "tapestry/core/tape.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;

namespace {

Tensor random_matrix(int64_t rows, int64_t cols, Rng& rng) {
  Tensor t = Tensor::empty({rows, cols}, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.uniform(-1, 1));
  return t;
}

// c = a w^T + beta c (+ bias) in double: a (M,K) with row stride lda, w (N,K), c (M,N) with
// stride ldc, bias (N) or empty.
std::vector<double> reference(int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                              int64_t lda, const Tensor& w, double beta,
                              const std::vector<float>& c, int64_t ldc,
                              const std::vector<float>& bias) {
  std::vector<double> out(static_cast<size_t>(m * n));
  const float* pw = w.data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[i * lda + p]) * double(pw[j * k + p]);
      out[i * n + j] =
          s + (beta == 0 ? 0.0 : beta * c[i * ldc + j]) + (bias.empty() ? 0.0 : bias[j]);
    }
  return out;
}

}  // namespace

TEST_CASE("gemm_packed matches a plain loop over every tile, tail and depth block", "[packed]") {
  Rng rng(5);
  struct Size {
    int64_t m, n, k;
  };
  // Rows: one tile of 1 to 6, and several of nearly equal height (7 = 4 + 3, 13 = 5 + 4 + 4,
  // 32 = 6 + 6 + 5 + 5 + 5 + 5); columns: whole panels of 16, tails, one column; depth: one
  // element, odd, exactly one block (512) and several (1100).
  const Size sizes[] = {{1, 1, 1},    {2, 15, 7},    {3, 16, 16},   {4, 17, 33},    {5, 48, 64},
                        {6, 100, 3},  {7, 47, 512},  {13, 30, 513}, {16, 384, 128}, {32, 70, 1100},
                        {64, 96, 96}, {1, 200, 300}, {11, 1, 40}};
  for (const Size& sz : sizes)
    for (double beta : {0.0, 1.0, 0.5})
      for (bool with_bias : {false, true}) {
        const int64_t lda = sz.k + 3, ldc = sz.n + 5;  // strides wider than the rows
        Tensor w = random_matrix(sz.n, sz.k, rng);
        std::vector<float> a(static_cast<size_t>(sz.m * lda)), c(static_cast<size_t>(sz.m * ldc));
        std::vector<float> bias(with_bias ? static_cast<size_t>(sz.n) : 0);
        for (auto& v : a) v = static_cast<float>(rng.uniform(-1, 1));
        for (auto& v : bias) v = static_cast<float>(rng.uniform(-1, 1));
        for (auto& v : c)
          v = beta == 0 ? std::numeric_limits<float>::quiet_NaN()  // never read at beta 0
                        : static_cast<float>(rng.uniform(-1, 1));
        const auto want = reference(sz.m, sz.n, sz.k, a, lda, w, beta, c, ldc, bias);
        PackedMatrix packed;
        packed.pack(w);
        REQUIRE(packed.rows() == sz.n);
        REQUIRE(packed.cols() == sz.k);
        gemm_packed(sz.m, sz.k, a.data(), lda, packed, static_cast<float>(beta), c.data(), ldc,
                    with_bias ? bias.data() : nullptr);
        for (int64_t i = 0; i < sz.m; ++i)
          for (int64_t j = 0; j < sz.n; ++j) {
            INFO("m " << sz.m << " n " << sz.n << " k " << sz.k << " beta " << beta << " bias "
                      << with_bias << " at (" << i << "," << j << ")");
            REQUIRE(std::abs(c[i * ldc + j] - want[i * sz.n + j]) <=
                    1e-5 * (1 + std::sqrt(double(sz.k))));
          }
        // The padding between rows of c is left alone.
        for (int64_t i = 0; i < sz.m; ++i)
          for (int64_t j = sz.n; j < ldc; ++j)
            if (beta == 0) REQUIRE(std::isnan(c[i * ldc + j]));
      }
}

TEST_CASE("a row's packed product does not depend on the rows beside it or on the cores",
          "[packed]") {
  Rng rng(8);
  const int64_t m = 37, n = 1000, k = 600;  // work enough to split across the cores
  Tensor w = random_matrix(n, k, rng);
  PackedMatrix packed;
  packed.pack(w);
  std::vector<float> a(static_cast<size_t>(m * k));
  for (auto& v : a) v = static_cast<float>(rng.uniform(-1, 1));

  std::vector<float> all(static_cast<size_t>(m * n)), one(static_cast<size_t>(n));
  set_parallel_threads(2);
  if (parallel_threads() < 2) WARN("one core only: the split across cores is not exercised");
  gemm_packed(m, k, a.data(), k, packed, 0.0f, all.data(), n);  // split by panels across 2
  set_parallel_threads(1);
  std::vector<float> serial(static_cast<size_t>(m * n));
  gemm_packed(m, k, a.data(), k, packed, 0.0f, serial.data(), n);
  set_parallel_threads(0);
  REQUIRE(all == serial);
  for (int64_t i : {int64_t{0}, int64_t{5}, int64_t{36}}) {
    gemm_packed(1, k, a.data() + i * k, k, packed, 0.0f, one.data(), n);
    INFO("row " << i);
    REQUIRE(std::equal(one.begin(), one.end(), all.begin() + i * n));
  }
}

TEST_CASE("a one-row product's bias is added as a separate add after the product, bit for bit",
          "[packed]") {
  // RNN decoding passes a row to add (the token's projection) as the bias of a product that has
  // none, relying on this: whole panels and a panel's tail, one block of k and several.
  Rng rng(9);
  for (int64_t n : {64, 200})
    for (int64_t k : {300, 1100}) {
      Tensor w = random_matrix(n, k, rng);
      PackedMatrix packed;
      packed.pack(w);
      std::vector<float> a(static_cast<size_t>(k)), add(static_cast<size_t>(n));
      for (auto& v : a) v = static_cast<float>(rng.uniform(-1, 1));
      for (auto& v : add) v = static_cast<float>(rng.uniform(-1, 1));
      std::vector<float> fused(static_cast<size_t>(n)), apart(static_cast<size_t>(n));
      gemm_packed(1, k, a.data(), k, packed, 0.0f, fused.data(), n, add.data());
      gemm_packed(1, k, a.data(), k, packed, 0.0f, apart.data(), n);
      for (int64_t j = 0; j < n; ++j) apart[j] = add[j] + apart[j];
      INFO("n " << n << " k " << k);
      REQUIRE(fused == apart);
    }
}

TEST_CASE("packing refuses what is not a float32 matrix; the product refuses a wrong depth",
          "[packed]") {
  PackedMatrix p;
  REQUIRE_THROWS_AS(p.pack(Tensor::zeros({4, 3}, DType::f64)), DTypeError);
  REQUIRE_THROWS_AS(p.pack(Tensor::zeros({12}, DType::f32)), ShapeError);
  p.pack(Tensor::zeros({4, 3}, DType::f32));
  std::vector<float> a(8), c(8);
  REQUIRE_THROWS_WITH(gemm_packed(2, 4, a.data(), 4, p, 0.0f, c.data(), 4),
                      Catch::Contains("a (2,4)") && Catch::Contains("(4,3)"));
}

TEST_CASE("a view's pack is the pack of the block or its transpose, element for element",
          "[packed]") {
  Rng rng(6);
  // w (R,C); blocks of columns: all, from the left, in the middle, to the right; their widths
  // (rows of the transposed block) one, a panel's tail, whole panels, panels and a tail.
  struct Block {
    int64_t col0, cols;
  };
  for (int64_t rows : {1, 3, 20})
    for (int64_t c : {1, 7, 16, 45})
      for (Block blk : {Block{0, c}, Block{0, (c + 1) / 2}, Block{c / 3, c - c / 3 - c / 4},
                        Block{c / 2, c - c / 2}})
        for (bool transposed : {false, true}) {
          if (blk.cols <= 0) continue;
          INFO("w (" << rows << "," << c << ") columns " << blk.col0 << "+" << blk.cols
                     << (transposed ? " transposed" : ""));
          Tensor w = random_matrix(rows, c, rng);
          // The block W made by hand: (rows, cols), or its transpose (cols, rows).
          const int64_t n = transposed ? blk.cols : rows, k = transposed ? rows : blk.cols;
          Tensor made = Tensor::empty({n, k}, DType::f32);
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < blk.cols; ++j) {
              const float v = w.data<float>()[i * c + blk.col0 + j];
              made.data<float>()[transposed ? j * k + i : i * k + j] = v;
            }
          PackedMatrix direct, of_copy;
          direct.pack(w, {blk.col0, blk.cols, transposed});
          of_copy.pack(made);
          REQUIRE(direct.rows() == n);
          REQUIRE(direct.cols() == k);
          REQUIRE(direct.panels() == of_copy.panels());
          for (int64_t p = 0; p < direct.panels(); ++p)
            REQUIRE(std::equal(direct.panel(p), direct.panel(p) + k * PackedMatrix::kPanel,
                               of_copy.panel(p)));
        }
  PackedMatrix p;
  REQUIRE_THROWS_AS(p.pack(Tensor::zeros({4, 3}, DType::f64), {.transposed = true}), DTypeError);
  REQUIRE_THROWS_AS(p.pack(Tensor::zeros({12}, DType::f32), {.transposed = true}), ShapeError);
  REQUIRE_THROWS_WITH(p.pack(Tensor::zeros({4, 3}, DType::f32), {2, 2}),
                      Catch::Contains("columns [2, 4)") && Catch::Contains("(4,3)"));
}

TEST_CASE("weight packs are made once, shared by threads, and remade after invalidate",
          "[packed]") {
  Rng rng(2);
  Tensor w1 = random_matrix(30, 20, rng), w2 = random_matrix(10, 20, rng);
  WeightPacks packs;
  const PackedMatrix* seen[2] = {};
  std::thread other([&] { seen[1] = &packs.get(w1); });
  seen[0] = &packs.get(w1);
  other.join();
  REQUIRE(seen[0] == seen[1]);
  REQUIRE(&packs.get(w2) != seen[0]);
  REQUIRE(packs.size() == 2);

  std::vector<float> a(20, 1.0f), before(30), after(30);
  gemm_packed(1, 20, a.data(), 20, packs.get(w1), 0.0f, before.data(), 30);
  w1.data<float>()[0] += 1.0f;  // row 0 of w1 changes
  gemm_packed(1, 20, a.data(), 20, packs.get(w1), 0.0f, after.data(), 30);
  REQUIRE(after == before);  // the pack is kept until invalidated: the owner's promise
  packs.invalidate();
  gemm_packed(1, 20, a.data(), 20, packs.get(w1), 0.0f, after.data(), 30);
  REQUIRE(after[0] == Approx(before[0] + 1.0f));
  REQUIRE(std::equal(after.begin() + 1, after.end(), before.begin() + 1));
  REQUIRE(packs.size() == 2);
}

TEST_CASE("a weight whose rows were read once since it last changed is not packed again",
          "[packed]") {
  Rng rng(4);
  Tensor w = random_matrix(32, 8, rng), other = random_matrix(16, 8, rng);
  WeightPacks packs;
  // No history: packed.
  REQUIRE(packs.get_unless_read_once(w, {}, 32) != nullptr);
  packs.invalidate();
  // Read once (all 32 rows) last time: multiplied in place this time, and counted again.
  REQUIRE(packs.get_unless_read_once(w, {}, 32) == nullptr);
  // Two blocks of its rows (16 + 16) are one read of each row.
  packs.invalidate();
  REQUIRE(packs.get_unless_read_once(w, {}, 16) == nullptr);
  REQUIRE(packs.get_unless_read_once(w, {}, 16) == nullptr);
  // A third block this generation reads rows twice: the pack is made, and stays for the rest.
  const PackedMatrix* made = packs.get_unless_read_once(w, {}, 16);
  REQUIRE(made != nullptr);
  REQUIRE(packs.get_unless_read_once(w, {}, 16) == made);
  // 48 rows read last generation: packed from the first read.
  packs.invalidate();
  REQUIRE(packs.get_unless_read_once(w, {}, 32) == made);
  // get() counts as a read of all rows, and a weight read at every step stays packed.
  REQUIRE(&packs.get(other) != nullptr);
  REQUIRE(&packs.get(other) != nullptr);
  packs.invalidate();
  REQUIRE(packs.get_unless_read_once(other, {}, 16) != nullptr);
  // A pack made after the weights changed holds their new values.
  w.data<float>()[0] = 7.0f;
  packs.invalidate();
  REQUIRE(packs.get_unless_read_once(w, {}, 32) == nullptr);          // read once last generation
  const PackedMatrix* again = packs.get_unless_read_once(w, {}, 32);  // and twice in this one
  REQUIRE(again != nullptr);
  REQUIRE(again->panel(0)[0] == 7.0f);
}

TEST_CASE("a cache's generation is one no cache has had, and invalidate gives a new one",
          "[packed]") {
  // What is derived from the weights beside the packs (the raw decoder's tables) is kept while
  // the generation stays, so a new cache must not repeat an earlier one's, even at the address
  // of one destroyed.
  std::vector<uint64_t> seen;
  for (int i = 0; i < 3; ++i) {
    WeightPacks packs;
    seen.push_back(packs.generation());
    REQUIRE(packs.generation() == seen.back());  // stays until invalidated
    packs.invalidate();
    seen.push_back(packs.generation());
  }
  std::sort(seen.begin(), seen.end());
  REQUIRE(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
}

TEST_CASE("matmul and affine read a weight's pack and give the values and gradients of BLAS",
          "[packed]") {
  Rng rng(4);
  WeightPacks packs, affine_packs;  // matmul's, affine's
  Tensor w = random_matrix(37, 20, rng), bias = random_matrix(1, 37, rng).reshape(Shape{37});
  // (N,K) rows, and (B,S,K) as the RNN's input projections over all steps read them.
  const Tensor inputs[] = {random_matrix(9, 20, rng),
                           random_matrix(9, 20, rng).reshape({3, 3, 20})};
  Tensor x, dy;
  auto run = [&](bool packed, bool with_bias) {
    Tape tape;
    // The tape's packs too, so matmul's backward reads the transposed pack for dx = dy W.
    WeightPacks* p = !packed ? nullptr : with_bias ? &affine_packs : &packs;
    tape.set_weight_packs(p);
    Tensor dx = Tensor::zeros(x.shape(), DType::f32), dw = Tensor::zeros(w.shape(), DType::f32),
           db = Tensor::zeros(bias.shape(), DType::f32);
    Var xv = tape.bind(x, dx), wv = tape.bind(w, dw), bv = tape.bind(bias, db);
    Var y = with_bias ? ops::affine(xv, wv, bv, p) : ops::matmul(xv, wv, false, true, p);
    if (p && with_bias && packed_kernel_available())
      REQUIRE(tape.pack_reads(w.data<float>(), 0) == 1);
    tape.backward(y, dy);
    return std::vector<Tensor>{y.value(), dx, dw, db};
  };
  auto near = [](const Tensor& want, const Tensor& got) {
    for (int64_t i = 0; i < want.numel(); ++i)
      REQUIRE(got.data<float>()[i] == Approx(want.data<float>()[i]).margin(1e-5));
  };
  for (const Tensor& input : inputs)
    for (bool with_bias : {false, true}) {
      x = input;
      Shape y_shape = x.shape();
      y_shape = x.ndim() == 3 ? Shape{y_shape[0], y_shape[1], 37} : Shape{y_shape[0], 37};
      dy = random_matrix(x.numel() / 20, 37, rng).reshape(y_shape);
      INFO((with_bias ? "affine " : "matmul ") << x.shape().str());
      const auto blas = run(false, with_bias), packed = run(true, with_bias);
      near(blas[0], packed[0]);
      // dx: matmul's through the transposed pack; affine's through BLAS, since its weight was read
      // once in the recording (a weight read at every time step: the next test).
      if (with_bias || !packed_kernel_available())
        REQUIRE(blas[1].to_vector() == packed[1].to_vector());
      else
        near(blas[1], packed[1]);
      // dW and db: the same calls on the same dy, whether the forward pass read a pack or not.
      REQUIRE(blas[2].to_vector() == packed[2].to_vector());
      REQUIRE(blas[3].to_vector() == packed[3].to_vector());
    }
  // One weight, packed for the products, and its transpose for matmul's dx only (none where the
  // kernels in use are the portable ones, whose products go to BLAS).
  REQUIRE(packs.size() == (packed_kernel_available() ? 2u : 0u));
  REQUIRE(affine_packs.size() == (packed_kernel_available() ? 1u : 0u));
}

TEST_CASE("affine's dx reads the pack of W^T for a product of 64 to 255 rows read once",
          "[packed]") {
  // A Transformer layer's product of a batch of rows: enough work to pay for the pack of W^T
  // made for its one read (ops/matmul.cpp, kPackedDxMinRows); fewer rows, or a whole big batch,
  // take BLAS.
  Rng rng(5);
  Tensor w = random_matrix(40, 24, rng), bias = random_matrix(1, 40, rng).reshape(Shape{40});
  for (int64_t rows : {63, 64, 255, 256}) {
    INFO(rows << " rows");
    WeightPacks packs;
    const Tensor x = random_matrix(rows, 24, rng), dy = random_matrix(rows, 40, rng);
    auto run = [&](WeightPacks* p) {
      Tape tape;
      tape.set_weight_packs(p);
      Tensor dx = Tensor::zeros(x.shape(), DType::f32);
      Var xv = tape.bind(x, dx), wv = tape.bind(w, Tensor::zeros(w.shape(), DType::f32)),
          bv = tape.bind(bias, Tensor::zeros(bias.shape(), DType::f32));
      tape.backward(ops::affine(xv, wv, bv, p), dy);
      return dx;
    };
    const Tensor want = run(nullptr), got = run(&packs);
    const bool transposed = packed_kernel_available() && rows >= 64 && rows < 256;
    // W's pack for the product, and W^T's for dx where that path was taken.
    REQUIRE(packs.size() == (packed_kernel_available() ? 1u : 0u) + (transposed ? 1u : 0u));
    if (transposed)
      for (int64_t i = 0; i < want.numel(); ++i)
        REQUIRE(got.data<float>()[i] == Approx(want.data<float>()[i]).margin(1e-5));
    else
      REQUIRE(got.to_vector() == want.to_vector());  // the same BLAS call
  }
}

TEST_CASE("a product with a copy of a weight's columns reads the weight's packs", "[packed]") {
  Rng rng(8);
  WeightPacks packs;
  Tensor w = random_matrix(37, 30, rng);  // (N,C); the product's b is its columns [12, 30)
  Tensor bias = random_matrix(1, 37, rng).reshape(Shape{37});
  Tensor x = random_matrix(9, 18, rng), dy = random_matrix(9, 37, rng);
  // matmul, and affine on the columns [0, 18) of w with a bias, read at 4 steps as a decoder's
  // per-step layers are: its dx then reads the pack of the block's transpose too.
  for (bool affine : {false, true}) {
    const int64_t col0 = affine ? 0 : 12;
    const int steps = affine ? 4 : 1;
    auto run = [&](bool packed) {
      Tape tape;
      if (packed) tape.set_weight_packs(&packs);
      Tensor dx = Tensor::zeros(x.shape(), DType::f32), dw = Tensor::zeros(w.shape(), DType::f32);
      Var xv = tape.bind(x, dx), wv = tape.bind(w, dw),
          bv = tape.bind(bias, Tensor::zeros(bias.shape(), DType::f32));
      Var block = ops::slice(wv, 1, col0, 18);  // a copy, as nn::Cell::weight_tail makes
      WeightPacks* p = packed ? &packs : nullptr;
      const ops::PackSource source = packed ? ops::PackSource{&w, col0} : ops::PackSource{};
      auto product = [&] {
        return affine ? ops::affine(xv, block, bv, p, source)
                      : ops::matmul(xv, block, false, true, p, source);
      };
      Var y = product();
      for (int step = 1; step < steps; ++step) y = ops::add(y, product());
      if (packed && affine && packed_kernel_available())
        REQUIRE(tape.pack_reads(w.data<float>(), col0) == steps);
      tape.backward(y, dy);
      return std::vector<Tensor>{y.value(), dx, dw};
    };
    const auto blas = run(false), packed = run(true);
    INFO((affine ? "affine" : "matmul"));
    for (size_t t = 0; t < 2; ++t)  // y and dx: the packed kernel's sums against BLAS's
      for (int64_t i = 0; i < blas[t].numel(); ++i)
        REQUIRE(packed[t].data<float>()[i] == Approx(blas[t].data<float>()[i]).margin(1e-5));
    REQUIRE(blas[2].to_vector() == packed[2].to_vector());  // dW: the same BLAS call, then slice's
  }
  // Each block and its transpose, packed from w (the copies are never looked up).
  REQUIRE(packs.size() == (packed_kernel_available() ? 4u : 0u));

  {  // b the first 20 rows of w's columns [12, 30): the pack's product would write all 37 rows
    Var xv = Var(x), first_rows = Var(ops::slice(ops::slice(Var(w), 0, 0, 20), 1, 12, 18).value());
    const Tensor want = ops::matmul(xv, first_rows, false, true).value();
    const Tensor got = ops::matmul(xv, first_rows, false, true, &packs, {&w, 12}).value();
    REQUIRE(got.shape() == Shape{9, 20});
    REQUIRE(got.to_vector() == want.to_vector());
  }
  Tape tape;
  Var xv = tape.bind(x, Tensor::zeros(x.shape(), DType::f32));
  Var tail = Var(Tensor::zeros({37, 18}, DType::f32));
  REQUIRE_THROWS_WITH(ops::matmul(xv, tail, false, true, &packs, {&w, 13}),
                      Catch::Contains("(37,18)") && Catch::Contains("(37,30)"));
  const Tensor w64 = Tensor::zeros({37, 30}, DType::f64);
  REQUIRE_THROWS_AS(ops::matmul(xv, tail, false, true, &packs, {&w64, 12}), DTypeError);
  REQUIRE_THROWS_WITH(ops::affine(xv, tail, Var(), &packs, {&w, 13}),
                      Catch::Contains("(37,18)") && Catch::Contains("(37,30)"));
  REQUIRE_THROWS_AS(ops::affine(xv, tail, Var(), &packs, {&w64, 12}), DTypeError);
}

TEST_CASE("a block of whole panels of W's rows gives the columns of the whole product, bit for bit",
          "[packed]") {
  Rng rng(12);
  const int64_t m = 7, n = 40, k = 33;  // panels [0,16), [16,32), [32,40) (a tail)
  Tensor w = random_matrix(n, k, rng);
  PackedMatrix packed;
  packed.pack(w);
  std::vector<float> a(static_cast<size_t>(m * k)), bias(static_cast<size_t>(n));
  for (auto& v : a) v = static_cast<float>(rng.uniform(-1, 1));
  for (auto& v : bias) v = static_cast<float>(rng.uniform(-1, 1));
  std::vector<float> all(static_cast<size_t>(m * n));
  gemm_packed(m, k, a.data(), k, packed, 0.0f, all.data(), n, bias.data());
  for (auto [row0, rows] :
       {std::pair<int64_t, int64_t>{0, 16}, {16, 16}, {16, 24}, {32, 8}, {0, 40}}) {
    INFO("rows " << row0 << " + " << rows);
    std::vector<float> block(static_cast<size_t>(m * rows));
    gemm_packed_rows(m, k, a.data(), k, packed, row0, rows, 0.0f, block.data(), rows,
                     bias.data() + row0);
    for (int64_t i = 0; i < m; ++i)
      REQUIRE(std::equal(block.begin() + i * rows, block.begin() + (i + 1) * rows,
                         all.begin() + i * n + row0));
  }
  std::vector<float> c(static_cast<size_t>(m * n));
  for (auto [row0, rows] : {std::pair<int64_t, int64_t>{8, 16}, {0, 20}, {32, 16}, {-16, 16}})
    REQUIRE_THROWS_WITH(gemm_packed_rows(m, k, a.data(), k, packed, row0, rows, 0.0f, c.data(), n),
                        Catch::Contains("not whole panels") && Catch::Contains("(40,33)"));
}

TEST_CASE("affine with a block of a weight's rows reads the weight's pack", "[packed]") {
  Rng rng(13);
  WeightPacks packs;
  Tensor w = random_matrix(48, 20, rng);  // an in-projection of 3 parts of 16 rows
  Tensor x = random_matrix(5, 20, rng), dy = random_matrix(5, 32, rng);
  Tensor bias = random_matrix(1, 48, rng).reshape(Shape{48});
  auto run = [&](bool packed, int64_t row0) {
    Tape tape;
    if (packed) tape.set_weight_packs(&packs);
    Tensor dx = Tensor::zeros(x.shape(), DType::f32), dw = Tensor::zeros(w.shape(), DType::f32);
    Var xv = tape.bind(x, dx), wv = tape.bind(w, dw),
        bv = tape.bind(bias, Tensor::zeros(bias.shape(), DType::f32));
    Var block = ops::slice(wv, 0, row0, 32), b = ops::slice(bv, 0, row0, 32);
    Var y = packed ? ops::affine(xv, block, b, &packs, {&w, 0, row0}) : ops::affine(xv, block, b);
    tape.backward(y, dy);
    return std::vector<Tensor>{y.value(), dx, dw};
  };
  for (int64_t row0 : {0, 16}) {
    INFO("rows " << row0 << " + 32");
    const auto blas = run(false, row0), packed = run(true, row0);
    for (size_t t = 0; t < 2; ++t)  // y and dx: the packed kernel's sums against BLAS's
      for (int64_t i = 0; i < blas[t].numel(); ++i)
        REQUIRE(packed[t].data<float>()[i] == Approx(blas[t].data<float>()[i]).margin(1e-5));
    REQUIRE(blas[2].to_vector() == packed[2].to_vector());  // dW: the same BLAS call
  }
  // One pack of the whole weight serves both blocks; none is made of the copies.
  REQUIRE(packs.size() == (packed_kernel_available() ? 1u : 0u));
  // Rows that are not whole panels are read through BLAS, and rows outside W are refused.
  Tape tape;
  Var xv = tape.bind(x, Tensor::zeros(x.shape(), DType::f32));
  const Var odd(Tensor::zeros({24, 20}, DType::f32));
  const Var y = ops::affine(xv, odd, Var(), &packs, {&w, 0, 8});
  REQUIRE(y.shape() == Shape{5, 24});
  REQUIRE_THROWS_WITH(ops::affine(xv, odd, Var(), &packs, {&w, 0, 32}),
                      Catch::Contains("(24,20)") && Catch::Contains("(48,20)"));
  REQUIRE_THROWS_WITH(ops::affine(xv, odd, Var(), &packs, {nullptr, 0, 16}),
                      Catch::Contains("rows 16"));
}
