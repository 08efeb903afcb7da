// Fuzzes RunDir::read_command on command.json, then parses what it read as train --resume does.
#include "tapestry/core/errors.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/flags.h"
#include "tools/run_dir.h"
#include "tools/train_setup.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    fuzz::write_input("last.safetensors", "");  // RunDir::open wants it to exist
    return fuzz::scratch_dir();
  }();
  fuzz::write_input("command.json", fuzz::as_text(data, size));
  cli::Args args;
  try {
    args = cli::RunDir::open(dir).read_command();
  } catch (const Error&) {
    return 0;
  }
  try {
    cli::TrainSettings s;
    cli::Flags flags("tapestry train [options]", "");
    s.declare(flags);
    if (flags.parse(args)) s.check(flags);
  } catch (const cli::UsageError&) {
  }
  return 0;
}
