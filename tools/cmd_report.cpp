// tapestry report: one self-contained HTML page about a training run (configuration, curves,
// attention heatmaps of sample translations, BLEU by source length): the command, and the page
// around the sections (its style and footer). The run's files are read in tools/report_read.cpp,
// the sections built in tools/report_summary.cpp and tools/report_decoded.cpp.
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"
#include "tapestry/core/file_io.h"
#include "tapestry/models/saved_model.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/report_html.h"
#include "tools/report_page.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace fs = std::filesystem;
using html::escape;
using nlohmann::json;
using namespace report;

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
