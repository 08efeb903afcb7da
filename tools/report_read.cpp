// The run's files as `tapestry report` reads them: metrics.jsonl (epochs, logged steps, probe
// attention), the test split with its true alignment, and the optional JSON files.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tapestry/core/errors.h"
#include "tapestry/models/text_input.h"
#include "tools/metrics_log.h"
#include "tools/report_page.h"
#include "tools/run_dir.h"

namespace tapestry::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace report {
namespace {

// The lines of a text file of the run, read and checked as every input is (models::read_lines).
std::vector<std::string> read_lines(const std::string& path) {
  return models::read_lines(path);
}

Probe read_probe(const json& j, double epoch, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("{}: 'probe' {}", where, why));
  };
  if (!j.is_object()) throw bad("is not an object");
  Probe p;
  p.epoch = epoch;
  try {
    p.source = j.at("source").get<std::vector<std::string>>();
    p.target = j.at("target").get<std::vector<std::string>>();
    for (const auto& row : j.at("weights")) {
      auto r = row.get<std::vector<float>>();
      if (r.size() != p.source.size()) throw bad("has a row of another length than its source");
      p.weights.insert(p.weights.end(), r.begin(), r.end());
    }
    if (j.contains("align")) {
      // nlohmann converts a number outside int32 unchecked (a double: undefined behaviour).
      if (j.at("align").is_array())
        for (const auto& a : j.at("align"))
          if (!a.is_number_integer() || a < INT32_MIN || a > INT32_MAX)
            throw bad(fmt::format("has an alignment {} that is not a position", a.dump()));
      p.align = j.at("align").get<std::vector<int32_t>>();
    }
  } catch (const json::exception& e) {
    throw bad(fmt::format("is malformed: {}", e.what()));
  }
  if (p.source.empty() || p.weights.size() != p.source.size() * p.target.size())
    throw bad("has no weights for its source and target");
  for (float w : p.weights)
    if (!(w >= 0 && w <= 1)) throw bad(fmt::format("has a weight of {}, outside [0, 1]", w));
  return p;
}

// What a metrics.jsonl number may be, by key.
struct Range {
  double lo, hi;
  bool whole = false;
};
Range range_of(const std::string& key) {
  constexpr double kBig = 1e15;
  if (key == "epoch") return {1, 1e6, true};
  if (key == "step" || key == "epoch_step" || key == "epoch_steps" || key == "skipped_steps")
    return {0, kBig, true};
  // A score at its top may be a rounding above it (BLEU 100.00000000000004).
  if (key == "valid_bleu") return {0, 100 + 1e-9};
  if (key == "valid_exact" || key == "valid_token_acc") return {0, 1 + 1e-12};
  if (key == "train_loss" || key == "valid_loss" || key == "valid_ppl" || key == "loss" ||
      key == "lr" || key == "grad_norm" || key == "tokens_per_s" || key == "epoch_seconds" ||
      key == "elapsed_seconds")
    return {0, kBig};
  return {-kBig, kBig};
}

}  // namespace

Metrics read_metrics(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(
        fmt::format("'{}' is missing: the run has no metrics log (did an epoch finish?)", path));
  // A line without its newline at the end may be one a crash cut short (the log is appended a
  // line at a time, and a cut can fall inside a UTF-8 character): resuming the run cuts it, and
  // until then it is skipped if it does not parse. The rest is read as every text is.
  std::string text = read_file(path);
  const size_t cut = text.rfind('\n') + 1;  // 0 when there is no newline at all
  std::string partial = text.substr(cut);
  text.resize(cut);
  models::LineSplitter splitter(path);
  splitter.feed(text);
  std::vector<std::string> lines = splitter.finish();
  const bool partial_last = partial.find_first_not_of(" \t\r") != std::string::npos;
  if (partial_last) lines.push_back(std::move(partial));
  Metrics out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, i + 1);
    json j;
    try {
      j = json::parse(lines[i]);
    } catch (const json::exception& e) {
      if (partial_last && i + 1 == lines.size()) {
        fmt::print(stderr,
                   "tapestry report: warning: {}: a partial last line (the run was interrupted "
                   "while writing it), skipped\n",
                   where);
        break;
      }
      throw Error(fmt::format("{}: not valid JSON: {}", where, e.what()));
    }
    if (!j.is_object()) throw Error(fmt::format("{}: not a JSON object", where));
    // Every number within what a run can write, so the charts' arithmetic stays finite: counts
    // are whole numbers, scores fit their scale, and nothing is beyond 1e15 in size.
    auto checked = [&](const std::string& key, double x) {
      const Range r = range_of(key);
      const bool whole = !r.whole || x == std::floor(x);
      if (!(x >= r.lo && x <= r.hi) || !whole)
        throw Error(fmt::format("{}: '{}' is {}, out of range (a{} number in [{:g}, {:g}])", where,
                                key, x, r.whole ? " whole" : "", r.lo, r.hi));
      return x;
    };
    auto number = [&](const char* key) -> double {
      if (!j.contains(key)) throw Error(fmt::format("{}: no '{}'", where, key));
      const json& v = j[key];
      if (v.is_null()) return NAN;  // JSON writes NaN and infinities as null
      if (!v.is_number())
        throw Error(fmt::format("{}: '{}' is {}, not a number", where, key, v.dump()));
      return checked(key, v.get<double>());
    };
    if (j.contains("kind")) {
      if (j["kind"] != "step")
        throw Error(fmt::format("{}: unknown kind {} (valid: \"step\")", where, j["kind"].dump()));
      StepPoint p{number("epoch"), number("step"), number("epoch_step"), number("epoch_steps"),
                  number("loss")};
      if (std::isnan(p.epoch) || std::isnan(p.step))
        throw Error(fmt::format("{}: a step line needs its 'epoch' and 'step'", where));
      // A resumed run logs the steps of its interrupted epoch again: the later lines win.
      while (!out.steps.empty() && out.steps.back().step >= p.step) out.steps.pop_back();
      out.steps.push_back(p);
      continue;
    }
    Epoch ep;
    for (const auto& [key, v] : j.items()) {
      if (key == "best") {
        if (!v.is_boolean())
          throw Error(fmt::format("{}: 'best' is {}, not true or false", where, v.dump()));
        ep.best = v.get<bool>();
      } else if (key == "probe") {
        continue;  // read below, once the epoch is known
      } else if (v.is_number()) {
        ep.values[key] = checked(key, v.get<double>());
      } else if (!v.is_null()) {  // JSON writes NaN and infinities as null
        throw Error(fmt::format("{}: '{}' is {}, not a number", where, key, v.dump()));
      }
    }
    for (const char* key : {"epoch", "train_loss", "valid_loss"})
      if (!j.contains(key)) throw Error(fmt::format("{}: no '{}'", where, key));
    if (!std::isfinite(ep.get("epoch")))
      throw Error(fmt::format("{}: 'epoch' is not a number", where));
    // A run resumed before its saves were transactions logged the interrupted epoch again: the
    // later line wins, as for the steps.
    while (!out.epochs.empty() && out.epochs.back().get("epoch") >= ep.get("epoch")) {
      if (!out.probes.empty() && out.probes.back().epoch == out.epochs.back().get("epoch"))
        out.probes.pop_back();
      out.epochs.pop_back();
    }
    if (j.contains("probe")) out.probes.push_back(read_probe(j["probe"], ep.get("epoch"), where));
    out.epochs.push_back(std::move(ep));
  }
  if (out.epochs.empty()) throw Error(fmt::format("'{}' holds no epochs", path));
  return out;
}

std::vector<TestSentence> read_test_split(const RunFiles& run, const models::SavedModel& m) {
  const std::string src_path = run.file("test.src"), ref_path = run.file("test.ref");
  std::error_code ec;
  for (const auto& p : {src_path, ref_path})
    if (!fs::exists(p, ec))
      throw Error(fmt::format("'{}' is missing: the run's test split is needed to decode", p));
  const auto src = read_lines(src_path), ref = read_lines(ref_path);
  if (src.size() != ref.size())
    throw Error(fmt::format("'{}' has {} lines but '{}' has {}: one line per test sentence",
                            src_path, src.size(), ref_path, ref.size()));
  if (src.empty()) throw Error(fmt::format("'{}' is empty: no test sentences", src_path));
  std::vector<TestSentence> out(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    TestSentence& t = out[i];
    t.src = m.preprocess.tokenize_source(src[i]);
    t.ref = m.preprocess.tokenize_target(ref[i]);
    if (t.src.empty())
      throw Error(
          fmt::format("{}:{}: empty source sentence (nothing to translate)", src_path, i + 1));
    if (t.ref.empty())
      throw Error(fmt::format("{}:{}: empty reference (BLEU needs one)", ref_path, i + 1));
    // The text as training scored it: detokenised tokens.
    t.src_text = m.preprocess.detokenize_source(t.src);
    t.ref_text = m.preprocess.detokenize_target(t.ref);
    t.ids.src = m.src.encode(t.src);
    t.ids.tgt = m.tgt.encode(t.ref);
  }
  // The true alignment, on the toy tasks that know it: a line of source positions per sentence.
  const std::string align_path = run.file("test.align");
  if (fs::exists(align_path, ec)) {
    const auto lines = read_lines(align_path);
    if (lines.size() != out.size())
      throw Error(fmt::format("'{}' has {} lines but '{}' has {}: one line per test sentence",
                              align_path, lines.size(), src_path, out.size()));
    for (size_t i = 0; i < lines.size(); ++i) {
      std::istringstream in(lines[i]);
      for (std::string item; in >> item;) {
        int32_t j = 0;
        auto [ptr, err] = std::from_chars(item.data(), item.data() + item.size(), j);
        if (err != std::errc() || ptr != item.data() + item.size() || j < -1 ||
            j >= static_cast<int32_t>(out[i].src.size()))
          throw Error(fmt::format("{}:{}: '{}' is not a source position (-1 to {})", align_path,
                                  i + 1, item, out[i].src.size() - 1));
        out[i].align.push_back(j);
      }
      if (out[i].align.size() != out[i].ref.size())
        throw Error(fmt::format("{}:{}: {} positions for {} reference tokens", align_path, i + 1,
                                out[i].align.size(), out[i].ref.size()));
    }
  }
  return out;
}

// An optional JSON file of the run: null when absent; throws naming the file when it is malformed.
json read_optional_json(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return nullptr;
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error(fmt::format("'{}': not valid JSON: {}", path, e.what()));
  }
}

}  // namespace report

using namespace report;

MetricsLogCounts read_metrics_log_counts(const std::string& path) {
  const Metrics m = read_metrics(path);
  return {m.epochs.size(), m.steps.size(), m.probes.size()};
}

}  // namespace tapestry::cli
