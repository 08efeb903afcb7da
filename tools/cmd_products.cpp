// tapestry products: each path a float32 matrix product can take (the kernel set's small_gemm and
// few-rows kernel, OpenBLAS, and blas::gemm's own choice among them) timed by shape on one core,
// to set the limits where blas::gemm leaves OpenBLAS (cpu::Kernels::small_gemm_madds and the
// short sides, blas::small_product_limits) on the machine at hand.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tapestry/core/blas.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/parallel.h"
#include "tapestry/core/random.h"
#include "tapestry/core/vector_loops.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/median.h"

namespace tapestry::cli {

namespace {

constexpr const char* kAbout =
    "Times each path a float32 matrix product c (M,N) = op(a) op(b) can take, on one core, for\n"
    "each shape: the kernel set's small_gemm (at most 64 columns, or b read in place when it is\n"
    "not transposed), its few-rows kernel (a few rows against b^T), OpenBLAS's sgemm, and\n"
    "blas::gemm, which chooses among them by the limits printed first (those of the kernel set in\n"
    "use, lowered where OpenBLAS runs its AVX-512 kernels). Each figure is the median of\n"
    "--samples timings of repeated calls (each at least --min-ms long), in GFLOP/s (2MNK flops a\n"
    "product); '-' where a path does not take that shape. Every path's c is checked against\n"
    "OpenBLAS's before it is timed. 'fastest' names the fastest of the three single paths; gemm\n"
    "can beat them all where it runs the few-rows kernel on each half of the rows. The set is the\n"
    "best this CPU runs, or the one TAPESTRY_KERNELS names; OpenBLAS's kernels are those\n"
    "OPENBLAS_CORETYPE names, if set. The last line is 'RESULT {json}'.\n\n"
    "A shape is LAYOUT:MxNxK, LAYOUT one of NN, NT, TN, TT (op(a), op(b): N as stored, T\n"
    "transposed). The default shapes: the attention heads of the bench presets (scores q k^T as\n"
    "NT, a v as NN, dv = a^T dy as TN), products on either side of the small_gemm limits (4,096\n"
    "to 65,536 multiply-adds), and short sides (dx = dy W, dW += dy^T x for one sentence).\n\n"
    "examples:\n"
    "  tapestry products\n"
    "  tapestry products --shapes NN:20x32x20,TN:20x32x20 --samples 9\n"
    "  TAPESTRY_KERNELS=avx2 tapestry products";

constexpr const char* kDefaultShapes =
    "NT:10x10x16,NN:10x16x10,TN:10x16x10,"
    "NT:15x15x32,NN:15x32x15,TN:15x32x15,"
    "NT:20x20x32,NN:20x32x20,TN:20x32x20,"
    "NN:16x16x16,NN:10x32x16,NN:16x32x16,NN:32x32x16,NN:24x40x16,NN:32x64x16,NN:32x64x32,"
    "TN:32x32x32,NN:32x64x64,"
    "NN:10x512x256,TN:256x512x10,NN:4x1024x512,TN:512x1024x4";

struct Shape {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  std::string text;
};

// The shapes of --shapes; throws UsageError naming the flag and the item.
std::vector<Shape> parse_shapes(const std::string& list) {
  std::vector<Shape> out;
  for (const std::string& item : split_commas(list)) {
    auto bad = [&](const std::string& why) {
      return UsageError{
          fmt::format("--shapes: '{}' {} (a shape is LAYOUT:MxNxK, e.g. NT:20x20x32)", item, why)};
    };
    if (item.size() < 3 || item[2] != ':') throw bad("has no layout");
    Shape s;
    s.text = item;
    const std::string layout = item.substr(0, 2);
    if (layout != "NN" && layout != "NT" && layout != "TN" && layout != "TT")
      throw bad("has layout " + layout + ", not NN, NT, TN or TT");
    s.ta = layout[0] == 'T', s.tb = layout[1] == 'T';
    int64_t* dims[] = {&s.m, &s.n, &s.k};
    size_t pos = 3;
    for (int d = 0; d < 3; ++d) {
      const size_t stop = d < 2 ? item.find('x', pos) : item.size();
      if (stop == std::string::npos) throw bad("has fewer than three sizes");
      const std::string num = item.substr(pos, stop - pos);
      if (num.empty() || num.size() > 5 || num.find_first_not_of("0123456789") != std::string::npos)
        throw bad("has size '" + num + "', not a whole number");
      *dims[d] = std::stoll(num);
      if (*dims[d] < 1 || *dims[d] > 4096) throw bad("has a size outside 1..4096");
      pos = stop + 1;
    }
    out.push_back(s);
  }
  return out;
}

using Clock = std::chrono::steady_clock;

// The median over `samples` of the seconds one call of f takes, each sample repeating f for at
// least min_ms.
template <class F>
double seconds_per_call(F&& f, int64_t samples, double min_ms) {
  f();  // warm: the scratch buffers, the caches
  int64_t reps = 1;
  for (;;) {  // calls enough for one sample to last min_ms
    const auto t0 = Clock::now();
    for (int64_t r = 0; r < reps; ++r) f();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ms >= min_ms || reps >= (int64_t{1} << 30)) break;
    reps = ms > 0 ? std::max(reps * 2, static_cast<int64_t>(reps * min_ms / ms * 1.2)) : reps * 8;
  }
  std::vector<double> per_call;
  for (int64_t s = 0; s < samples; ++s) {
    const auto t0 = Clock::now();
    for (int64_t r = 0; r < reps; ++r) f();
    per_call.push_back(std::chrono::duration<double>(Clock::now() - t0).count() /
                       static_cast<double>(reps));
  }
  return median_of(per_call);
}

// The largest |x - ref| over |ref| + 1 (relative for large values, absolute near 0).
double worst_difference(const std::vector<float>& x, const std::vector<float>& ref) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(double(x[i]) - ref[i]) / (std::abs(double(ref[i])) + 1));
  return std::isnan(worst) ? INFINITY : worst;
}

struct Path {
  const char* name;
  bool takes;
  std::function<void(float* c)> run;
};

}  // namespace

int cmd_products(const Args& args) {
  std::string shapes_flag = kDefaultShapes;
  int64_t samples = 7, seed = 1;
  double min_ms = 5;
  Flags flags("tapestry products [options]", kAbout);
  flags.add("shapes", &shapes_flag, "LAYOUT:MxNxK,... the products to time");
  flags.add("samples", &samples, "timings per path and shape (the median is printed)", 1, 1001);
  flags.add("min-ms", &min_ms, "the least time of one timing, in milliseconds", 0.01, 10000);
  flags.add("seed", &seed, "the seed of the random operands", 0, int64_t{1} << 62);
  if (!flags.parse(args)) return 0;
  const std::vector<Shape> shapes = parse_shapes(shapes_flag);

  set_parallel_threads(1);  // one core: blas::gemm does not split columns, OpenBLAS one thread
  const cpu::Kernels& kern = cpu::kernels();
  const blas::SmallProductLimits limits = blas::small_product_limits();
  const auto any_size = [](int64_t madds) {  // no limit: INT64_MAX
    return madds == INT64_MAX ? std::string("any") : std::to_string(madds);
  };
  fmt::print(
      "# kernels={} blas_core={} threads=1 small_gemm_madds={} split_few_rows_madds={} "
      "short_side_max={}\n",
      cpu::capability_name(kern.capability), blas::core_name(), limits.small_gemm_madds,
      any_size(limits.split_few_rows_madds), limits.short_side_max);
  fmt::print("# GFLOP/s, median of {} timings\n", samples);
  fmt::print("{:<18} {:>8}  {:>10} {:>9} {:>9} {:>9}  {}\n", "shape", "madds", "small_gemm",
             "few_rows", "openblas", "gemm", "fastest");

  Rng rng(static_cast<uint64_t>(seed));
  nlohmann::json rows = nlohmann::json::array();
  int status = 0;
  for (const Shape& s : shapes) {
    const int64_t m = s.m, n = s.n, k = s.k;
    // Stored as op() needs: a is (M,K) or (K,M), b is (K,N) or (N,K); rows packed tightly.
    const int64_t lda = s.ta ? m : k, ldb = s.tb ? k : n;
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (auto& x : a) x = static_cast<float>(rng.uniform(-1, 1));
    for (auto& x : b) x = static_cast<float>(rng.uniform(-1, 1));
    std::vector<float> bt(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
    auto openblas = [&](float* out) {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  (blasint)m, (blasint)n, (blasint)k, 1.0f, a.data(), (blasint)lda, b.data(),
                  (blasint)ldb, 0.0f, out, (blasint)n);
    };
    const auto few_rows = !s.ta && s.tb ? cpu::few_rows_kernel(m, k) : nullptr;
    const bool small_takes =
        kern.capability != cpu::Capability::portable && (n <= loops::kSmallGemmCols || !s.tb);
    const Path paths[] = {
        {"small_gemm", small_takes,
         [&](float* out) {
           kern.small_gemm(s.ta, s.tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, out, n,
                           n <= loops::kSmallGemmCols ? bt.data() : nullptr);
         }},
        {"few_rows", few_rows != nullptr,
         [&](float* out) {
           few_rows(m, n, k, a.data(), lda, b.data(), ldb, 0.0f, nullptr, out, n);
         }},
        {"openblas", true, openblas},
        {"gemm", true,
         [&](float* out) {
           blas::gemm(s.ta, s.tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, out, n);
         }},
    };
    std::vector<float> ref(static_cast<size_t>(m * n));
    openblas(ref.data());
    const double flops = 2.0 * double(m) * double(n) * double(k);
    nlohmann::json row = {{"shape", s.text}, {"madds", m * n * k}};
    std::string cells, fastest = "openblas";
    double best = 0;
    for (const Path& p : paths) {
      if (!p.takes) {
        cells += fmt::format(" {:>9}", "-");
        row[p.name] = nullptr;
        continue;
      }
      std::fill(c.begin(), c.end(), NAN);
      p.run(c.data());
      if (const double diff = worst_difference(c, ref); diff > 1e-4) {
        fmt::print(stderr, "tapestry products: {} of {} differs from OpenBLAS's by {:.3g}\n",
                   p.name, s.text, diff);
        status = 1;
      }
      const double gflops =
          flops / seconds_per_call([&] { p.run(c.data()); }, samples, min_ms) / 1e9;
      cells += fmt::format(" {:>9.1f}", gflops);
      row[p.name] = std::round(gflops * 10) / 10;
      if (std::string(p.name) != "gemm" && gflops > best) best = gflops, fastest = p.name;
    }
    row["fastest"] = fastest;
    fmt::print("{:<18} {:>8} {}  {}\n", s.text, m * n * k, cells, fastest);
    rows.push_back(row);
  }
  const nlohmann::json result = {
      {"kernels", cpu::capability_name(kern.capability)},
      {"blas_core", blas::core_name()},
      {"small_gemm_madds", limits.small_gemm_madds},
      {"split_few_rows_madds", limits.split_few_rows_madds == INT64_MAX
                                   ? nlohmann::json(nullptr)
                                   : nlohmann::json(limits.split_few_rows_madds)},
      {"short_side_max", limits.short_side_max},
      {"products", rows}};
  fmt::print("RESULT {}\n", result.dump());
  return status;
}

}  // namespace tapestry::cli
