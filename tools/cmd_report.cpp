// tapestry report: one self-contained HTML page about a training run (configuration, curves,
// attention heatmaps of sample translations, BLEU by source length).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "tapestry/core/errors.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/metrics.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/text_input.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/metrics_log.h"
#include "tools/progress.h"
#include "tools/report_html.h"
#include "tools/report_transformer.h"
#include "tools/run_dir.h"
#include "tools/text_files.h"
#include "tools/train_setup.h"

namespace tapestry::cli {

namespace fs = std::filesystem;
using html::escape;
using nlohmann::json;

namespace {

constexpr const char* kAbout =
    "Writes one self-contained HTML page about a run of `tapestry train` (no scripts and nothing\n"
    "fetched from the network; it opens offline in any browser): the model and data, the test\n"
    "scores, the training and validation curves, attention heatmaps of sample test sentences\n"
    "(hover a cell for its weight) and BLEU by source length over the test split (decoded\n"
    "greedily).\n\n"
    "examples:\n"
    "  tapestry report --model runs/grammar\n"
    "  tapestry report --model runs/multi30k --samples 10 --beam 5 --max-sentences 500 \\\n"
    "      --out multi30k.html --title 'Multi30k, Bahdanau attention'";

constexpr int64_t kBatch = 64;
// Longer sources make heatmaps too small to read; samples prefer sentences up to this length.
constexpr size_t kSampleMaxLen = 20;
constexpr const char* kBlue = "#2f6fb0";
constexpr const char* kOrange = "#e07b24";
constexpr const char* kGreen = "#2e9a4c";
constexpr const char* kLightBlue = "#8fb4dc";

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

// The lines of a text file of the run, read and checked as every input is (models::read_lines).
std::vector<std::string> read_lines(const std::string& path) {
  return models::read_lines(path);
}

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
    t.src = m.preprocess.tokenize(src[i]);
    t.ref = m.preprocess.tokenize(ref[i]);
    if (t.src.empty())
      throw Error(
          fmt::format("{}:{}: empty source sentence (nothing to translate)", src_path, i + 1));
    if (t.ref.empty())
      throw Error(fmt::format("{}:{}: empty reference (BLEU needs one)", ref_path, i + 1));
    // The text as training scored it: detokenised tokens.
    t.src_text = m.preprocess.detokenize(t.src);
    t.ref_text = m.preprocess.detokenize(t.ref);
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

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_./=:,+-@%") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string command_line(const std::string& name, const Args& args) {
  std::string s = fmt::format("tapestry {}", name);
  for (const auto& a : args) s += fmt::format(" {}", shell_quote(a));
  return s;
}

// A definition list row; `value` is markup (escape text before passing it).
std::string row(const std::string& key, const std::string& value) {
  return fmt::format("<dt>{}</dt><dd>{}</dd>\n", escape(key), value);
}

std::string percent(double x, int decimals = 1) {
  return std::isfinite(x) ? fmt::format("{:.{}f}%", 100 * x, decimals) : "&ndash;";
}

std::string fixed(double x, int decimals) {
  return std::isfinite(x) ? fmt::format("{:.{}f}", x, decimals) : "&ndash;";
}

double number_or_nan(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return NAN;
  return j[key].get<double>();
}

constexpr const char* kCss = R"css(
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #1f2328; line-height: 1.45;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 32px; }
h1 { font-size: 1.6rem; margin: 0 0 2px; }
h2 { font-size: 1.2rem; margin: 34px 0 12px; padding-bottom: 5px; border-bottom: 1px solid #d8dee4; }
h3 { font-size: 1rem; margin: 0 0 6px; }
p { margin: 6px 0; }
.sub { color: #59636e; margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(260px, 1fr)); gap: 14px; }
.card, figure, .sample { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; }
.card { padding: 12px 16px; }
.card h3 { font-size: .78rem; text-transform: uppercase; letter-spacing: .06em; color: #59636e; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 0;
  font-size: .9rem; }
dl.kv dt { color: #59636e; }
dl.kv dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.charts { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
.probes { display: flex; flex-wrap: wrap; gap: 10px; align-items: flex-start; }
figure { margin: 0; padding: 10px 12px 6px; }
figcaption { font-weight: 600; font-size: .95rem; margin-bottom: 4px; }
svg { display: block; max-width: 100%; height: auto; }
svg rect.cell:hover { stroke: #f08c00; stroke-width: 2; }
svg rect.bar:hover { fill-opacity: .75; }
svg circle.point:hover { stroke: #1f2328; stroke-width: 2; }
table { border-collapse: collapse; background: #fff; font-size: .88rem;
  font-variant-numeric: tabular-nums; border: 1px solid #d8dee4; }
th, td { padding: 4px 11px; border-bottom: 1px solid #e6e9ed; text-align: right; }
th { background: #f0f2f5; font-weight: 600; }
td:first-child, th:first-child { text-align: left; }
tr.best td { background: #eef5ff; font-weight: 600; }
tr.total td { border-top: 2px solid #c9d1d9; font-weight: 600; }
details { margin-top: 12px; }
summary { cursor: pointer; color: #3b5e8c; margin-bottom: 8px; }
.samples { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
.sample { padding: 12px 14px; max-width: 100%; box-sizing: border-box; overflow-x: auto;
  border-left: 4px solid #cf222e; }
.sample.match { border-left-color: #1a7f37; }
.sample .meta { color: #59636e; font-weight: normal; font-size: .85rem; }
dl.texts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 10px;
  margin: 0 0 10px; font-size: .92rem; width: 500px; max-width: 100%; }
dl.texts dt { color: #59636e; }
dl.texts dd { margin: 0; overflow-wrap: anywhere; }
.ok { color: #1a7f37; font-weight: 600; }
.bad { color: #cf222e; font-weight: 600; }
.badge { display: inline-block; font-size: .75rem; font-weight: 600; padding: 0 7px;
  border-radius: 9px; white-space: nowrap; }
.badge.ok { background: #dafbe1; }
.badge.bad { background: #ffebe9; }
.note { color: #59636e; font-style: italic; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .86em;
  background: #eef0f3; padding: 1px 4px; border-radius: 4px; overflow-wrap: break-word; }
.cmd { margin-top: 12px; font-size: .9rem; color: #59636e; }
footer { margin-top: 40px; padding-top: 10px; border-top: 1px solid #d8dee4; color: #59636e;
  font-size: .85rem; }
footer ul { margin: 4px 0; padding-left: 20px; }
)css";

// Escaped, with a line-break opportunity after every '/' so long paths wrap at directories.
std::string escape_path(const std::string& path) {
  std::string out;
  for (char c : path) out += c == '/' ? std::string("/<wbr>") : escape(std::string_view(&c, 1));
  return out;
}

// The training flags of command.json with tapestry train's defaults filled in; nullopt when the
// file is absent or holds flags this version does not know.
std::optional<TrainSettings> train_settings(const json& command) {
  if (!command.is_array()) return std::nullopt;
  try {
    TrainSettings s;
    Flags f("", "");
    s.declare(f);
    if (f.parse(command.get<Args>())) return s;
  } catch (const UsageError&) {
  } catch (const json::exception&) {
  }
  return std::nullopt;
}

std::string data_card(const json& command, const std::optional<TrainSettings>& settings,
                      const RunFiles& run, const models::SavedModel& m, size_t test_sentences) {
  std::string rows;
  if (settings && !settings->task.empty()) {
    const TrainSettings& s = *settings;
    const bool sized = s.task == "copy" || s.task == "reverse" || s.task == "sort";
    rows += row("source", fmt::format("toy task <b>{}</b>{}", escape(s.task),
                                      sized ? fmt::format(", lengths {}&ndash;{}, {} symbols",
                                                          s.min_len, s.max_len, s.symbols)
                                            : ""));
    rows += row("pairs", fmt::format("{} train, {} valid, {} test (seed {})",
                                     format_count(static_cast<double>(s.train_size)),
                                     format_count(static_cast<double>(s.valid_size)),
                                     format_count(static_cast<double>(s.test_size)), s.seed));
  } else if (settings && !settings->data.empty()) {
    const TrainSettings& s = *settings;
    rows += row("source", fmt::format("<code>{}</code>{}{}", escape_path(s.data),
                                      s.reverse ? ", reversed" : "",
                                      s.tutorial ? ", PyTorch tutorial filter" : ""));
    rows += row("held out", fmt::format("{:g}% valid, {:g}% test (seed {})", 100 * s.valid_fraction,
                                        100 * s.test_fraction, s.seed));
  } else if (settings && !settings->train_prefix.empty()) {
    const TrainSettings& s = *settings;
    rows += row("train", fmt::format("<code>{}.{{{},{}}}</code>", escape_path(s.train_prefix),
                                     escape(s.src_lang), escape(s.tgt_lang)));
    rows += row("valid", fmt::format("<code>{}</code>", escape_path(s.valid_prefix)));
    rows += row("test", fmt::format("<code>{}</code>", escape_path(s.test_prefix)));
  } else {
    rows += row("source", command.is_null() ? fmt::format("<span class=\"note\">no {}</span>",
                                                          escape_path(run.file("command.json")))
                                            : "<span class=\"note\">flags not recognised</span>");
  }
  if (settings && settings->max_tokens > 0)
    rows += row("length limit", fmt::format("{} tokens per side", settings->max_tokens));
  rows += row("preprocessing", escape(m.preprocess.describe()));
  rows += row("vocabulary", fmt::format("{} source, {} target tokens",
                                        format_count(static_cast<double>(m.src.size())),
                                        format_count(static_cast<double>(m.tgt.size()))));
  rows += row("test split",
              fmt::format("{} sentences", format_count(static_cast<double>(test_sentences))));
  return fmt::format("<div class=\"card\"><h3>Data</h3><dl class=\"kv\">\n{}</dl></div>\n", rows);
}

std::string header(const ReportSettings& rs, const RunFiles& run, models::SavedModel& m,
                   const std::vector<Epoch>& epochs, const json& result, const json& command,
                   size_t test_sentences) {
  std::string s = fmt::format("<h1>{}</h1>\n<p class=\"sub\">run <code>{}</code></p>\n",
                              escape(rs.title), escape_path(run.dir));
  s += "<div class=\"cards\">\n";

  std::string model;
  model += row("model", escape(m.model->config().summary()));
  model += row("parameters", format_count(static_cast<double>(m.model->num_parameters())));
  const auto& md = m.metadata;
  if (md.count("epoch"))
    model += row("checkpoint",
                 fmt::format("best epoch {}{}", escape(md.at("epoch")),
                             md.count("valid_loss")
                                 ? fmt::format(" (valid loss {})",
                                               fixed(std::atof(md.at("valid_loss").c_str()), 4))
                                 : ""));
  const Epoch& last = epochs.back();
  model += row("epochs run", fmt::format("{:g}", last.get("epoch")));
  if (std::isfinite(last.get("step"))) model += row("steps", format_count(last.get("step")));
  double seconds = number_or_nan(result, "train_seconds");
  if (!std::isfinite(seconds)) seconds = last.get("elapsed_seconds");
  if (std::isfinite(seconds)) model += row("training time", format_duration(seconds));
  const std::optional<TrainSettings> settings = train_settings(command);
  if (settings)
    model += row(
        "training",
        escape(fmt::format(
            "batch {}, {} lr {:g}{}, clip {:g}, dropout {:g}, teacher forcing {:g}",
            settings->batch_size, settings->optimizer, settings->lr,
            settings->schedule == "none" ? "" : fmt::format(" ({} schedule)", settings->schedule),
            settings->clip, settings->dropout, settings->teacher_forcing)));
  s += fmt::format("<div class=\"card\"><h3>Model</h3><dl class=\"kv\">\n{}</dl></div>\n", model);

  s += data_card(command, settings, run, m, test_sentences);

  std::string scores;
  if (result.is_object()) {
    scores += row("test loss", fixed(number_or_nan(result, "test_loss"), 4));
    scores += row("perplexity", fixed(number_or_nan(result, "test_ppl"), 2));
    scores += row("greedy BLEU", fixed(number_or_nan(result, "greedy_bleu"), 2));
    scores += row("greedy exact match", percent(number_or_nan(result, "greedy_exact")));
    scores += row("greedy token accuracy", percent(number_or_nan(result, "greedy_token_acc")));
    const double beam = number_or_nan(result, "beam");
    if (std::isfinite(beam)) {
      scores +=
          row(fmt::format("beam {:g} BLEU", beam), fixed(number_or_nan(result, "beam_bleu"), 2));
      scores += row(fmt::format("beam {:g} exact match", beam),
                    percent(number_or_nan(result, "beam_exact")));
    }
    const double align = number_or_nan(result, "alignment_agreement");
    if (std::isfinite(align)) scores += row("attention = true alignment", percent(align));
  } else {
    scores = row("result.json",
                 "<span class=\"note\">missing: the run did not finish its test "
                 "evaluation</span>");
  }
  s += fmt::format(
      "<div class=\"card\"><h3>Test scores (best model)</h3><dl class=\"kv\">\n{}</dl></div>\n",
      scores);
  s += "</div>\n";
  if (command.is_array()) {
    Args flags;
    for (const auto& a : command) flags.push_back(a.is_string() ? a.get<std::string>() : a.dump());
    s += fmt::format("<p class=\"cmd\">Trained with <code>{}</code></p>\n",
                     escape(command_line("train", flags)));
  }
  return s;
}

std::string curves(const Metrics& metrics) {
  const std::vector<Epoch>& epochs = metrics.epochs;
  // Losses are logged every epoch (a missing value is a non-finite loss: a gap in the line);
  // scores only in epochs that decoded (`gaps` false: such epochs are left out).
  auto series = [&](const char* name, const char* key, const char* color, double scale, bool gaps) {
    html::Series s{name, color, {}, {}};
    for (const auto& e : epochs) {
      if (!gaps && !e.values.count(key)) continue;
      s.x.push_back(e.get("epoch"));
      s.y.push_back(e.get(key) * scale);
    }
    return s;
  };
  std::string s =
      "<h2>Training</h2>\n<p>The training loss is the mean over each epoch's batches (with "
      "dropout and teacher forcing as trained); the validation loss and scores are measured after "
      "the epoch. Hover a point for its value.";
  // The loss of single steps, as logged every --log-every steps, at its place within the epoch.
  html::Series steps{"train loss, single steps", kLightBlue, {}, {}, false};
  for (const auto& p : metrics.steps) {
    steps.x.push_back(p.epoch - 1 + (p.epoch_steps > 0 ? p.epoch_step / p.epoch_steps : 1));
    steps.y.push_back(p.loss);
  }
  if (!steps.x.empty())
    // An epoch's first line is written at step --log-every.
    s +=
        fmt::format(" The thin line is the loss of single training steps, logged every {:g} steps.",
                    metrics.steps.front().epoch_step);
  s += "</p>\n<div class=\"charts\">\n";
  html::LineChartOptions loss;
  loss.x_label = "epoch";
  loss.y_label = "cross-entropy per token";
  s += "<figure><figcaption>Loss</figcaption>\n";
  std::vector<html::Series> loss_series{series("train loss", "train_loss", kBlue, 1, true),
                                        series("valid loss", "valid_loss", kOrange, 1, true)};
  if (!steps.x.empty()) loss_series.insert(loss_series.begin(), steps);
  s += html::line_chart(loss_series, loss);
  s += "</figure>\n";
  const bool decoded = std::any_of(epochs.begin(), epochs.end(),
                                   [](const Epoch& e) { return e.values.count("valid_bleu") > 0; });
  if (decoded) {
    html::LineChartOptions scores;
    scores.x_label = "epoch";
    scores.y_label = "BLEU / percent";
    scores.y_from_zero = true;
    scores.decimals = 2;
    s += "<figure><figcaption>Validation scores (greedy)</figcaption>\n";
    s += html::line_chart({series("BLEU", "valid_bleu", kBlue, 1, false),
                           series("exact match %", "valid_exact", kOrange, 100, false),
                           series("token accuracy %", "valid_token_acc", kGreen, 100, false)},
                          scores);
    s += "</figure>\n";
  } else {
    s += "<p class=\"note\">No validation BLEU: the run decoded no validation sentences "
         "(--valid-decode 0).</p>\n";
  }
  s += "</div>\n";

  s +=
      fmt::format("<details{}><summary>Per-epoch log ({} epoch{})</summary>\n",
                  epochs.size() <= 30 ? " open" : "", epochs.size(), epochs.size() == 1 ? "" : "s");
  s += "<table>\n<tr><th>epoch</th><th>step</th><th>train loss</th><th>valid loss</th>"
       "<th>valid ppl</th>";
  if (decoded) s += "<th>BLEU</th><th>exact</th><th>token acc.</th>";
  s += "<th>lr</th><th>grad norm</th><th>tokens/s</th><th>epoch time</th><th>skipped</th>"
       "<th title=\"the validation loss improved: the model was saved\">best</th></tr>\n";
  for (const auto& e : epochs) {
    s += fmt::format("<tr{}><td>{:g}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                     e.best ? " class=\"best\"" : "", e.get("epoch"),
                     std::isfinite(e.get("step")) ? format_count(e.get("step")) : "&ndash;",
                     fixed(e.get("train_loss"), 4), fixed(e.get("valid_loss"), 4),
                     fixed(e.get("valid_ppl"), 2));
    if (decoded)
      s += fmt::format("<td>{}</td><td>{}</td><td>{}</td>", fixed(e.get("valid_bleu"), 2),
                       percent(e.get("valid_exact")), percent(e.get("valid_token_acc")));
    const double lr = e.get("lr");
    s += fmt::format(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        std::isfinite(lr) ? fmt::format("{:.3g}", lr) : "&ndash;", fixed(e.get("grad_norm"), 3),
        std::isfinite(e.get("tokens_per_s")) ? format_count(e.get("tokens_per_s")) : "&ndash;",
        std::isfinite(e.get("epoch_seconds")) ? format_duration(e.get("epoch_seconds")) : "&ndash;",
        fixed(e.get("skipped_steps"), 0), e.best ? "&#9733;" : "");
  }
  return s + "</table>\n</details>\n";
}

// The probe sentence's attention over training: up to 8 epochs, evenly spread, first and last.
std::string probe_section(const std::vector<Probe>& probes) {
  if (probes.empty()) return "";
  std::vector<size_t> shown;
  const size_t n = probes.size(), k = std::min<size_t>(n, 8);
  for (size_t i = 0; i < k; ++i) {
    const size_t at = k == 1 ? n - 1 : i * (n - 1) / (k - 1);
    if (shown.empty() || shown.back() != at) shown.push_back(at);
  }
  const Probe& last = probes.back();
  std::string src;
  for (const auto& w : last.source) src += (src.empty() ? "" : " ") + w;
  std::string s = fmt::format(
      "<h2>Attention over training</h2>\n<p>The first validation sentence, <i>{}</i>, read with "
      "its reference at the end of {} (as Joey NMT keeps it): how the attention sharpens as the "
      "model learns.{}</p>\n<div class=\"probes\">\n",
      escape(src),
      n == shown.size() ? "every epoch" : fmt::format("{} of the {} epochs", shown.size(), n),
      last.align.empty() ? "" : " The orange outlines are the true alignment.");
  for (size_t i : shown) {
    const Probe& p = probes[i];
    html::HeatmapOptions o;
    o.cell = 14;
    if (!p.align.empty()) {
      o.outline = p.align;
      o.outline.push_back(-1);  // the <eos> row
    }
    s += fmt::format("<figure><figcaption>epoch {:g}</figcaption>\n{}</figure>\n", p.epoch,
                     html::heatmap(p.source, p.target, p.weights, o));
  }
  return s + "</div>\n";
}

// The first n sentences with at most kSampleMaxLen source tokens, then the earliest others if
// there are too few, in test order.
std::vector<size_t> pick_samples(const std::vector<TestSentence>& test, size_t n) {
  std::vector<size_t> picked;
  for (size_t i = 0; i < test.size() && picked.size() < n; ++i)
    if (test[i].src.size() <= kSampleMaxLen) picked.push_back(i);
  for (size_t i = 0; i < test.size() && picked.size() < n; ++i)
    if (test[i].src.size() > kSampleMaxLen) picked.push_back(i);
  std::sort(picked.begin(), picked.end());
  return picked;
}

std::string samples_section(const ReportSettings& rs, models::SavedModel& m,
                            const std::vector<TestSentence>& test) {
  if (rs.samples == 0)
    return "<h2>Sample translations</h2>\n<p class=\"note\">None (--samples 0).</p>\n";
  const std::vector<size_t> picked = pick_samples(test, static_cast<size_t>(rs.samples));
  const auto is_long = [&](size_t i) { return test[i].src.size() > kSampleMaxLen; };
  const auto is_unknown = [&](size_t i) {
    return std::count(test[i].ids.src.begin(), test[i].ids.src.end(), models::Vocab::kUnk) > 0;
  };
  const bool some_long = std::any_of(picked.begin(), picked.end(), is_long);
  std::string s = fmt::format(
      "<h2>Sample translations</h2>\n<p>{} test sentence{}, {}, decoded {}. ", picked.size(),
      picked.size() == 1 ? "" : "s",
      some_long ? fmt::format("the first with at most {} source tokens and then the first longer "
                              "ones (too few are that short)",
                              kSampleMaxLen)
                : fmt::format("the first with at most {} source tokens", kSampleMaxLen),
      rs.beam > 1 ? fmt::format("with beam search (k = {})", rs.beam) : std::string("greedily"));
  const bool attention = m.model->config().attention != nn::AttentionKind::none;
  if (attention) {
    s += "Each heatmap shows the attention weights: one row per output token (and the final "
         "&lt;eos&gt;), one column per source token; darker is more weight. Hover a cell for "
         "its value.";
    if (std::any_of(picked.begin(), picked.end(), is_unknown))
      s += " A * marks a source word outside the model's vocabulary (read as &lt;unk&gt;).";
    s += "</p>\n";
  } else {
    s += "</p>\n<p class=\"note\">This model has no attention (--attention none): the decoder "
         "reads only the encoder's final state, so there is no alignment to draw.</p>\n";
  }
  if (picked.empty()) return s;

  std::vector<models::EncodedPair> pairs;
  for (size_t i : picked) pairs.push_back(test[i].ids);
  models::DecodeOptions opts;
  opts.beam = rs.beam;
  const auto hyps = models::translate(*m.model, pairs, kBatch, opts);

  s += "<div class=\"samples\">\n";
  for (size_t k = 0; k < picked.size(); ++k) {
    const TestSentence& t = test[picked[k]];
    const models::Hypothesis& h = hyps[k][0];
    const bool match = h.tokens == t.ids.tgt;
    const std::string output = m.preprocess.detokenize(m.tgt.decode(h.tokens));
    s += fmt::format(
        "<div class=\"sample{}\">\n<h3>Test sentence {} <span class=\"meta\">"
        "({} source tokens, {} output tokens, log p {:.2f})</span></h3>\n",
        match ? " match" : "", picked[k] + 1, t.src.size(), h.tokens.size(), h.log_prob);
    s += "<dl class=\"texts\">";
    s += row("source", escape(t.src_text));
    s += row("reference", escape(t.ref_text));
    s += row("output", fmt::format("<span class=\"{0}\">{1}</span> <span class=\"badge {0}\">{2}"
                                   "</span>",
                                   match ? "ok" : "bad", escape(output),
                                   match ? "&#10003; matches the reference"
                                         : "&#10007; differs from the reference"));
    s += "</dl>\n";
    if (!h.finished)
      s += "<p class=\"note\">Stopped at the maximum length without producing &lt;eos&gt;.</p>\n";
    if (attention) {
      std::vector<std::string> cols, rows;
      for (size_t j = 0; j < t.src.size(); ++j)
        cols.push_back(t.ids.src[j] == models::Vocab::kUnk && t.src[j] != "<unk>" ? t.src[j] + "*"
                                                                                  : t.src[j]);
      for (int32_t id : h.tokens) rows.push_back(m.tgt.token(id));
      if (h.finished) rows.push_back("<eos>");
      const size_t expected = rows.size() * cols.size();
      if (h.attention.size() == expected && !rows.empty()) {
        // The true alignment outlined where the output is the reference (rows are its tokens),
        // and how many rows' largest weight falls on it.
        html::HeatmapOptions ho;
        if (!t.align.empty() && match) {
          ho.outline = t.align;
          size_t known = 0, hit = 0;
          for (size_t r = 0; r < t.align.size(); ++r) {
            if (t.align[r] < 0) continue;
            ++known;
            const auto row = h.attention.begin() + static_cast<long>(r * cols.size());
            hit += std::max_element(row, row + static_cast<long>(cols.size())) - row == t.align[r];
          }
          s += fmt::format(
              "<p class=\"note\">The orange outlines mark the true alignment: the row's largest "
              "weight falls on it for {} of {} tokens.</p>\n",
              hit, known);
        } else if (!t.align.empty()) {
          s += "<p class=\"note\">The output differs from the reference, whose tokens the true "
               "alignment describes: no outlines.</p>\n";
        }
        s += html::heatmap(cols, rows, h.attention, ho);
      } else {
        s += fmt::format(
            "<p class=\"note\">No attention matrix to draw ({} weights for {} x {} "
            "tokens).</p>\n",
            h.attention.size(), rows.size(), cols.size());
      }
    }
    s += "</div>\n";
  }
  return s + "</div>\n";
}

// A Transformer's every head, on the probe sentence (with its reference), or with no probe on
// the first sample test sentence.
std::string heads_section(models::SavedModel& m, const std::vector<Probe>& probes,
                          const std::vector<TestSentence>& test) {
  if (!m.model->is_transformer()) return "";
  if (!probes.empty()) {
    std::vector<std::string> target = probes.back().target;
    if (!target.empty() && target.back() == "<eos>") target.pop_back();
    return transformer_heads_section(m, probes.back().source, target,
                                     "The first validation sentence");
  }
  const std::vector<size_t> picked = pick_samples(test, 1);
  if (picked.empty()) return "";
  const TestSentence& t = test[picked.front()];
  return transformer_heads_section(m, t.src, m.tgt.decode(t.ids.tgt),
                                   fmt::format("Test sentence {}", picked.front() + 1));
}

std::string buckets_section(const ReportSettings& rs, models::SavedModel& m,
                            const std::vector<TestSentence>& test) {
  size_t n = test.size();
  if (rs.max_sentences > 0) n = std::min(n, static_cast<size_t>(rs.max_sentences));
  std::vector<models::EncodedPair> pairs;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < n; ++i) {
    pairs.push_back(test[i].ids);
    lengths.push_back(static_cast<int64_t>(test[i].src.size()));
  }
  const auto hyps = models::translate(*m.model, pairs, kBatch, models::DecodeOptions{});

  // Bucket bounds from the 2nd to the 98th percentile of the lengths, so that a few outliers
  // join the first and last buckets instead of getting near-empty buckets of their own.
  std::sort(lengths.begin(), lengths.end());
  const int64_t lo = lengths.front(), hi = lengths.back();
  auto percentile = [&](double q) {
    return lengths[static_cast<size_t>(q * static_cast<double>(lengths.size() - 1))];
  };
  const models::LengthBuckets buckets(
      html::length_bucket_bounds(percentile(0.02), percentile(0.98)));
  std::vector<models::BleuStats> stats(buckets.size());
  std::vector<models::MatchCounts> match(buckets.size());
  models::BleuStats all_stats;
  models::MatchCounts all_match;
  for (size_t i = 0; i < n; ++i) {
    const size_t b = buckets.bucket(static_cast<int64_t>(test[i].src.size()));
    const std::string out = m.preprocess.detokenize(m.tgt.decode(hyps[i][0].tokens));
    const models::BleuStats st = models::segment_bleu_stats(out, {test[i].ref_text});
    stats[b] += st;
    all_stats += st;
    match[b].add(hyps[i][0].tokens, test[i].ids.tgt);
    all_match.add(hyps[i][0].tokens, test[i].ids.tgt);
  }
  // Labels from the lengths that occur: the first bucket starts at the shortest source, the last
  // (open-ended) one ends at the longest.
  auto label = [&](size_t b) {
    const int64_t first = b == 0 ? lo : buckets.upper[b - 1] + 1;
    const int64_t last = b + 1 == buckets.size() ? hi : buckets.upper[b];
    return first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
  };

  std::vector<html::Bar> bars;
  std::string table =
      "<table>\n<tr><th>source length</th><th>sentences</th><th>BLEU</th><th>exact match</th>"
      "<th>token accuracy</th></tr>\n";
  for (size_t b = 0; b < buckets.size(); ++b) {
    const bool empty = match[b].sentences == 0;
    const double bleu = empty ? NAN : models::bleu_from_stats(stats[b]).score;
    bars.push_back({label(b), bleu,
                    empty
                        ? fmt::format("lengths {}: no sentences", label(b))
                        : fmt::format("lengths {}: BLEU {:.2f} over {} sentence{}", label(b), bleu,
                                      match[b].sentences, match[b].sentences == 1 ? "" : "s"),
                    fmt::format("n = {}", match[b].sentences)});
    table += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                         label(b), match[b].sentences, fixed(bleu, 2),
                         empty ? "&ndash;" : percent(match[b].exact_match()),
                         empty ? "&ndash;" : percent(match[b].token_accuracy()));
  }
  table += fmt::format(
      "<tr class=\"total\"><td>all</td><td>{}</td><td>{:.2f}</td><td>{}</td><td>{}</td></tr>\n"
      "</table>\n",
      all_match.sentences, models::bleu_from_stats(all_stats).score,
      percent(all_match.exact_match()), percent(all_match.token_accuracy()));

  html::BarChartOptions bo;
  bo.frame.width = std::clamp(120 + 55 * static_cast<int>(bars.size()), 380, 560);
  bo.frame.bottom = 60;
  bo.x_label = "source length (tokens)";
  bo.y_label = "corpus BLEU";
  std::string s = fmt::format(
      "<h2>BLEU by source length</h2>\n<p>{} test sentence{}{} decoded greedily, grouped by "
      "source length; BLEU is corpus BLEU (sacreBLEU's default: 13a tokens, exp smoothing) within "
      "each group.</p>\n",
      n, n == 1 ? "" : "s",
      n < test.size() ? fmt::format(" (the first {} of {}, --max-sentences)", n, test.size()) : "");
  s += "<div class=\"charts\">\n<figure><figcaption>BLEU per source-length bucket</figcaption>\n";
  s += html::bar_chart(bars, bo);
  s += "</figure>\n<div>" + table + "</div>\n</div>\n";
  return s;
}

std::string footer(const Args& args, const RunFiles& run, const std::string& out, double seconds) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  auto path = [](const std::string& p) {
    std::error_code ec;
    const fs::path abs = fs::absolute(p, ec);
    return fmt::format("<code>{}</code>", escape(ec ? p : abs.string()));
  };
  std::string files;
  std::error_code ec;
  for (const char* f : {"model.safetensors", "metrics.jsonl", "result.json", "command.json",
                        "test.src", "test.ref"})
    if (fs::exists(run.file(f), ec)) files += fmt::format("<li>{}</li>", path(run.file(f)));
  return fmt::format(
      "<footer>\n<p>Generated {} in {} by <code>{}</code>.</p>\n<p>Read:</p><ul>{}</ul>\n"
      "<p>Written: {}</p>\n</footer>\n",
      when, fmt::format("{:.1f} s", seconds), escape(command_line("report", args)), files,
      path(out));
}

}  // namespace

MetricsLogCounts read_metrics_log_counts(const std::string& path) {
  const Metrics m = read_metrics(path);
  return {m.epochs.size(), m.steps.size(), m.probes.size()};
}

int cmd_report(const Args& args) {
  ReportSettings rs;
  Flags flags("tapestry report --model DIR [options]", kAbout);
  flags.add("model", &rs.model_dir, "run directory written by tapestry train (required)");
  flags.add("out", &rs.out, "the HTML file to write (default DIR/report.html)");
  flags.add("title", &rs.title, "the page's title (default: the run directory's name)");
  flags.add("samples", &rs.samples, "test sentences shown with their attention heatmaps", 0, 1000);
  flags.add("beam", &rs.beam, "beam width for the sample translations (1: greedy)", 1, 100);
  flags.add("max-sentences", &rs.max_sentences,
            "test sentences decoded for BLEU by length (0: all)", 0, INT32_MAX);
  if (!flags.parse(args)) return 0;
  if (rs.model_dir.empty()) throw UsageError{"--model DIR is required (a run of tapestry train)"};
  if (!rs.out.empty()) check_output_file("--out", rs.out);
  const auto start = std::chrono::steady_clock::now();

  std::error_code ec;
  if (!fs::exists(rs.model_dir, ec))
    throw Error(fmt::format("run directory '{}' does not exist", rs.model_dir));
  if (!fs::is_directory(rs.model_dir, ec))
    throw Error(
        fmt::format("'{}' is not a directory (--model takes a run directory)", rs.model_dir));
  std::string dir = rs.model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const RunFiles run{dir};
  if (!fs::exists(run.model_path(), ec))
    throw Error(
        fmt::format("'{}' is missing: not a training run, or no epoch finished", run.model_path()));
  models::SavedModel model = models::load_model(run.model_path());
  const Metrics metrics = read_metrics(run.file("metrics.jsonl"));
  const std::vector<Epoch>& epochs = metrics.epochs;
  const std::vector<TestSentence> test = read_test_split(run, model);
  const json result = read_optional_json(run.file("result.json"));
  const json command = read_optional_json(run.file("command.json"));
  if (rs.out.empty()) rs.out = run.file("report.html");
  if (rs.title.empty())
    rs.title = fmt::format("Tapestry run {}", fs::path(dir).filename().string());

  std::string body = header(rs, run, model, epochs, result, command, test.size());
  body += curves(metrics);
  body += probe_section(metrics.probes);
  body += heads_section(model, metrics.probes, test);
  body += samples_section(rs, model, test);
  body += buckets_section(rs, model, test);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  body += footer(args, run, rs.out, seconds);

  const std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n{}</main>\n</body>\n"
      "</html>\n",
      escape(rs.title), kCss, body);
  write_file_atomic(rs.out, page);
  fmt::print("{}\n", rs.out);
  return 0;
}

}  // namespace tapestry::cli
