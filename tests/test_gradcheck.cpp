// The gradient-check registry: every case passes in float64, and every op has a case.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <set>

#include "tapestry/core/gradcheck.h"
#include "tapestry/models/gradcheck_registry.h"

using namespace tapestry;

namespace {
const GradcheckRegistry& registry() {
  static GradcheckRegistry reg = [] {
    GradcheckRegistry r;
    add_all_gradcheck_cases(r);
    return r;
  }();
  return reg;
}

// Every case run once, shared by the tests below.
const std::vector<GradcheckResult>& results() {
  static std::vector<GradcheckResult> rs = [] {
    std::vector<GradcheckResult> out;
    for (const auto& c : registry().cases()) out.push_back(run_gradcheck(c));
    return out;
  }();
  return rs;
}
}  // namespace

TEST_CASE("every gradient-check case passes in float64", "[gradcheck]") {
  for (const GradcheckResult& r : results()) {
    const GradcheckCase& c = *r.c;
    INFO(fmt::format("{} / {} {}: max abs {:.3e}, max rel {:.3e} (worst {}) {}", c.op, c.name,
                     c.shapes, r.max_abs, r.max_rel, r.worst, r.error));
    CHECK(r.error.empty());
    CHECK(r.pass);
    CHECK(r.max_rel < 1e-6);
  }
}

TEST_CASE("every registered op has a gradient-check case that records it", "[gradcheck]") {
  std::set<std::string> named, recorded;
  for (const GradcheckResult& r : results()) {
    const GradcheckCase& c = *r.c;
    named.insert(c.op);
    // A case must record the op it claims to check.
    INFO(fmt::format("case {} / {}", c.op, c.name));
    bool records_own_op =
        std::find(r.ops_recorded.begin(), r.ops_recorded.end(), c.op) != r.ops_recorded.end();
    bool is_layer = std::find(registry().layers().begin(), registry().layers().end(), c.op) !=
                    registry().layers().end();
    CHECK((records_own_op || is_layer));
    recorded.insert(r.ops_recorded.begin(), r.ops_recorded.end());
  }
  REQUIRE(!all_ops().empty());
  for (const OpDef* op : all_ops()) {
    INFO(fmt::format("op '{}' has no gradient-check case", op->name));
    CHECK(named.count(op->name) == 1);
    CHECK(recorded.count(op->name) == 1);
  }
  for (const auto& layer : registry().layers()) {
    INFO(fmt::format("layer '{}' has no gradient-check case", layer));
    CHECK(named.count(layer) == 1);
  }
}
