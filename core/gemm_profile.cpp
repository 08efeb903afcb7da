// GEMM profile: the tally of products by shape, printed at exit.
#include "tapestry/core/gemm_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace tapestry::blas {

struct GemmProfile {
  using Key = std::tuple<char, char, int64_t, int64_t, int64_t>;  // a, b, m, n, k
  struct Entry {
    int64_t calls = 0;
    double seconds = 0;
  };
  std::mutex mu;
  std::map<Key, Entry> shapes;
  ~GemmProfile() {
    std::vector<std::pair<Key, Entry>> rows(shapes.begin(), shapes.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    // The totals over every shape, not only the rows printed, so that two runs' totals can be
    // subtracted (a run with decoding less one without: decoding's products alone).
    double total = 0, flop = 0;
    for (auto& [key, e] : rows) {
      total += e.seconds;
      flop += 2.0 * std::get<2>(key) * std::get<3>(key) * std::get<4>(key) * e.calls;
    }
    fmt::print(stderr,
               "gemm profile: {:.3f} s, {:.3f} GFLOP ({:.1f} GFLOP/s a call's core) in {} shapes "
               "(P: a packed weight, W: one read in place)\n",
               total, flop * 1e-9, total > 0 ? flop / total * 1e-9 : 0.0, rows.size());
    fmt::print(stderr, "{:>3} {:>3} {:>7} {:>7} {:>7} {:>9} {:>10} {:>9} {:>6}\n", "a", "b", "m",
               "n", "k", "calls", "ms", "GFLOP/s", "share");
    for (size_t i = 0; i < rows.size() && i < 40; ++i) {
      auto [a, b, m, n, k] = rows[i].first;
      const Entry& e = rows[i].second;
      fmt::print(stderr, "{:>3} {:>3} {:>7} {:>7} {:>7} {:>9} {:>10.2f} {:>9.1f} {:>5.1f}%\n", a, b,
                 m, n, k, e.calls, e.seconds * 1e3, 2.0 * m * n * k * e.calls / e.seconds * 1e-9,
                 100 * e.seconds / total);
    }
  }
};

GemmProfile* gemm_profile() {
  static GemmProfile* p = std::getenv("TAPESTRY_GEMM_PROFILE") ? new GemmProfile() : nullptr;
  static struct Printer {
    ~Printer() { delete p; }
  } printer;
  return p;
}

void gemm_profile_add(GemmProfile* p, char a, char b, int64_t m, int64_t n, int64_t k,
                      double seconds) {
  std::lock_guard lock(p->mu);
  auto& e = p->shapes[{a, b, m, n, k}];
  ++e.calls;
  e.seconds += seconds;
}

}  // namespace tapestry::blas
