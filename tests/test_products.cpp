// tapestry products: every path of every shape asked for is run, checked against OpenBLAS and
// timed (the figures themselves are not tested: speed is measured in benchmarks, not tests); bad
// shapes are refused in one line naming the flag and the item.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"

using namespace tapestry::testing;
using Catch::Contains;

namespace {

nlohmann::json result_of(const std::string& output) {
  const auto at = output.rfind("RESULT ");
  REQUIRE(at != std::string::npos);
  return nlohmann::json::parse(output.substr(at + 7, output.find('\n', at) - at - 7));
}

}  // namespace

TEST_CASE("tapestry products times each path a shape can take, in the order asked",
          "[cli][products]") {
  // Every layout; a head's scores (few_rows takes them), a wide short side (small_gemm reads b in
  // place), a wide transposed b (only OpenBLAS and gemm), a single row (gemm's matrix-vector path).
  const auto r = run_tapestry(
      "products --samples 1 --min-ms 0.05 "
      "--shapes NT:10x10x16,NN:10x512x64,TN:7x9x5,TT:3x100x8,NN:1x40x33");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("# kernels="));
  const nlohmann::json res = result_of(r.output);
  const auto& rows = res.at("products");
  REQUIRE(rows.size() == 5);
  const char* shapes[] = {"NT:10x10x16", "NN:10x512x64", "TN:7x9x5", "TT:3x100x8", "NN:1x40x33"};
  const int64_t madds[] = {1600, 10 * 512 * 64, 7 * 9 * 5, 3 * 100 * 8, 40 * 33};
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO(shapes[i]);
    CHECK(rows[i].at("shape") == shapes[i]);
    CHECK(rows[i].at("madds") == madds[i]);
    CHECK(rows[i].at("openblas").get<double>() > 0);
    CHECK(rows[i].at("gemm").get<double>() > 0);
    const std::string fastest = rows[i].at("fastest");
    CHECK(!rows[i].at(fastest).is_null());
  }
  const bool vectorised = res.at("kernels") != "portable";
  // b^T of 100 columns is past small_gemm's 64, and no set's few-rows kernel takes TT.
  CHECK(rows[3].at("small_gemm").is_null());
  CHECK(rows[3].at("few_rows").is_null());
  CHECK(rows[1].at("small_gemm").is_null() == !vectorised);
  CHECK(rows[0].at("few_rows").is_null() == !vectorised);
}

TEST_CASE("tapestry products refuses a bad shape in one line naming the flag and the item",
          "[cli][products]") {
  const std::pair<const char*, const char*> cases[] = {
      {"NX:2x2x2", "'NX:2x2x2' has layout NX, not NN, NT, TN or TT"},
      {"NN2x2x2", "'NN2x2x2' has no layout"},
      {"NN:2x2", "'NN:2x2' has fewer than three sizes"},
      {"NN:2xax2", "'NN:2xax2' has size 'a', not a whole number"},
      {"NN:2x0x2", "'NN:2x0x2' has a size outside 1..4096"},
      {"NN:2x2x5000", "'NN:2x2x5000' has a size outside 1..4096"},
      {"NN:2x2x2,", "'' has no layout"},
  };
  for (const auto& [shapes, message] : cases) {
    const auto r = run_tapestry(std::string("products --shapes '") + shapes + "'");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains(std::string("--shapes: ") + message));
    CHECK(r.output.find('\n') == r.output.size() - 1);  // one line
    CHECK(r.output.find("RESULT") == std::string::npos);
  }
}
