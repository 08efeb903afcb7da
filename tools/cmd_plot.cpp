// tapestry plot: scores by source length from `tapestry eval --json` files, one line per model,
// drawn as an SVG line chart (the picture of Bahdanau et al. 2015, Figure 2).
#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>

#include "tapestry/core/errors.h"
#include "tapestry/core/file_io.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/report_html.h"
#include "tools/run_dir.h"
#include "tools/text_files.h"

namespace tapestry::cli {

namespace {

using json = nlohmann::json;

constexpr const char* kAbout =
    "Draws a score by source length from the JSON files `tapestry eval --json` writes, one line\n"
    "per file: BLEU (or exact match, or token accuracy) of each source-length bucket, placed at\n"
    "the bucket's mean source length. With one file per model (say, without attention, with\n"
    "attention and a Transformer) it is Figure 2 of Bahdanau et al. (2015). The output is a\n"
    "standalone SVG image.\n\n"
    "examples:\n"
    "  tapestry eval --model runs/none --json none.json\n"
    "  tapestry eval --model runs/bahdanau --json bahdanau.json\n"
    "  tapestry plot none.json bahdanau.json --names 'no attention,attention' --out lengths.svg";

// The colours of the lines, in order: blue, orange, green, red, purple, brown (Tableau 10).
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                   "#d62728", "#9467bd", "#8c564b"};

struct Metric {
  const char* key;    // in each bucket of eval's JSON
  const char* label;  // the y axis
  double scale;       // BLEU is 0..100 already; the fractions become percentages
};

Metric parse_metric(const std::string& name) {
  if (name == "bleu") return {"bleu", "BLEU", 1};
  if (name == "exact") return {"exact", "exact match (%)", 100};
  if (name == "token_acc") return {"token_acc", "token accuracy (%)", 100};
  throw UsageError{fmt::format("--metric '{}' is not one of bleu, exact, token_acc", name)};
}

// One line of the chart from one eval JSON file; every missing or mistyped key is named.
html::Series read_series(const std::string& path, const Metric& metric) {
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error(fmt::format("'{}': not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object() || !j.contains("by_length") || !j["by_length"].is_array())
    throw Error(
        fmt::format("'{}': no 'by_length' list (write the file with tapestry eval --json)", path));
  html::Series s;
  s.name = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : path;
  for (size_t i = 0; i < j["by_length"].size(); ++i) {
    const json& b = j["by_length"][i];
    for (const char* key : {"mean_source_length", metric.key})
      if (!b.is_object() || !b.contains(key) || !b[key].is_number())
        throw Error(fmt::format("'{}': by_length[{}] has no number '{}'{}", path, i, key,
                                std::string(key) == "mean_source_length"
                                    ? " (written by tapestry eval since it reports it)"
                                    : ""));
    s.x.push_back(b["mean_source_length"].get<double>());
    s.y.push_back(b[metric.key].get<double>() * metric.scale);
  }
  if (s.x.empty()) throw Error(fmt::format("'{}': 'by_length' is empty", path));
  return s;
}

}  // namespace

int cmd_plot(const Args& args) {
  std::vector<std::string> files;
  std::string out, names_text, metric_name = "bleu", title;
  Flags f("tapestry plot EVAL.json... --out FILE.svg [options]", kAbout);
  f.add_rest("EVAL.json", &files, "files written by tapestry eval --json, one line each");
  f.add("out", &out, "the SVG file to write (required)");
  f.add("metric", &metric_name, "bleu, exact or token_acc");
  f.add("names", &names_text, "the lines' names, comma-separated (default: each model's summary)");
  f.add("title", &title, "a title above the chart");
  if (!f.parse(args)) return 0;
  if (files.empty()) throw UsageError{"give at least one EVAL.json (from tapestry eval --json)"};
  if (out.empty()) throw UsageError{"--out is required (the SVG file to write)"};
  if (files.size() > std::size(kColors))
    throw UsageError{fmt::format("at most {} files can be drawn in one chart, not {}",
                                 std::size(kColors), files.size())};
  const Metric metric = parse_metric(metric_name);
  std::vector<std::string> names;
  if (!names_text.empty()) {
    names = split_commas(names_text);
    for (const auto& n : names)
      if (n.empty()) throw UsageError{"--names has an empty name (names are comma-separated)"};
    if (names.size() != files.size())
      throw UsageError{
          fmt::format("--names has {} names for {} files", names.size(), files.size())};
  }
  check_output_file("--out", out);

  std::vector<html::Series> series;
  for (size_t i = 0; i < files.size(); ++i) {
    series.push_back(read_series(files[i], metric));
    if (!names.empty()) series.back().name = names[i];
    series.back().color = kColors[i];
  }
  html::LineChartOptions o;
  o.frame.width = 640;
  o.frame.height = 380;
  o.frame.top = 34 + 20 * static_cast<int>(series.size() - 1) + (title.empty() ? 0 : 24);
  o.x_label = "source length (tokens, mean of the bucket)";
  o.y_label = metric.label;
  o.integer_x = true;
  o.y_from_zero = true;
  o.decimals = 2;
  o.legend_rows = true;
  o.legend_y = title.empty() ? 12 : 36;
  std::string svg = html::line_chart(series, o);
  // A file of its own: the SVG namespace (which the report's inline charts leave out: its pages
  // hold no address), a white background under the chart, and the title.
  std::string extra = "\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  if (!title.empty())
    extra += fmt::format(
        "<text x=\"{}\" y=\"16\" font-size=\"14\" font-weight=\"600\" fill=\"#222\">{}</text>\n",
        o.frame.left, html::escape(title));
  svg.replace(0, 4, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
  svg.insert(svg.find('>') + 1, extra);
  write_file_atomic(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svg);
  fmt::print("wrote {} ({} lines, {} by source length)\n", out, series.size(), metric.label);
  return 0;
}

}  // namespace tapestry::cli
