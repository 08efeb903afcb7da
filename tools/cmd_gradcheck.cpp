// tapestry gradcheck: runs the gradient-check registry and prints one line per case.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "tapestry/core/gradcheck.h"
#include "tapestry/models/gradcheck_registry.h"
#include "tools/cli.h"

namespace tapestry::cli {

namespace {
void usage() {
  fmt::print(
      "usage: tapestry gradcheck [--op NAME] [--list]\n\n"
      "Checks the analytic gradient of every registered op and layer against central finite\n"
      "differences in float64, with loss = sum(r * y) for a random r. Prints, per case, the max\n"
      "absolute error and the max relative error (max|analytic-numeric| / "
      "max(|analytic|,|numeric|)\n"
      "per checked tensor); a case passes below its tolerance (1e-6 unless the case says).\n"
      "Exits with status 1 if any case fails.\n\n"
      "  --op NAME   only the cases of this op or layer\n"
      "  --list      list the names that have cases, and exit\n");
}
}  // namespace

int cmd_gradcheck(const Args& args) {
  std::string only;
  bool list = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      usage();
      return 0;
    } else if (args[i] == "--op") {
      if (i + 1 >= args.size()) throw UsageError{"--op needs a value (an op name; see --list)"};
      only = args[++i];
    } else if (args[i] == "--list") {
      list = true;
    } else {
      throw UsageError{
          fmt::format("unknown option '{}' (valid: --op NAME, --list, --help)", args[i])};
    }
  }

  GradcheckRegistry reg;
  add_all_gradcheck_cases(reg);
  std::set<std::string> names;
  for (const auto& c : reg.cases()) names.insert(c.op);
  if (list) {
    for (const auto& n : names) fmt::print("{}\n", n);
    return 0;
  }
  if (!only.empty() && !names.count(only)) {
    std::string valid;
    for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
    throw UsageError{fmt::format("no cases for op '{}' (valid: {})", only, valid)};
  }

  fmt::print("{:<20} {:<40} {:<28} {:>10} {:>10}  {}\n", "op", "case", "shapes", "max abs",
             "max rel", "result");
  fmt::print("{}\n", std::string(118, '-'));
  int run = 0, failed = 0;
  double worst = 0;
  for (const auto& c : reg.cases()) {
    if (!only.empty() && c.op != only) continue;
    GradcheckResult r = run_gradcheck(c);
    ++run;
    worst = std::max(worst, r.max_rel);
    if (!r.pass) ++failed;
    std::string shapes = c.shapes.size() > 28 ? c.shapes.substr(0, 25) + "..." : c.shapes;
    fmt::print("{:<20} {:<40} {:<28} {:>10.2e} {:>10.2e}  {}\n", c.op, c.name, shapes, r.max_abs,
               r.max_rel, r.pass ? "ok" : "FAIL");
    if (!r.error.empty())
      fmt::print("    error: {}\n", r.error);
    else if (!r.pass)
      fmt::print("    worst tensor: {} (tolerance {:.0e})\n", r.worst, c.tol);
  }
  fmt::print("{}\n", std::string(118, '-'));
  fmt::print("{} cases, {} passed, {} failed; worst relative error {:.2e}\n", run, run - failed,
             failed, worst);
  return failed ? 1 : 0;
}

}  // namespace tapestry::cli
