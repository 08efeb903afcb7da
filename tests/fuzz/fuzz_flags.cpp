// Fuzzes Flags::parse on NUL-separated arguments: train's flags, then every kind of flag.
#include "tests/fuzz/fuzz_util.h"
#include "tools/flags.h"
#include "tools/train_setup.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const cli::Args args = fuzz::split(fuzz::as_text(data, size), '\0');
  try {
    cli::TrainSettings s;
    cli::Flags flags("tapestry train [options]", "");
    s.declare(flags);
    if (flags.parse(args)) s.check(flags);
  } catch (const cli::UsageError&) {
  }
  try {
    std::string model, out = "x", pick = "a";
    int64_t n = 0;
    double x = 0;
    bool on = false;
    std::vector<std::string> rest;
    cli::Flags flags("fuzz MODEL [OUT] [FILES...]", "");
    flags.add_positional("MODEL", &model, "a model");
    flags.add_positional("OUT", &out, "where", false);
    flags.section("numbers");
    flags.add("n", &n, "a count", -3, 1000000);
    flags.add("x", &x, "a value", -1.5, 1e300);
    flags.add("pick", &pick, "a choice", {"a", "b", "longer-choice"});
    flags.add_switch("on", &on, "a switch");
    flags.add_rest("FILES", &rest, "more");
    if (flags.parse(args)) {
      if (n < -3 || n > 1000000 || !(x >= -1.5 && x <= 1e300)) std::abort();
      if (pick != "a" && pick != "b" && pick != "longer-choice") std::abort();
      (void)flags.given("n");
    }
  } catch (const cli::UsageError&) {
  }
  return 0;
}
