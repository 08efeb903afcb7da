// The AVX2 and AVX-512 sets' elementwise kernels written with intrinsics (tanh8 and tanh16,
// sigmoid8 and sigmoid16 and the rows built on them, the row maximum, the softmax normaliser)
// against the plain loops' operations written out with std::fma: the same bits as the loops GCC
// vectorises with FMA.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "emulated/kernels_avx512_emulated.h"
#include "float_sweep.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/random.h"
#include "tapestry/core/vector_loops.h"

using namespace tapestry;
using cpu::Capability;
using testing::same_bits;

namespace {

// The AVX2 set, the AVX-512 one and the AVX-512 one emulated (tests/emulated), each where this
// build and CPU can run it; a warning names a set left untested. The emulation is checked on an
// AVX-512 CPU too, where it must give the hardware's bits.
std::vector<const cpu::Kernels*> vector_sets() {
  std::vector<const cpu::Kernels*> out;
  if (const cpu::Kernels* k = cpu::kernels_for(Capability::avx2))
    out.push_back(k);
  else
    WARN("this CPU cannot run the avx2 kernels: not tested here");
  if (const cpu::Kernels* k = cpu::kernels_for(Capability::avx512))
    out.push_back(k);
  else
    WARN("this CPU cannot run the avx512 kernels: not tested here");
  if (const cpu::Kernels* e = testing::avx512_emulated_kernels())
    out.push_back(e);
  else
    WARN("this build has no emulated avx512 kernels: not tested here");
  return out;
}

std::vector<float> random_floats(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

}  // namespace

namespace {

// fastmath::tanh with the multiply-adds fused as GCC fuses them with FMA (x86-64-v3 and up):
// what the AVX2 set computes, written out with std::fma so that any build of this test gives it.
float tanh_fused(float x) {
  float c = -10.0f > x ? -10.0f : x;
  c = 10.0f < c ? 10.0f : c;
  const float y = 2.0f * c;
  const float n = std::nearbyint(y * 1.44269504088896341f);
  const float r = std::fma(-n, 1.42860682030941723e-6f, std::fma(-n, 0.693145751953125f, y));
  float p = 1.0f / 5040;
  for (const float coef : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f})
    p = std::fma(p, r, coef);
  const float two_n = std::bit_cast<float>(static_cast<int32_t>(n + 127.0f) << 23);
  const float m = std::fma(r * p, two_n, -(1.0f - two_n));
  return std::copysign(m / (m + 2.0f), x);
}

// e^d = p 2^n as fastmath::exp computes it with FMA, d clamped to [-87, 88], with p's
// last step fused (p r + 1); the caller fuses the product p 2^n into its own add.
std::pair<float, float> exp_parts_fused(float d) {
  float c = -87.0f > d ? -87.0f : d;
  c = 88.0f < c ? 88.0f : c;
  const float n = std::nearbyint(c * 1.44269504088896341f);
  const float r = std::fma(-n, 1.42860682030941723e-6f, std::fma(-n, 0.693145751953125f, c));
  float p = 1.0f / 5040;
  for (const float coef : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = std::fma(p, r, coef);
  return {p, std::bit_cast<float>(static_cast<int32_t>(n + 127.0f) << 23)};
}

// fastmath::sigmoid as GCC fuses it with FMA: 1 / (1 + e^-x), the 1 + p 2^n fused.
float sigmoid_fused(float x) {
  const auto [p, two_n] = exp_parts_fused(-x);
  return 1.0f / std::fma(p, two_n, 1.0f);
}

// loops::softmax_rest as GCC compiles it for AVX2: in the 16 lanes, e^d - one with the
// subtraction fused; in the last n % 16 elements, e^d fused into the running sum.
float softmax_rest_fused(const float* x, int64_t n, float m) {
  const int64_t full = std::isfinite(m) ? n / 16 * 16 : 0;
  float lane[16] = {}, count[16] = {};
  for (int64_t i = 0; i < full; i += 16)
    for (int u = 0; u < 16; ++u) {
      const float d = x[i + u] - m, one = d == 0.0f ? 1.0f : 0.0f;
      const auto [p, two_n] = exp_parts_fused(d);
      lane[u] = lane[u] + std::fma(p, two_n, -one);
      count[u] = count[u] + one;
    }
  float rest = 0, maxima = 0;
  for (int u = 0; u < 16; ++u) rest += lane[u], maxima += count[u];
  for (int64_t i = full; i < n; ++i) {
    if (x[i] == m) {
      rest += 0.0f;
      maxima += 1.0f;
    } else {
      const auto [p, two_n] = exp_parts_fused(x[i] - m);
      rest = std::fma(p, two_n, rest);
      maxima += 0.0f;
    }
  }
  return rest + (maxima - 1);
}

}  // namespace

TEST_CASE("the AVX2 and AVX-512 sets' tanh, tanh_of_sum and tanh_dots have the plain loops' bits",
          "[cpu_kernels]") {
  // Its tanh is written with intrinsics (tanh8, tanh16), operation for operation as the plain
  // loop compiles with FMA: every float's tanh must keep its
  // bits, and the scores are the sum of loops::tanh_dot's 16 lanes (fused multiply-adds) in its
  // order, then the tail fused into the sum one element at a time.
  for (const cpu::Kernels* kern : vector_sets()) {
    INFO("set " << testing::set_name(*kern));
    std::vector<float> x;
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4093)
      x.push_back(std::bit_cast<float>(uint32_t(u)));
    for (float special : {0.0f, -0.0f, 10.0f, -10.0f, 9.999999f, 1e-30f, INFINITY, -INFINITY, NAN})
      x.push_back(special);
    std::vector<float> y(x.size());
    kern->tanh(x.data(), y.data(), static_cast<int64_t>(x.size()));
    int64_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) differ += !same_bits(y[i], tanh_fused(x[i]));
    CHECK(differ == 0);
    Rng rng(41);
    for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 40, 64, 100}) {
      // 19 rows: whole blocks of the AVX2 kernel's 8 rows (the AVX-512 one's 16) and a part.
      const int64_t rows = 19;
      INFO("n " << n);
      auto p = random_floats(static_cast<size_t>(rows * n), rng),
           q = random_floats(static_cast<size_t>(n), rng), v = random_floats(q.size(), rng);
      for (auto& e : p) e *= 14.0f;  // p + q past the clamps at +-10 too
      std::vector<float> t(q.size()), e(static_cast<size_t>(rows));
      kern->tanh_dots(p.data(), q.data(), v.data(), n, rows, e.data());
      for (int64_t j = 0; j < rows; ++j) {
        INFO("row " << j);
        const float* pj = p.data() + j * n;
        kern->tanh_of_sum(pj, q.data(), t.data(), n);
        float lane[16] = {};
        const int64_t full = n / 16 * 16;
        for (int64_t k = 0; k < n; ++k) {
          const float want = tanh_fused(pj[k] + q[k]);
          REQUIRE(same_bits(t[k], want));
          if (k < full) lane[k % 16] = std::fma(v[k], want, lane[k % 16]);
        }
        float sum = 0;
        for (float l : lane) sum += l;
        for (int64_t k = full; k < n; ++k) sum = std::fma(v[k], tanh_fused(pj[k] + q[k]), sum);
        REQUIRE(same_bits(e[j], sum));
      }
    }
    std::vector<float> untouched{7.0f};
    kern->tanh_dots(nullptr, nullptr, nullptr, 16, 0, untouched.data());  // no rows: nothing read
    CHECK(untouched[0] == 7.0f);
  }
}

TEST_CASE("the AVX2 and AVX-512 sets' GRU row has the plain loop's bits", "[cpu_kernels]") {
  // Written with intrinsics (sigmoid8 and tanh8, sigmoid16 and tanh16), operation for operation
  // as GCC vectorises loops::gru_row with FMA: r, z = sigmoid((x + w) + b), n = tanh(x_n + r (w_n +
  // b_n)) and y = n + z (h - n), the products fused into the adds.
  for (const cpu::Kernels* kern : vector_sets()) {
    INFO("set " << testing::set_name(*kern));
    // Every sigmoid: a row as wide as a sweep of floats, x the float and w, b zeros for r.
    std::vector<float> sweep;
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4093)
      sweep.push_back(std::bit_cast<float>(uint32_t(u)));
    for (float special :
         {0.0f, -0.0f, 87.0f, -87.0f, 88.0f, -88.0f, 1e-30f, INFINITY, -INFINITY, NAN})
      sweep.push_back(special);
    const int64_t wide = static_cast<int64_t>(sweep.size());
    std::vector<float> x(static_cast<size_t>(3 * wide)), zeros(x.size()), h(sweep.size()),
        gates(static_cast<size_t>(4 * wide)), y(sweep.size());
    std::copy(sweep.begin(), sweep.end(), x.begin());
    kern->gru_row(x.data(), zeros.data(), zeros.data(), h.data(), gates.data(), gates.data() + wide,
                  gates.data() + 2 * wide, gates.data() + 3 * wide, y.data(), wide);
    // A NaN gives a NaN of its own sign (GCC's loop gives a NaN whose sign depends on the order it
    // gave an instruction's operands: 0x7fc00000 came out as 0xffc00000 there).
    int64_t differ = 0;
    for (int64_t j = 0; j < wide; ++j) {
      const float in = sweep[j] + 0.0f;
      differ += std::isnan(in) ? !std::isnan(gates[j]) || std::signbit(gates[j]) != std::signbit(in)
                               : !same_bits(gates[j], sigmoid_fused(in));
    }
    CHECK(differ == 0);
    Rng rng(43);
    for (int64_t hs : {1, 5, 8, 13, 16, 64, 100}) {
      INFO("hs " << hs);
      auto xs = random_floats(static_cast<size_t>(3 * hs), rng), w = random_floats(xs.size(), rng),
           b = random_floats(xs.size(), rng), hv = random_floats(static_cast<size_t>(hs), rng);
      for (auto& e : xs) e *= 30.0f;  // past the clamps too
      std::vector<float> g(static_cast<size_t>(4 * hs)), out(static_cast<size_t>(hs));
      kern->gru_row(xs.data(), w.data(), b.data(), hv.data(), g.data(), g.data() + hs,
                    g.data() + 2 * hs, g.data() + 3 * hs, out.data(), hs);
      for (int64_t j = 0; j < hs; ++j) {
        INFO("column " << j);
        const float r = sigmoid_fused(xs[j] + w[j] + b[j]);
        const float z = sigmoid_fused(xs[hs + j] + w[hs + j] + b[hs + j]);
        const float ghn = w[2 * hs + j] + b[2 * hs + j];
        const float n = tanh_fused(std::fma(r, ghn, xs[2 * hs + j]));
        REQUIRE(same_bits(g[j], r));
        REQUIRE(same_bits(g[hs + j], z));
        REQUIRE(same_bits(g[2 * hs + j], n));
        REQUIRE(same_bits(g[3 * hs + j], ghn));
        REQUIRE(same_bits(out[j], std::fma(z, hv[j] - n, n)));
      }
    }
  }
}

TEST_CASE("the AVX2 and AVX-512 sets' LSTM row has the plain loop's bits", "[cpu_kernels]") {
  // Written with intrinsics (sigmoid8 and tanh8, sigmoid16 and tanh16), operation for operation
  // as GCC vectorises loops::lstm_row with FMA: gates (x + w) + b, c2 = f c + (i u) with f c fused
  // into the add, h2 = o tanh(c2).
  for (const cpu::Kernels* kern : vector_sets()) {
    INFO("set " << testing::set_name(*kern));
    Rng rng(59);
    for (int64_t hs : {1, 3, 5, 8, 13, 16, 64, 100}) {
      INFO("hs " << hs);
      auto x = random_floats(static_cast<size_t>(4 * hs), rng), w = random_floats(x.size(), rng),
           b = random_floats(x.size(), rng), c = random_floats(static_cast<size_t>(hs), rng);
      for (auto& e : x) e *= 30.0f;  // past the clamps too
      for (auto& e : c) e *= 8.0f;
      std::vector<float> g(x.size()), c2(c.size()), h2(c.size());
      kern->lstm_row(x.data(), w.data(), b.data(), c.data(), g.data(), c2.data(), h2.data(), hs);
      for (int64_t j = 0; j < hs; ++j) {
        INFO("column " << j);
        float gate[4];
        for (int k = 0; k < 4; ++k) {
          const int64_t at = k * hs + j;
          const float pre = x[at] + w[at] + b[at];
          gate[k] = k == 2 ? tanh_fused(pre) : sigmoid_fused(pre);
          REQUIRE(same_bits(g[at], gate[k]));
        }
        const float cell = std::fma(gate[1], c[j], gate[0] * gate[2]);
        REQUIRE(same_bits(c2[j], cell));
        REQUIRE(same_bits(h2[j], tanh_fused(cell) * gate[3]));
      }
    }
  }
}

TEST_CASE("the AVX2 and AVX-512 sets' maximum has the plain loop's bits", "[cpu_kernels]") {
  // Written with intrinsics: each of the 16 lanes keeps x > lane ? x : lane in the loop's order,
  // so a NaN is passed over and, of +0 and -0, the first one a lane meets stays.
  for (const cpu::Kernels* kern : vector_sets()) {
    INFO("set " << testing::set_name(*kern));
    Rng rng(47);
    for (int64_t n : {0, 1, 7, 15, 16, 17, 33, 100, 998}) {
      for (int pattern = 0; pattern < 4; ++pattern) {
        INFO("n " << n << " pattern " << pattern);
        auto x = random_floats(static_cast<size_t>(n), rng);
        for (size_t i = 0; i < x.size(); ++i) {
          if (pattern == 1) x[i] = i % 3 == 0 ? -0.0f : (i % 3 == 1 ? 0.0f : -1.0f);  // zeros tie
          if (pattern == 2 && i % 5 == 0) x[i] = NAN;
          if (pattern == 3) x[i] = i % 2 ? -INFINITY : x[i] - 2.0f;
        }
        REQUIRE(same_bits(kern->max_value(x.data(), n), loops::max_value(x.data(), n)));
      }
    }
  }
}

TEST_CASE("the AVX2 and AVX-512 sets' softmax normaliser has the plain loop's bits",
          "[cpu_kernels]") {
  // Its vector loop is written with intrinsics (exp's clamps as max and min), the lanes' sum and
  // the last elements are the loop's own code: rows with ties at the maximum, terms far below it
  // (past exp's clamp), every length around the 16 lanes, and rows whose maximum is infinite.
  for (const cpu::Kernels* kern : vector_sets()) {
    INFO("set " << testing::set_name(*kern));
    Rng rng(53);
    for (int64_t n : {1, 7, 15, 16, 17, 40, 100, 998}) {
      for (int pattern = 0; pattern < 5; ++pattern) {
        INFO("n " << n << " pattern " << pattern);
        auto x = random_floats(static_cast<size_t>(n), rng);
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] *= 12.0f;
          if (pattern == 1 && i % 4 == 0) x[i] = 12.0f;    // ties at the maximum
          if (pattern == 2 && i % 3 == 0) x[i] -= 200.0f;  // e^d below the clamp at -87
          if (pattern == 3) x[i] = -INFINITY;              // the maximum is -inf
          if (pattern == 4 && i == x.size() / 2) x[i] = INFINITY;
        }
        const float m = kern->max_value(x.data(), n);
        const float got = kern->softmax_rest(x.data(), n, m),
                    want = softmax_rest_fused(x.data(), n, m);
        if (std::isnan(want))
          REQUIRE(std::isnan(got));
        else
          REQUIRE(same_bits(got, want));
      }
    }
    std::vector<float> with_nan{1.0f, 2.0f, NAN,  0.5f, 3.0f, 1.0f, 2.0f, 0.0f,
                                1.0f, 2.0f, 1.0f, 0.5f, 3.0f, 1.0f, 2.0f, 0.0f};
    CHECK(std::isnan(kern->softmax_rest(with_nan.data(), 16, 3.0f)));
  }
}
