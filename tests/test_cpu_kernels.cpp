// The kernels of every capability this CPU can run (AVX-512, AVX2, portable) against plain loops
// in double, and against each other: the packed products give the same bits in every capability.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

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

// The kernels this CPU can run, announcing the ones it cannot (they are then untested here).
std::vector<const cpu::Kernels*> runnable() {
  std::vector<const cpu::Kernels*> out;
  for (Capability c : kAll)
    if (const cpu::Kernels* k = cpu::kernels_for(c))
      out.push_back(k);
    else
      WARN("this CPU cannot run the " << cpu::capability_name(c) << " kernels: not tested here");
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
    k.pack_panels(w.data(), n, kk, data);
  }
};

}  // namespace

TEST_CASE("the kernels in use are the best this CPU runs, unless TAPESTRY_KERNELS says otherwise",
          "[cpu_kernels]") {
  REQUIRE(cpu::kernels_for(Capability::portable) != nullptr);
  const char* forced = std::getenv("TAPESTRY_KERNELS");
  Capability best = Capability::portable;
  for (Capability c : {Capability::avx2, Capability::avx512})
    if (cpu::cpu_supports(c)) best = c;
  const Capability want = forced && *forced ? cpu::parse_capability(forced) : best;
  REQUIRE(cpu::kernels().capability == want);
  // A capability the CPU lacks has no kernels.
  for (Capability c : kAll) REQUIRE((cpu::kernels_for(c) != nullptr) == cpu::cpu_supports(c));
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
      INFO(cpu::capability_name(kern->capability) << " n " << n << " k " << k);
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
  // Rows: tiles of 1 to 8 and several of nearly equal height; columns: one panel, pairs of
  // panels and an odd one left over, tails; depth: one element, odd, one block of 512, several.
  const Size sizes[] = {{1, 1, 1},      {2, 15, 7},     {3, 16, 16},   {4, 17, 33}, {5, 48, 64},
                        {6, 100, 3},    {7, 47, 512},   {8, 33, 40},   {9, 80, 20}, {13, 30, 513},
                        {16, 384, 128}, {32, 70, 1100}, {1, 200, 300}, {11, 1, 40}, {17, 64, 9}};
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
          const auto name = cpu::capability_name(kern->capability);
          Packed packed(*kern, w, sz.n, sz.k);
          auto c = c0;
          // In two calls over the panels, as the product is split across cores.
          const int64_t panels = (sz.n + 15) / 16, half = panels / 2;
          const float* b = with_bias ? bias.data() : nullptr;
          kern->panels_product(sz.m, sz.n, sz.k, a.data(), lda, packed.data, 0, half, beta, b,
                               c.data(), ldc);
          kern->panels_product(sz.m, sz.n, sz.k, a.data(), lda, packed.data, half, panels, beta, b,
                               c.data(), ldc);
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
          INFO(cpu::capability_name(kern->capability) << " n " << n << " k " << k << " row " << i);
          REQUIRE(std::abs(c[i * ldc] - (c0[i * ldc] + alpha * dot)) <= 1e-6 * (1 + double(k)));
          for (int64_t j = 1; j < ldc; ++j) REQUIRE(c[i * ldc + j] == c0[i * ldc + j]);
        }
      }
    }
}
