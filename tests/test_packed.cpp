// Packed weights: gemm_packed against a plain loop in double for every edge of the kernel (row
// tiles, panel tails, depth blocks), rows independent of their neighbours, the same result on one
// core or split across two, and the pack cache's reuse and invalidation.
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

TEST_CASE("matmul and affine read a weight's pack and give the values and gradients of BLAS",
          "[packed]") {
  Rng rng(4);
  WeightPacks packs;
  Tensor w = random_matrix(37, 20, rng), bias = random_matrix(1, 37, rng).reshape(Shape{37});
  // (N,K) rows, and (B,S,K) as the RNN's input projections over all steps read them.
  const Tensor inputs[] = {random_matrix(9, 20, rng),
                           random_matrix(9, 20, rng).reshape({3, 3, 20})};
  Tensor x;
  auto run = [&](bool packed, bool with_bias) {
    Tape tape;
    Tensor dx = Tensor::zeros(x.shape(), DType::f32), dw = Tensor::zeros(w.shape(), DType::f32),
           db = Tensor::zeros(bias.shape(), DType::f32);
    Var xv = tape.bind(x, dx), wv = tape.bind(w, dw), bv = tape.bind(bias, db);
    WeightPacks* p = packed ? &packs : nullptr;
    Var y = with_bias ? ops::affine(xv, wv, bv, p) : ops::matmul(xv, wv, false, true, p);
    tape.backward(y, Tensor::full(y.shape(), 1.0, DType::f32));
    return std::vector<Tensor>{y.value(), dx, dw, db};
  };
  for (const Tensor& input : inputs)
    for (bool with_bias : {false, true}) {
      x = input;
      INFO((with_bias ? "affine " : "matmul ") << x.shape().str());
      const auto blas = run(false, with_bias), packed = run(true, with_bias);
      const float* a = blas[0].data<float>();
      const float* b = packed[0].data<float>();
      for (int64_t i = 0; i < blas[0].numel(); ++i) REQUIRE(b[i] == Approx(a[i]).margin(1e-5));
      for (size_t g = 1; g < blas.size(); ++g)  // the backward is the same code on the same dy
        REQUIRE(blas[g].to_vector() == packed[g].to_vector());
    }
  // One weight, packed once for both products (none where the kernels in use are the portable
  // ones, whose products go to BLAS).
  REQUIRE(packs.size() == (packed_kernel_available() ? 1u : 0u));
}
