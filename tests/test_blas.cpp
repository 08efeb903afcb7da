// blas::gemm against a plain triple loop in double, for every transpose and for the matrix-vector
// shapes (one row or one column) that take their own paths: Tapestry's small-product kernel and
// OpenBLAS's sgemv.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tapestry/core/blas.h"
#include "tapestry/core/random.h"

using namespace tapestry;

namespace {

// c = alpha op(a) op(b) + beta c, with a (M,K) or (K,M) and b (K,N) or (N,K), row-major, in double.
std::vector<double> reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                              const std::vector<float>& a, const std::vector<float>& b, double beta,
                              const std::vector<float>& c) {
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
      out[i * n + j] = alpha * s + beta * c[i * n + j];
    }
  return out;
}

}  // namespace

TEST_CASE("gemm matches a plain loop for every transpose and matrix-vector shape", "[blas]") {
  Rng rng(11);
  struct Size {
    int64_t m, n, k;
  };
  // One row or one column, small (the hand kernel, with row and length tails) and large
  // (OpenBLAS's sgemv); a few rows against a wide matrix (computed transposed when b is
  // transposed, or by the few-rows kernel at alpha 1, up to 512 deep, in two halves up to twice
  // its rows); a short side (few rows or a short k, small_gemm where the kernel set takes them,
  // with and without a part of 16 columns; one just past kShortSideMadds); small products up to
  // and just past each limit blas::small_product_limits() may give (4,096, 8,192, 16,384, 65,536
  // multiply-adds: an attention head's); full products.
  const Size sizes[] = {
      {1, 7, 13},     {1, 192, 64},  {1, 4, 8},      {9, 1, 21},    {64, 1, 64},    {1, 700, 300},
      {600, 1, 300},  {5, 6, 7},     {1, 1, 1},      {3, 1, 1},     {16, 384, 128}, {3, 70, 33},
      {32, 2048, 40}, {33, 100, 50}, {10, 10, 16},   {12, 200, 64}, {2, 17, 512},   {4, 9, 513},
      {10, 64, 192},  {128, 64, 10}, {12, 130, 300}, {203, 70, 5},  {8, 400, 328},  {15, 15, 32},
      {19, 40, 24},   {20, 40, 24},  {25, 40, 24},   {20, 30, 600}, {6, 9, 40},     {300, 1000, 1},
      {20, 32, 20},   {24, 40, 16},  {21, 64, 13},   {16, 16, 16},  {10, 32, 16},   {32, 64, 32},
      {33, 64, 32},   {20, 20, 32}};
  for (const Size& sz : sizes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (double beta : {0.0, 1.0})
          for (double alpha : {0.5, 1.0}) {
            std::vector<float> a(sz.m * sz.k), b(sz.k * sz.n), c(sz.m * sz.n);
            for (auto& v : a) v = static_cast<float>(rng.uniform(-1, 1));
            for (auto& v : b) v = static_cast<float>(rng.uniform(-1, 1));
            for (auto& v : c) v = static_cast<float>(rng.uniform(-1, 1));
            const auto want = reference(ta, tb, sz.m, sz.n, sz.k, alpha, a, b, beta, c);
            blas::gemm(ta, tb, sz.m, sz.n, sz.k, float(alpha), a.data(), ta ? sz.m : sz.k, b.data(),
                       tb ? sz.k : sz.n, static_cast<float>(beta), c.data(), sz.n);
            for (size_t i = 0; i < c.size(); ++i) {
              INFO("m " << sz.m << " n " << sz.n << " k " << sz.k << " ta " << ta << " tb " << tb
                        << " alpha " << alpha << " beta " << beta << " at " << i);
              REQUIRE(std::abs(c[i] - want[i]) <= 1e-5 * (1 + std::sqrt(double(sz.k))));
            }
          }
}
