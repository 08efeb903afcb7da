// The metrics.jsonl reader of `tapestry report` (tools/report_read.cpp), for the fuzz targets and
// tests: it reads and checks the whole log as the report does.
#pragma once

#include <cstddef>
#include <string>

namespace tapestry::cli {

// How many epoch lines, step points (after a resumed epoch's repeats give way) and probes a
// metrics.jsonl holds. Throws Error as `tapestry report` does for a missing or malformed log,
// naming the file and line.
struct MetricsLogCounts {
  size_t epochs = 0, steps = 0, probes = 0;
};
MetricsLogCounts read_metrics_log_counts(const std::string& path);

}  // namespace tapestry::cli
