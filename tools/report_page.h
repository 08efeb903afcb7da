// What the pieces of `tapestry report` share: the run's files as read (tools/report_read.cpp) and
// the page's sections (tools/report_summary.cpp, tools/report_decoded.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tapestry/models/batch.h"
#include "tapestry/models/saved_model.h"
#include "tools/cli.h"

namespace tapestry::cli::report {

struct ReportSettings {
  std::string model_dir, out, title;
  int64_t samples = 6, beam = 1, max_sentences = 0;
};

// One metrics.jsonl line: the numbers by key (NaN where missing or null, e.g. a diverged loss).
struct Epoch {
  std::map<std::string, double> values;
  bool best = false;
  double get(const std::string& key) const {
    auto it = values.find(key);
    return it == values.end() ? NAN : it->second;
  }
};

// The files of a run directory as tools/run_dir.h lays them out (read only: RunDir::open wants
// the resumable state, which a report does not need).
struct RunFiles {
  std::string dir;
  std::string file(const char* name) const { return dir + "/" + name; }
  std::string model_path() const { return file("model.safetensors"); }
};

struct TestSentence {
  std::string src_text, ref_text;
  std::vector<std::string> src, ref;  // tokens
  models::EncodedPair ids;
  std::vector<int32_t> align;  // the true alignment of each reference token (test.align), or empty
};

// The training loss logged every --log-every steps.
struct StepPoint {
  double epoch = 0, step = 0, epoch_step = 0, epoch_steps = 0, loss = NAN;
};

// A probe sentence's attention at the end of an epoch (reading its reference).
struct Probe {
  double epoch = 0;
  std::vector<std::string> source, target;
  std::vector<float> weights;  // target x source, row-major
  std::vector<int32_t> align;  // the true alignment, if known
};

struct Metrics {
  std::vector<Epoch> epochs;
  std::vector<StepPoint> steps;
  std::vector<Probe> probes;
};

// ---- reading the run (tools/report_read.cpp) ----------------------------------------------------

// metrics.jsonl, checked line by line; throws Error naming the file and line.
Metrics read_metrics(const std::string& path);
// test.src and test.ref tokenised and encoded for `m`, with test.align when the run has it.
std::vector<TestSentence> read_test_split(const RunFiles& run, const models::SavedModel& m);
// An optional JSON file of the run: null when absent.
nlohmann::json read_optional_json(const std::string& path);

// ---- markup and the sections from the run's files (tools/report_summary.cpp) --------------------

// `tapestry NAME ARGS...` as a shell would take it (arguments quoted where needed).
std::string command_line(const std::string& name, const Args& args);
// A definition list row; `value` is markup.
std::string row(const std::string& key, const std::string& value);
// A fraction as a percentage, and a number with `decimals` decimals; "&ndash;" when not finite.
std::string percent(double x, int decimals = 1);
std::string fixed(double x, int decimals);

// The title and the cards: model, data and test scores.
std::string header(const ReportSettings& rs, const RunFiles& run, models::SavedModel& m,
                   const std::vector<Epoch>& epochs, const nlohmann::json& result,
                   const nlohmann::json& command, size_t test_sentences);
// The loss and validation curves and the per-epoch table.
std::string curves(const Metrics& metrics);
// The probe sentence's attention over training (empty without probes).
std::string probe_section(const std::vector<Probe>& probes);

// ---- the sections that decode the test split (tools/report_decoded.cpp) -------------------------

std::string samples_section(const ReportSettings& rs, models::SavedModel& m,
                            const std::vector<TestSentence>& test);
std::string heads_section(models::SavedModel& m, const std::vector<Probe>& probes,
                          const std::vector<TestSentence>& test);
std::string buckets_section(const ReportSettings& rs, models::SavedModel& m,
                            const std::vector<TestSentence>& test);

}  // namespace tapestry::cli::report
