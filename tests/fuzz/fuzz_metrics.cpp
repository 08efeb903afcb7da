// Fuzzes the metrics.jsonl reader of `tapestry report` (read_metrics, via tools/metrics_log.h).
#include "tapestry/core/errors.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/metrics_log.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("metrics.jsonl", fuzz::as_text(data, size));
  try {
    const cli::MetricsLogCounts n = cli::read_metrics_log_counts(path);
    if (n.epochs == 0) std::abort();  // read_metrics throws for a log without epochs
  } catch (const Error&) {
  }
  return 0;
}
