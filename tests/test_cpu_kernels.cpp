// The kernels of every capability this CPU can run (AVX-512, AVX2, portable) against plain loops
// in double: the packed products give the same bits in every capability, the elementwise loops
// stay within the fast functions' bounds.

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "emulated/kernels_avx512_emulated.h"
#include "float_sweep.h"
#include "shell_run.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"

using namespace tapestry;
using cpu::Capability;

namespace {

constexpr Capability kAll[] = {Capability::avx512, Capability::avx2, Capability::portable};

std::vector<float> random_floats(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// Adam's constants of a double loop, rounded for the float kernels.
loops::AdamScalars<float> to_float(const loops::AdamScalars<double>& k) {
  return {float(k.b1),   float(k.b2),   float(k.c1),      float(k.c2),    float(k.wd),
          float(k.keep), float(k.step), float(k.eps_hat), float(k.scale), k.zero_grad};
}

// The AVX-512 set with its intrinsics emulated, where this build has it; why not, where not.
const cpu::Kernels* emulated_avx512() {
  const cpu::Kernels* k = testing::avx512_emulated_kernels();
#if defined(TAPESTRY_TEST_AVX512_EMULATED)
  if (!k) WARN("this build has no AVX2 and FMA to emulate the AVX-512 kernels with");
#else
  WARN("libsimde-dev is missing (tools/setup.sh --test-tools): no emulated AVX-512 kernels");
#endif
  return k;
}

// The kernels this CPU can run, announcing the ones it cannot (they are then untested here).
// Where the CPU lacks AVX-512, that set is run with its intrinsics emulated (SIMDe): its loops,
// tails and masks are then tested here too, though not its speed nor the hardware's estimates.
std::vector<const cpu::Kernels*> runnable() {
  std::vector<const cpu::Kernels*> out;
  for (Capability c : kAll) {
    if (const cpu::Kernels* k = cpu::kernels_for(c)) {
      out.push_back(k);
      continue;
    }
    if (c == Capability::avx512)
      if (const cpu::Kernels* k = emulated_avx512()) {
        out.push_back(k);
        continue;
      }
    WARN("this CPU cannot run the " << cpu::capability_name(c) << " kernels: not tested here");
  }
  return out;
}

// Panels of 16 rows, 64-byte aligned as the vector kernels load them.
struct Packed {
  std::vector<float> storage;
  float* data = nullptr;
  Packed(const cpu::Kernels& k, const std::vector<float>& w, int64_t n, int64_t kk) {
    const size_t size = static_cast<size_t>((n + 15) / 16 * 16 * kk) + 16;
    storage.assign(size, std::numeric_limits<float>::quiet_NaN());
    auto addr = reinterpret_cast<uintptr_t>(storage.data());
    data = storage.data() + ((64 - addr % 64) % 64) / sizeof(float);
    k.pack_panels(w.data(), n, kk, kk, data);
  }
};

}  // namespace

TEST_CASE("the kernels in use are the best this CPU runs, unless TAPESTRY_KERNELS says otherwise",
          "[cpu_kernels]") {
  REQUIRE(cpu::kernels_for(Capability::portable) != nullptr);
  if (const char* test_set = std::getenv("TAPESTRY_TEST_KERNELS"); test_set && *test_set) {
    // tests/main.cpp put the emulated AVX-512 set in use.
    REQUIRE(&cpu::kernels() == emulated_avx512());
    return;
  }
  const char* forced = std::getenv("TAPESTRY_KERNELS");
  Capability best = Capability::portable;
  for (Capability c : {Capability::avx2, Capability::avx512})
    if (cpu::cpu_supports(c)) best = c;
  const Capability want = forced && *forced ? cpu::parse_capability(forced) : best;
  REQUIRE(cpu::kernels().capability == want);
  // A capability the CPU lacks has no kernels.
  for (Capability c : kAll) REQUIRE((cpu::kernels_for(c) != nullptr) == cpu::cpu_supports(c));
  // The set in use is that capability's table (each of whose entries the tests below check),
  // but for Adam on a CPU that splits 512-bit vectors, which takes the avx2 set's (checked too).
  const cpu::Kernels& used = cpu::kernels();
  const cpu::Kernels& table = *cpu::kernels_for(want);
  REQUIRE(used.panels_product == table.panels_product);
  REQUIRE(used.tanh == table.tanh);
  REQUIRE(used.gru_row == table.gru_row);
  const bool swapped = want == Capability::avx512 && cpu::splits_512_bit_vectors();
  INFO("splits 512-bit vectors: " << cpu::splits_512_bit_vectors());
  REQUIRE(used.adam_update ==
          (swapped ? cpu::kernels_for(Capability::avx2)->adam_update : table.adam_update));
}

TEST_CASE(
    "TAPESTRY_KERNELS's value is checked: a wrong name or one the CPU lacks is one clear line",
    "[cpu_kernels]") {
  REQUIRE(cpu::parse_capability("portable") == Capability::portable);
  REQUIRE_THROWS_WITH(cpu::parse_capability("sse9"),
                      "TAPESTRY_KERNELS=sse9: not a kernel set (avx512, avx2 or portable)");
  REQUIRE_THROWS_AS(cpu::parse_capability("AVX2"), ValueError);  // names are lower case
  for (Capability c : {Capability::avx2, Capability::avx512}) {
    const std::string name(cpu::capability_name(c));
    if (cpu::cpu_supports(c))
      REQUIRE(cpu::parse_capability(name) == c);
    else
      REQUIRE_THROWS_WITH(
          cpu::parse_capability(name),
          "TAPESTRY_KERNELS=" + name + ": this CPU cannot run the " + name + " kernels");
  }
}

TEST_CASE("every capability packs the same panels", "[cpu_kernels]") {
  Rng rng(3);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {15, 7}, {16, 8}, {33, 17}, {64, 40}}) {
    const auto w = random_floats(static_cast<size_t>(n * k), rng);
    const size_t size = static_cast<size_t>((n + 15) / 16 * 16 * k);
    Packed portable(*cpu::kernels_for(Capability::portable), w, n, k);
    // The layout itself: element (j, k) of panel p at (p*K + k)*16 + j, rows past N zero.
    for (int64_t row = 0; row < (n + 15) / 16 * 16; ++row)
      for (int64_t col = 0; col < k; ++col) {
        const float got = portable.data[((row / 16) * k + col) * 16 + row % 16];
        REQUIRE(got == (row < n ? w[static_cast<size_t>(row * k + col)] : 0.0f));
      }
    for (const cpu::Kernels* kern : runnable()) {
      Packed p(*kern, w, n, k);
      INFO(testing::set_name(*kern) << " n " << n << " k " << k);
      REQUIRE(std::equal(p.data, p.data + size, portable.data));
    }
  }
}

TEST_CASE("every capability's packed product matches a plain loop in double, to the same bits",
          "[cpu_kernels]") {
  Rng rng(5);
  struct Size {
    int64_t m, n, k;
  };
  // Rows: tiles of 2 to 8 and several of nearly equal height, two and three blocks of packed rows
  // (kProductPackRows), and one row alone (its own kernel, several panels at once); columns: one
  // panel, pairs of panels and an odd one left over, groups of 8 panels and a partial one, tails;
  // depth: one element, fewer than 8 (no whole transpose when packing), odd, one block of 512,
  // several. Packing 2 or 3 rows spills the most past a tile.
  const Size sizes[] = {
      {1, 1, 1},     {2, 15, 7},    {3, 16, 16},    {4, 17, 33},
      {5, 48, 64},   {6, 100, 3},   {7, 47, 512},   {8, 33, 40},
      {9, 80, 20},   {13, 30, 513}, {16, 384, 128}, {32, 70, 1100},
      {1, 200, 300}, {11, 1, 40},   {17, 64, 9},    {1, 16, 64},
      {1, 130, 96},  {1, 384, 600}, {1, 7, 1030},   {cpu::kProductPackRows + 31, 40, 520},
      {2, 20, 16},   {3, 20, 17},   {9, 20, 5},     {2 * cpu::kProductPackRows + 1, 24, 40}};
  const auto all = runnable();
  for (const Size& sz : sizes)
    for (float beta : {0.0f, 1.0f, 0.5f})
      for (bool with_bias : {false, true}) {
        const int64_t lda = sz.k + 3, ldc = sz.n + 5;  // strides wider than the rows
        const auto w = random_floats(static_cast<size_t>(sz.n * sz.k), rng);
        const auto a = random_floats(static_cast<size_t>(sz.m * lda), rng);
        const auto bias = random_floats(static_cast<size_t>(sz.n), rng);
        auto c0 = random_floats(static_cast<size_t>(sz.m * ldc), rng);
        if (beta == 0.0f)  // never read at beta 0
          for (auto& v : c0) v = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> first;
        for (const cpu::Kernels* kern : all) {
          const auto name = testing::set_name(*kern);
          Packed packed(*kern, w, sz.n, sz.k);
          auto c = c0;
          // In two calls over the panels, as the product is split across cores.
          const int64_t panels = (sz.n + 15) / 16, half = panels / 2;
          const float* b = with_bias ? bias.data() : nullptr;
          // The packed rows' room, then a guard that packing must leave alone.
          const auto room = static_cast<size_t>(cpu::product_pack_floats(sz.m, sz.k));
          constexpr size_t kGuard = 64;
          constexpr float kUntouched = -12345.0f;
          std::vector<float> a_pack(room + kGuard, kUntouched);
          kern->panels_product(sz.m, sz.n, sz.k, a.data(), lda, packed.data, 0, half, beta, b,
                               c.data(), ldc, a_pack.data());
          kern->panels_product(sz.m, sz.n, sz.k, a.data(), lda, packed.data, half, panels, beta, b,
                               c.data(), ldc, a_pack.data());
          for (size_t g = room; g < room + kGuard; ++g) REQUIRE(a_pack[g] == kUntouched);
          for (int64_t i = 0; i < sz.m; ++i) {
            for (int64_t j = 0; j < sz.n; ++j) {
              double want = 0;
              for (int64_t p = 0; p < sz.k; ++p)
                want += double(a[i * lda + p]) * double(w[j * sz.k + p]);
              if (beta != 0.0f) want += double(beta) * c0[i * ldc + j];
              if (with_bias) want += bias[j];
              INFO(name << " m " << sz.m << " n " << sz.n << " k " << sz.k << " beta " << beta
                        << " bias " << with_bias << " at (" << i << "," << j << ")");
              REQUIRE(std::abs(c[i * ldc + j] - want) <= 1e-5 * (1 + std::sqrt(double(sz.k))));
            }
            for (int64_t j = sz.n; j < ldc; ++j)  // the padding between rows is left alone
              REQUIRE(std::memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)) == 0);
          }
          if (first.empty())
            first = c;
          else
            REQUIRE(std::memcmp(c.data(), first.data(), c.size() * sizeof(float)) == 0);
        }
      }
}

TEST_CASE("the few-rows product in place gives the packed product's bits", "[cpu_kernels]") {
  Rng rng(31);
  struct Size {
    int64_t m, n, k;
  };
  // Rows from 2 to the most a kernel takes (12 with AVX-512, 10 with AVX2); columns: whole
  // groups of 16 (AVX-512) or 8 (AVX2), tails, fewer than 8, one; depth: one, fewer than a step
  // (8 with AVX-512, 4 with AVX2: only the gathered tail), tails of 1 to 3 after whole steps, one
  // block of 512.
  const Size sizes[] = {{2, 16, 8},    {3, 5, 1},    {4, 17, 7},   {5, 64, 64},   {6, 70, 13},
                        {7, 33, 40},   {8, 192, 64}, {9, 31, 100}, {10, 128, 64}, {10, 64, 128},
                        {11, 48, 512}, {12, 20, 9},  {12, 1, 16},  {10, 40, 512}, {3, 1, 16},
                        {6, 9, 10},    {10, 23, 66}};
  const auto all = runnable();
  bool any = false;
  for (const cpu::Kernels* kern : all) {
    REQUIRE(kern->few_rows_product);  // every set has one (the portable set's is the reference)
    any = true;
    const auto name = testing::set_name(*kern);
    REQUIRE(kern->few_rows_max >= 10);  // the `tiny` Transformer's rows
    for (const Size& sz : sizes) {
      if (sz.m > kern->few_rows_max) continue;
      for (float beta : {0.0f, 1.0f, 0.5f})
        for (bool with_bias : {false, true}) {
          // Row strides wider than the rows, as for a block of a weight's columns.
          const int64_t lda = sz.k + 3, ldw = sz.k + 2, ldc = sz.n + 5;
          const auto w = random_floats(static_cast<size_t>(sz.n * ldw), rng);
          const auto a = random_floats(static_cast<size_t>(sz.m * lda), rng);
          const auto bias = random_floats(static_cast<size_t>(sz.n), rng);
          // At beta 0, c is never read: a NaN there must not reach the product.
          auto c0 = random_floats(static_cast<size_t>(sz.m * ldc), rng);
          for (int64_t i = 0; i < sz.m; ++i)
            for (int64_t j = 0; j < ldc; ++j)
              if (beta == 0.0f || j >= sz.n)
                c0[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
          auto c = c0, packed_c = c0;
          const float* b = with_bias ? bias.data() : nullptr;
          kern->few_rows_product(sz.m, sz.n, sz.k, a.data(), lda, w.data(), ldw, beta, b, c.data(),
                                 ldc);
          // The same product through the pack, in the capability that runs it for real.
          std::vector<float> dense(static_cast<size_t>(sz.n * sz.k));
          for (int64_t j = 0; j < sz.n; ++j)
            std::copy_n(w.begin() + j * ldw, sz.k, dense.begin() + j * sz.k);
          Packed packed(*kern, dense, sz.n, sz.k);
          std::vector<float> a_pack(static_cast<size_t>(cpu::product_pack_floats(sz.m, sz.k)) + 16);
          kern->panels_product(sz.m, sz.n, sz.k, a.data(), lda, packed.data, 0, (sz.n + 15) / 16,
                               beta, b, packed_c.data(), ldc, a_pack.data());
          for (int64_t i = 0; i < sz.m; ++i) {
            for (int64_t j = 0; j < sz.n; ++j) {
              double want =
                  (with_bias ? bias[j] : 0.0) + (beta == 0.0f ? 0.0 : beta * c0[i * ldc + j]);
              for (int64_t p = 0; p < sz.k; ++p)
                want += double(a[i * lda + p]) * double(w[j * ldw + p]);
              INFO(name << " m " << sz.m << " n " << sz.n << " k " << sz.k << " beta " << beta
                        << " bias " << with_bias << " at (" << i << "," << j << ")");
              REQUIRE(std::abs(c[i * ldc + j] - want) <= 1e-5 * (1 + std::sqrt(double(sz.k))));
              REQUIRE(std::memcmp(&c[i * ldc + j], &packed_c[i * ldc + j], sizeof(float)) == 0);
            }
            for (int64_t j = sz.n; j < ldc; ++j)  // the padding between rows is left alone
              REQUIRE(std::isnan(c[i * ldc + j]));
          }
        }
    }
  }
  REQUIRE(any);  // the portable set's plain reference at least
}

TEST_CASE("every capability's matrix-vector kernel matches a plain loop in double",
          "[cpu_kernels]") {
  Rng rng(9);
  for (int64_t n : {1, 7, 8, 9, 17, 64})
    for (int64_t k : {1, 7, 8, 15, 16, 17, 33, 100}) {
      const int64_t ldw = k + 2, ldc = 3;
      const auto w = random_floats(static_cast<size_t>(n * ldw), rng);
      const auto x = random_floats(static_cast<size_t>(k), rng);
      const auto c0 = random_floats(static_cast<size_t>(n * ldc), rng);
      const float alpha = 0.75f;
      for (const cpu::Kernels* kern : runnable()) {
        auto c = c0;
        kern->gemv_rows(n, k, alpha, w.data(), ldw, x.data(), c.data(), ldc);
        for (int64_t i = 0; i < n; ++i) {
          double dot = 0;
          for (int64_t j = 0; j < k; ++j) dot += double(w[i * ldw + j]) * x[j];
          INFO(testing::set_name(*kern) << " n " << n << " k " << k << " row " << i);
          REQUIRE(std::abs(c[i * ldc] - (c0[i * ldc] + alpha * dot)) <= 1e-6 * (1 + double(k)));
          for (int64_t j = 1; j < ldc; ++j) REQUIRE(c[i * ldc + j] == c0[i * ldc + j]);
        }
      }
    }
}

TEST_CASE("every capability's small product matches a plain loop in double, in all four layouts",
          "[cpu_kernels]") {
  Rng rng(29);
  for (auto [m, n, k] : {std::array<int64_t, 3>{2, 2, 1},
                         {10, 10, 16},
                         {10, 16, 10},
                         {15, 15, 32},
                         {3, 64, 7},
                         {7, 17, 33},
                         {10, 40, 12},
                         {6, 20, 9},
                         {13, 130, 10},
                         {9, 33, 20},
                         {14, 24, 11},
                         {5, 16, 40}})  // rows in blocks of 4, 4 + 5, 4 + 5 + 5, 5 + 5, 5 (AVX2)
    for (int layout = 0; layout < 4; ++layout)
      for (auto [alpha, beta] :
           {std::pair{0.75f, 0.0f}, {0.75f, 0.5f}, {1.0f, 0.0f}, {1.0f, 1.0f}}) {
        const bool ta = layout & 1, tb = layout & 2;
        // op(a) (M,K) and op(b) (K,N), stored transposed where asked, rows padded by 3
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 3, ldc = n + 3;
        const auto a = random_floats(static_cast<size_t>((ta ? k : m) * lda), rng);
        const auto b = random_floats(static_cast<size_t>((tb ? n : k) * ldb), rng);
        auto c0 = random_floats(static_cast<size_t>(m * ldc), rng);
        if (beta == 0.0f)  // never read: a NaN there must not reach the product
          for (int64_t i = 0; i < m; ++i) c0[i * ldc] = std::numeric_limits<float>::quiet_NaN();
        for (const cpu::Kernels* kern : runnable()) {
          auto c = c0;
          std::vector<float> bt(static_cast<size_t>(k * n));
          kern->small_gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(),
                           ldc, bt.data());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double dot = 0;
              for (int64_t p = 0; p < k; ++p)
                dot += double(ta ? a[p * lda + i] : a[i * lda + p]) *
                       (tb ? b[j * ldb + p] : b[p * ldb + j]);
              const double want = alpha * dot + (beta == 0.0f ? 0.0 : beta * c0[i * ldc + j]);
              INFO(testing::set_name(*kern)
                   << " " << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " alpha "
                   << alpha << " beta " << beta << " at " << i << "," << j);
              REQUIRE(std::abs(c[i * ldc + j] - want) <= 1e-6 * (1 + double(k)));
            }
            for (int64_t j = n; j < ldc; ++j)  // the padding between rows is left alone
              REQUIRE(std::memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)) == 0);
          }
        }
      }
}

namespace {

using testing::ulps;

// The floats test_fastmath sweeps the scalar functions over (float_sweep.h), in a vector, so that
// every vector tail and lane is met.
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> xs;
  testing::sweep(lo, hi, [&](float x) { xs.push_back(x); });
  return xs;
}

// Lengths that cover empty, scalar tails, one and several vectors of 8 and 16, and long rows.
constexpr int64_t kLengths[] = {0, 1, 7, 8, 15, 16, 17, 33, 64, 100, 1000};

}  // namespace

TEST_CASE("every capability's exp, tanh and sigmoid keep the fast functions' ulp bounds",
          "[cpu_kernels]") {
  const auto wide = sweep(-87.0f, 88.0f), mid = sweep(-20.0f, 20.0f), sig = sweep(-80.0f, 80.0f);
  for (const cpu::Kernels* kern : runnable()) {
    INFO(testing::set_name(*kern));
    std::vector<float> y(wide.size());
    kern->exp(wide.data(), y.data(), static_cast<int64_t>(wide.size()));
    int64_t worst = 0;
    for (size_t i = 0; i < wide.size(); ++i) worst = std::max(worst, ulps(y[i], std::exp(wide[i])));
    CHECK(worst <= 2);
    y.assign(mid.size(), 0.0f);
    kern->tanh(mid.data(), y.data(), static_cast<int64_t>(mid.size()));
    worst = 0;
    for (size_t i = 0; i < mid.size(); ++i)
      if (std::tanh(mid[i]) != 0) worst = std::max(worst, ulps(y[i], std::tanh(mid[i])));
    CHECK(worst <= 4);
    y.assign(sig.size(), 0.0f);
    kern->sigmoid(sig.data(), y.data(), static_cast<int64_t>(sig.size()));
    worst = 0;
    for (size_t i = 0; i < sig.size(); ++i) {
      const auto exact = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(sig[i]))));
      if (exact > 1e-37f) worst = std::max(worst, ulps(y[i], exact));
    }
    CHECK(worst <= 3);
    // In place, and NaN through.
    std::vector<float> x = {0.0f, -1e-30f, 30.0f, std::nanf("")};
    kern->tanh(x.data(), x.data(), 4);
    CHECK(x[0] == 0.0f);
    CHECK(x[1] == -1e-30f);
    CHECK(x[2] == 1.0f);
    CHECK(std::isnan(x[3]));
  }
}

TEST_CASE("every capability's softmax rows match double loops", "[cpu_kernels]") {
  Rng rng(11);
  for (int64_t n : kLengths) {
    auto x = random_floats(static_cast<size_t>(n), rng);
    for (auto& v : x) v *= 12.0f;
    if (n > 3) x[3] = x[1];  // a tie somewhere
    double mx = -INFINITY;
    for (float v : x) mx = std::max(mx, double(v));
    for (const cpu::Kernels* kern : runnable()) {
      INFO(testing::set_name(*kern) << " n " << n);
      const float m = kern->max_value(x.data(), n);
      REQUIRE(double(m) == mx);  // the maximum is exact
      if (n == 0) continue;
      double rest = -1;
      for (float v : x) rest += std::exp(double(v) - m);
      const float got = kern->softmax_rest(x.data(), n, m);
      REQUIRE(std::abs(got - rest) <= 1e-6 * (1 + rest));
      // softmax_grad adds g (p - u) with p from m and r = log1p(rest).
      const float r = std::log1p(got), g = 0.25f, u = 0.01f;
      std::vector<float> d(static_cast<size_t>(n), 1.0f);
      kern->softmax_grad(x.data(), d.data(), n, m, r, g, u);
      for (int64_t j = 0; j < n; ++j)
        REQUIRE(std::abs(d[j] - (1.0 + g * (std::exp(double(x[j]) - m - r) - u))) <= 1e-6);
    }
  }
}

TEST_CASE("every capability's attention and recurrent rows match double loops", "[cpu_kernels]") {
  Rng rng(13);
  for (int64_t n : kLengths) {
    const auto p = random_floats(static_cast<size_t>(4 * n), rng);
    const auto q = random_floats(static_cast<size_t>(4 * n), rng);
    const auto v = random_floats(static_cast<size_t>(4 * n), rng);
    const auto h = random_floats(static_cast<size_t>(n), rng);
    const std::vector<double> pd(p.begin(), p.end()), qd(q.begin(), q.end()),
        vd(v.begin(), v.end()), hd(h.begin(), h.end());
    // Double references through the same loops; the scores of p's 4 rows of n against q.
    std::vector<double> dots(4);
    loops::tanh_dots(pd.data(), qd.data(), vd.data(), n, 4, dots.data());
    std::vector<double> gr(static_cast<size_t>(3 * n)), ghn(n), gy(n), lg(4 * n), lc(n), lh(n);
    loops::gru_row(pd.data(), qd.data(), vd.data(), hd.data(), gr.data(), gr.data() + n,
                   gr.data() + 2 * n, ghn.data(), gy.data(), n);
    loops::lstm_row(pd.data(), qd.data(), vd.data(), hd.data(), lg.data(), lc.data(), lh.data(), n);
    auto near = [](const std::vector<float>& got, const std::vector<double>& want) {
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::abs(got[i] - want[i]) <= 2e-6);
    };
    for (const cpu::Kernels* kern : runnable()) {
      INFO(testing::set_name(*kern) << " n " << n);
      std::vector<float> scores(4);
      kern->tanh_dots(p.data(), q.data(), v.data(), n, 4, scores.data());
      for (int64_t j = 0; j < 4; ++j) {
        REQUIRE(std::abs(scores[j] - dots[j]) <= 1e-6 * (1 + n));
        float alone = 0;  // a row scored on its own has the bits it has among the others
        kern->tanh_dots(p.data() + j * n, q.data(), v.data(), n, 1, &alone);
        REQUIRE(testing::same_bits(alone, scores[j]));
      }
      std::vector<float> t(static_cast<size_t>(n));
      kern->tanh_of_sum(p.data(), q.data(), t.data(), n);
      std::vector<double> td(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) td[k] = std::tanh(pd[k] + qd[k]);
      near(t, td);
      std::vector<float> r(3 * n), gh(n), y(n);
      kern->gru_row(p.data(), q.data(), v.data(), h.data(), r.data(), r.data() + n,
                    r.data() + 2 * n, gh.data(), y.data(), n);
      near(r, gr);
      near(gh, ghn);
      near(y, gy);
      std::vector<float> g4(4 * n), c2(n), h2(n);
      kern->lstm_row(p.data(), q.data(), v.data(), h.data(), g4.data(), c2.data(), h2.data(), n);
      near(g4, lg);
      near(c2, lc);
      near(h2, lh);
    }
  }
}

TEST_CASE("every capability's Adam step matches a double loop", "[cpu_kernels]") {
  Rng rng(17);
  for (int64_t n : kLengths)
    for (int variant = 0; variant < 8; ++variant) {
      // scaled: by a clipping factor; zeroed: the gradient zeroed once read
      const bool decay = variant & 1, scaled = variant & 2, zeroed = variant & 4;
      const auto x0 = random_floats(static_cast<size_t>(n), rng);
      const auto g = random_floats(static_cast<size_t>(n), rng);
      auto m0 = random_floats(static_cast<size_t>(n), rng);
      auto v0 = random_floats(static_cast<size_t>(n), rng);
      for (auto& e : v0) e = e * e + 0.01f;  // second moments: positive, not vanishing
      // lr 1e-3, bc1 0.3, bc2 0.2, eps 1e-8
      const loops::AdamScalars<double> kd{0.9,
                                          0.98,
                                          0.1,
                                          0.02,
                                          decay ? 0.01 : 0.0,
                                          decay ? 0.999 : 1.0,
                                          1e-3 * std::sqrt(0.2) / 0.3,
                                          1e-8 * std::sqrt(0.2),
                                          scaled ? 0.37 : 1.0,
                                          zeroed};
      const loops::AdamScalars<float> kf = to_float(kd);
      std::vector<double> xd(x0.begin(), x0.end()), gd(g.begin(), g.end()),
          md(m0.begin(), m0.end()), vd(v0.begin(), v0.end());
      loops::adam_update(xd.data(), gd.data(), md.data(), vd.data(), n, kd);
      for (const cpu::Kernels* kern : runnable()) {
        INFO(testing::set_name(*kern) << " n " << n << " decay " << decay << " scaled " << scaled);
        auto x = x0, gk = g, m = m0, v = v0;
        kern->adam_update(x.data(), gk.data(), m.data(), v.data(), n, kf);
        for (int64_t j = 0; j < n; ++j) {
          REQUIRE(gk[j] == (zeroed ? 0.0f : g[j]));
          REQUIRE(gd[j] == (zeroed ? 0.0 : double(g[j])));
          REQUIRE(std::abs(x[j] - xd[j]) <= 1e-6 * (1 + std::abs(xd[j])));
          REQUIRE(std::abs(m[j] - md[j]) <= 1e-6);
          REQUIRE(std::abs(v[j] - vd[j]) <= 1e-6);
        }
      }
    }
}

TEST_CASE("every capability's Adam update is within 1e-6 of a double loop's over v's whole range",
          "[cpu_kernels]") {
  // x starts at 0, so x after the step is the update itself and is compared relatively (the test
  // above compares x near 1, where an update of 1e-3 keeps only its first digits). g and m have
  // one sign in each element, so m = b1 m + c1 g does not cancel.
  Rng rng(23);
  const int64_t n = 16 * 40 + 7;  // whole vectors and a tail
  std::vector<float> x0(static_cast<size_t>(n), 0.0f), g(x0.size()), m0(x0.size()), v0(x0.size());
  for (size_t j = 0; j < x0.size(); ++j) {
    const float sign = rng.uniform() < 0.5 ? -1.0f : 1.0f;
    g[j] = sign * static_cast<float>(std::pow(10.0, rng.uniform(-12, 12)));
    m0[j] = sign * static_cast<float>(std::pow(10.0, rng.uniform(-12, 12)));
    v0[j] = static_cast<float>(std::pow(10.0, rng.uniform(-30, 25)));
    if (j % 97 == 0) g[j] = m0[j] = v0[j] = 0.0f;  // a weight never touched: v = 0
    if (j % 89 == 1) g[j] = 0.0f, v0[j] = 1e-40f;  // a subnormal v
    if (j % 83 == 2) v0[j] = 1e32f;                // beyond the estimates' range
    if (j % 79 == 3) v0[j] = std::numeric_limits<float>::quiet_NaN();
  }
  for (bool decay : {false, true}) {
    const loops::AdamScalars<double> kd{0.9,
                                        0.999,
                                        0.1,
                                        0.001,
                                        decay ? 0.01 : 0.0,
                                        decay ? 0.999 : 1.0,
                                        1e-3 * std::sqrt(0.02) / 0.1,
                                        1e-8 * std::sqrt(0.02)};
    const loops::AdamScalars<float> kf = to_float(kd);
    std::vector<double> xd(x0.begin(), x0.end()), gd(g.begin(), g.end()), md(m0.begin(), m0.end()),
        vd(v0.begin(), v0.end());
    loops::adam_update(xd.data(), gd.data(), md.data(), vd.data(), n, kd);
    for (const cpu::Kernels* kern : runnable()) {
      auto x = x0, gk = g, m = m0, v = v0;
      kern->adam_update(x.data(), gk.data(), m.data(), v.data(), n, kf);
      for (size_t j = 0; j < x.size(); ++j) {
        INFO(testing::set_name(*kern)
             << " decay " << decay << " element " << j << " g " << g[j] << " m " << m0[j] << " v "
             << v0[j] << ": " << x[j] << " against " << xd[j]);
        if (std::isnan(xd[j]))
          REQUIRE(std::isnan(x[j]));
        else
          REQUIRE(std::abs(x[j] - xd[j]) <= 1e-6 * std::abs(xd[j]));
      }
    }
  }
}

TEST_CASE("the program refuses a bad TAPESTRY_KERNELS in one line, before any work",
          "[cpu_kernels]") {
  std::string cmd = "TAPESTRY_KERNELS=sse9 '";
  cmd.append(TAPESTRY_BINARY_DIR).append("/tapestry' help 2>&1");
  const testing::CommandResult r = testing::run_command(cmd);
  CHECK(r.status == 2);
  CHECK(r.output ==
        "tapestry: TAPESTRY_KERNELS=sse9: not a kernel set (avx512, avx2 or portable)\n");
}
