// The building blocks of `tapestry report`'s page: HTML escaping, and inline SVG line charts,
// attention heatmaps and bar charts, each a plain function returning markup (no scripts, no
// external references, so the page opens offline).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::cli::html {

// Escapes & < > " ' for text and attribute values; every other byte (UTF-8 included) is kept.
std::string escape(std::string_view text);

// The number of UTF-8 code points in `text` (bytes that do not start one are not counted).
size_t utf8_length(std::string_view text);
// `text` cut to at most `max` code points, with "…" as the last one when it was longer.
std::string utf8_truncate(std::string_view text, size_t max);

// Round tick values covering [lo, hi] in steps of 1, 2 or 5 times a power of ten, about `target`
// of them; the first is <= lo and the last >= hi. With `integer`, steps are at least 1.
std::vector<double> nice_ticks(double lo, double hi, int target, bool integer = false);

// The fill colour of a weight: 0 white, 1 dark blue (#08306b), linear in between in sRGB; weights
// outside [0, 1] are clamped.
std::string shade(double weight);

// The plotting area of a chart: the SVG is width x height pixels and the data live inside the
// margins; axis labels, ticks and the legend go into the margins.
struct ChartFrame {
  int width = 520, height = 300;
  int left = 64, right = 20, top = 34, bottom = 48;
};

struct Series {
  std::string name;
  std::string color;         // CSS colour of the line and its points
  std::vector<double> x, y;  // as many of each; a non-finite y leaves a gap in the line
  bool points = true;        // a circle (with its value on hover) at each value; else a thin line
};

struct LineChartOptions {
  ChartFrame frame;
  std::string x_label, y_label;  // axis titles; x_label also names x in the tooltips
  bool integer_x = true;         // x ticks at whole numbers (epochs)
  bool y_from_zero = false;      // the y axis starts at 0 (scores) instead of near the minimum
  int decimals = 4;              // of the values in the tooltips
  // The legend along the top margin at height legend_y: side by side, or one name per row, 20
  // pixels apart (long names; the frame's top margin must leave room for them).
  bool legend_rows = false;
  int legend_y = 12;
};

// Lines with a point per value. The x axis spans the data's x range exactly; the y axis is
// widened to round ticks. Every point carries a <title> "name, x_label x: value".
std::string line_chart(const std::vector<Series>& series, const LineChartOptions& options);

struct HeatmapOptions {
  // The side of a cell in pixels; 0 picks one that keeps the map about 640 pixels wide (between 14
  // and 28 per cell).
  int cell = 0;
  int decimals = 3;  // of the weights in the tooltips
  // Per row, a column to outline (the true alignment: the source token the row's token
  // translates), -1 for none; empty for no outlines.
  std::vector<int32_t> outline{};
  // The value drawn darkest (weights: 1); a map of other values (gradient norms, say) sets its
  // largest here, and its tooltips give 3 significant digits instead of `decimals`.
  double max = 1;
  std::string legend = "attention weights";  // what the colour scale measures
  // An outline per row (<rect class="row-mark" data-row="r">) that a page's script can highlight
  // to mark the current row, and each cell's row (data-row) for its clicks.
  bool row_marks = false;
};

// An attention matrix: weights (rows x cols, row-major) with rows labelled by `row_labels` (output
// tokens, top to bottom) and columns by `col_labels` (source tokens, along the top, rotated when
// wider than a cell). Each cell has a <title> "col -> row: weight". Throws ValueError when the
// sizes disagree.
std::string heatmap(const std::vector<std::string>& col_labels,
                    const std::vector<std::string>& row_labels, const std::vector<float>& weights,
                    const HeatmapOptions& options = {});

struct Bar {
  std::string label;    // under the bar
  double value = 0;     // non-finite: no bar (e.g. an empty bucket)
  std::string tooltip;  // the bar's <title>
  std::string note;     // a second, smaller line under the label (e.g. "n = 12"); may be empty
};

struct BarChartOptions {
  ChartFrame frame;
  std::string x_label, y_label;
  std::string color = "#3b76b0";
  int decimals = 1;  // of the value written above each bar
};

// Vertical bars from 0 on a y axis widened to round ticks (at least 0..1).
std::string bar_chart(const std::vector<Bar>& bars, const BarChartOptions& options);

// Source-length buckets for a test set whose lengths run from min_len to max_len: the upper bounds
// (as models::LengthBuckets takes them) are multiples of the smallest width among 1, 2, 5, 10, 20,
// 50, ... that gives at most `max_buckets` buckets over the range.
std::vector<int64_t> length_bucket_bounds(int64_t min_len, int64_t max_len, int max_buckets = 8);

}  // namespace tapestry::cli::html
