// Two computations that should agree (a fused kernel and the ops it replaces, one step on a split
// input and on the whole): their values and gradients, as flat lists, checked element by element.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tapestry::testing {

using Results = std::vector<std::vector<double>>;

// Every element of a equals the one of b to 1e-12 relative, or within `margin` absolute.
inline void check_results_close(const Results& a, const Results& b, const std::string& what,
                                double margin) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO(what << " result " << k);
    REQUIRE(a[k].size() == b[k].size());
    for (size_t i = 0; i < a[k].size(); ++i)
      CHECK(a[k][i] == Approx(b[k][i]).epsilon(1e-12).margin(margin));
  }
}

}  // namespace tapestry::testing
