// The report's markup builders: escaping, round axis ticks, and the SVG charts and heatmaps.
#include "tools/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tapestry/core/errors.h"
#include "tapestry/core/html.h"

namespace tapestry::cli::html {

namespace {

constexpr const char* kFont = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
constexpr const char* kAxis = "#555";
constexpr const char* kGrid = "#e4e4e4";

// A coordinate: at most two decimals, trailing zeros dropped ("215", "74.75").
std::string num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

// Enough decimals to tell ticks `step` apart.
int tick_decimals(double step) {
  if (!(step > 0) || step >= 1) return 0;
  return static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
}

// The nearest of 1, 2, 5 and 10 times a power of ten to x (Heckbert's "nice numbers").
double nice_number(double x) {
  const double exp = std::floor(std::log10(x));
  const double f = x / std::pow(10.0, exp);
  const double nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  return nf * std::pow(10.0, exp);
}

// A rough width of text in pixels: system fonts average about 0.6 em per character.
double text_width(std::string_view text, double font_size) {
  return static_cast<double>(utf8_length(text)) * font_size * 0.6;
}

std::string svg_open(double width, double height, std::string_view aria) {
  return fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"{2}\" font-family=\"{3}\" font-size=\"12\">\n",
      num(width), num(height), escape(aria), kFont);
}

// A y axis with grid lines and labelled ticks, and the axis titles, for a frame whose y values
// map through `y_of`.
template <class YOf>
std::string y_axis(const ChartFrame& f, const std::vector<double>& ticks, YOf y_of,
                   const std::string& x_label, const std::string& y_label) {
  std::string s;
  const int decimals = ticks.size() > 1 ? tick_decimals(ticks[1] - ticks[0]) : 0;
  for (double t : ticks) {
    const double y = y_of(t);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"/>"
        "<text x=\"{4}\" y=\"{1}\" dy=\"0.35em\" text-anchor=\"end\" "
        "fill=\"{5}\">{6:.{7}f}</text>\n",
        f.left, num(y), f.width - f.right, kGrid, f.left - 6, kAxis, t, decimals);
  }
  const int bottom = f.height - f.bottom;
  s += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{4}\"/>"
      "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"{4}\"/>\n",
      f.left, f.top, bottom, f.width - f.right, kAxis);
  if (!x_label.empty())
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
                     num(f.left + (f.width - f.left - f.right) / 2.0), f.height - 8,
                     escape(x_label));
  if (!y_label.empty()) {
    const double cy = f.top + (bottom - f.top) / 2.0;
    s += fmt::format(
        "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\" "
        "fill=\"#333\">{}</text>\n",
        num(cy), escape(y_label));
  }
  return s;
}

}  // namespace

std::string escape(std::string_view text) {
  return html_escape(text);
}

size_t utf8_length(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

std::string utf8_truncate(std::string_view text, size_t max) {
  if (max == 0) return "";
  if (utf8_length(text) <= max) return std::string(text);
  size_t points = 0, i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (points == max - 1) break;
      ++points;
    }
  }
  return std::string(text.substr(0, i)) + "\u2026";
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError(fmt::format("nice_ticks: the range [{}, {}] is not finite", lo, hi));
  if (lo > hi) std::swap(lo, hi);
  if (hi == lo) {
    lo -= integer ? 1 : std::max(0.5, std::abs(lo) * 0.1);
    hi += integer ? 1 : std::max(0.5, std::abs(hi) * 0.1);
  }
  target = std::max(target, 2);
  double step = nice_number((hi - lo) / (target - 1));
  if (integer) step = std::max(step, 1.0);
  const double start = std::floor(lo / step + 1e-9) * step;
  const double end = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int64_t k = 0; k < 10000; ++k) {
    // Multiples of step, computed afresh each time so errors do not accumulate.
    const double v = std::round((start + static_cast<double>(k) * step) / step) * step;
    ticks.push_back(v == 0 ? 0 : v);
    if (v >= end - step * 1e-9) break;
  }
  return ticks;
}

std::string shade(double weight) {
  if (!(weight >= 0)) weight = 0;  // NaN too
  weight = std::min(weight, 1.0);
  constexpr int kDark[3] = {0x08, 0x30, 0x6b};
  int rgb[3];
  for (int k = 0; k < 3; ++k)
    rgb[k] = static_cast<int>(std::lround(255.0 + (kDark[k] - 255.0) * weight));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::string line_chart(const std::vector<Series>& series, const LineChartOptions& o) {
  const ChartFrame& f = o.frame;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& s : series) {
    if (s.x.size() != s.y.size())
      throw ValueError(fmt::format("line_chart: series '{}' has {} x but {} y values", s.name,
                                   s.x.size(), s.y.size()));
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  std::string svg = svg_open(f.width, f.height, o.y_label + " by " + o.x_label);
  if (!std::isfinite(x_lo)) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">no data</text>",
                       f.width / 2, f.height / 2, kAxis);
    return svg + "</svg>\n";
  }
  if (o.y_from_zero) y_lo = std::min(y_lo, 0.0);
  const std::vector<double> y_ticks = nice_ticks(y_lo, y_hi, 5);
  const double y0 = y_ticks.front(), y1 = y_ticks.back();
  if (x_lo == x_hi) {
    x_lo -= 0.5;
    x_hi += 0.5;
  }
  const double plot_w = f.width - f.left - f.right, plot_h = f.height - f.top - f.bottom;
  auto px = [&](double x) { return f.left + plot_w * (x - x_lo) / (x_hi - x_lo); };
  auto py = [&](double y) { return f.top + plot_h * (1 - (y - y0) / (y1 - y0)); };

  svg += y_axis(f, y_ticks, py, o.x_label, o.y_label);
  const int bottom = f.height - f.bottom;
  for (double t : nice_ticks(x_lo, x_hi, 7, o.integer_x)) {
    if (t < x_lo - 1e-9 || t > x_hi + 1e-9) continue;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>"
        "<text x=\"{0}\" y=\"{4}\" text-anchor=\"middle\" fill=\"{3}\">{5}</text>\n",
        num(px(t)), bottom, bottom + 5, kAxis, bottom + 18, num(t));
  }

  // Legend along the top margin.
  double lx = f.left, ly = o.legend_y;
  for (const auto& s : series) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{6}\" x2=\"{1}\" y2=\"{6}\" stroke=\"{2}\" stroke-width=\"2.5\"/>"
        "<circle cx=\"{3}\" cy=\"{6}\" r=\"3\" fill=\"{2}\"/>"
        "<text x=\"{4}\" y=\"{6}\" dy=\"0.35em\" fill=\"#333\">{5}</text>\n",
        num(lx), num(lx + 22), escape(s.color), num(lx + 11), num(lx + 28), escape(s.name),
        num(ly));
    if (o.legend_rows)
      ly += 20;
    else
      lx += 28 + text_width(s.name, 12) + 18;
  }

  for (const auto& s : series) {
    // One polyline per run of finite values.
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        svg += fmt::format(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" stroke-linejoin=\"round\" "
            "{}points=\"{}\"/>\n",
            escape(s.color), s.points ? "2" : "1.2", s.points ? "" : "stroke-opacity=\"0.7\" ",
            points);
      points.clear();
    };
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        flush();
        continue;
      }
      points += fmt::format("{}{},{}", points.empty() ? "" : " ", num(px(s.x[i])), num(py(s.y[i])));
    }
    flush();
    for (size_t i = 0; i < s.x.size() && s.points; ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      svg += fmt::format(
          "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{}, {} {}: "
          "{:.{}f}</title></circle>\n",
          num(px(s.x[i])), num(py(s.y[i])), escape(s.color), escape(s.name), escape(o.x_label),
          num(s.x[i]), s.y[i], o.decimals);
    }
  }
  return svg + "</svg>\n";
}

std::string heatmap(const std::vector<std::string>& col_labels,
                    const std::vector<std::string>& row_labels, const std::vector<float>& weights,
                    const HeatmapOptions& o) {
  const size_t cols = col_labels.size(), rows = row_labels.size();
  if (weights.size() != rows * cols)
    throw ValueError(
        fmt::format("heatmap: {} weights for {} rows x {} columns", weights.size(), rows, cols));
  if (rows == 0 || cols == 0) throw ValueError("heatmap: no rows or no columns");
  const int cell =
      o.cell > 0 ? o.cell : std::clamp(static_cast<int>(640 / static_cast<int>(cols)), 14, 28);
  const double font = cell >= 20 ? 12 : 10;
  constexpr size_t kMaxLabel = 14;

  double col_w = 0, row_w = 0;
  for (const auto& l : col_labels)
    col_w = std::max(col_w, text_width(utf8_truncate(l, kMaxLabel), font));
  for (const auto& l : row_labels)
    row_w = std::max(row_w, text_width(utf8_truncate(l, kMaxLabel), font));
  const bool rotate = col_w > cell - 6;  // upright labels need a gap between them
  constexpr double kSin45 = 0.7072;
  const double top = rotate ? col_w * kSin45 + font + 8 : font + 10;
  const double left = row_w + 14;
  const double right = rotate ? std::max(12.0, col_w * kSin45 - cell / 2.0 + 6) : 12;
  const double map_w = static_cast<double>(cols) * cell, map_h = static_cast<double>(rows) * cell;
  const double legend_h = 34;
  const double width = std::max(left + map_w + right, left + (o.outline.empty() ? 240 : 340));
  const double height = top + map_h + legend_h + 8;

  std::string svg = svg_open(width, height, o.legend);
  svg += fmt::format("<g font-size=\"{}\" fill=\"#222\">\n", num(font));
  for (size_t c = 0; c < cols; ++c) {
    const std::string label = utf8_truncate(col_labels[c], kMaxLabel);
    const double cx = left + (static_cast<double>(c) + 0.5) * cell;
    const std::string full =
        label == col_labels[c] ? "" : fmt::format("<title>{}</title>", escape(col_labels[c]));
    if (rotate)
      svg += fmt::format("<text transform=\"translate({} {}) rotate(-45)\" dx=\"-2\">{}{}</text>\n",
                         num(cx - font * 0.25), num(top - 6), full, escape(label));
    else
      svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n", num(cx),
                         num(top - 6), full, escape(label));
  }
  for (size_t r = 0; r < rows; ++r) {
    const std::string label = utf8_truncate(row_labels[r], kMaxLabel);
    const std::string full =
        label == row_labels[r] ? "" : fmt::format("<title>{}</title>", escape(row_labels[r]));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" dy=\"0.35em\" text-anchor=\"end\">{}{}</text>\n",
                       num(left - 6), num(top + (static_cast<double>(r) + 0.5) * cell), full,
                       escape(label));
  }
  svg += "</g>\n";
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const float w = weights[r * cols + c];
      svg += fmt::format(
          "<rect class=\"cell\"{} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>{} -&gt; {}: {}</title></rect>\n",
          o.row_marks ? fmt::format(" data-row=\"{}\"", r) : "",
          num(left + static_cast<double>(c) * cell), num(top + static_cast<double>(r) * cell), cell,
          cell, shade(o.max > 0 ? w / o.max : 0), escape(col_labels[c]), escape(row_labels[r]),
          o.max == 1 ? fmt::format("{:.{}f}", w, o.decimals) : fmt::format("{:.3g}", w));
    }
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n",
      num(left), num(top), num(map_w), num(map_h));
  for (size_t r = 0; r < rows && r < o.outline.size(); ++r) {
    const int32_t c = o.outline[r];
    if (c < 0 || static_cast<size_t>(c) >= cols) continue;
    svg += fmt::format(
        "<rect class=\"truth\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
        "stroke=\"#e8590c\" stroke-width=\"2\"><title>true alignment: {} -&gt; {}</title></rect>\n",
        num(left + static_cast<double>(c) * cell + 1), num(top + static_cast<double>(r) * cell + 1),
        cell - 2, cell - 2, escape(col_labels[static_cast<size_t>(c)]), escape(row_labels[r]));
  }

  if (o.row_marks)
    for (size_t r = 0; r < rows; ++r)
      svg += fmt::format(
          "<rect class=\"row-mark\" data-row=\"{}\" x=\"1\" y=\"{}\" width=\"{}\" "
          "height=\"{}\" fill=\"transparent\" stroke=\"none\"/>\n",
          r, num(top + static_cast<double>(r) * cell), num(left + map_w - 1), cell);

  // The colour scale: eleven swatches from 0 to the largest value.
  const double ly = top + map_h + 12;
  svg += fmt::format("<g font-size=\"10\" fill=\"{}\">", kAxis);
  for (int k = 0; k <= 10; ++k)
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"10\" fill=\"{}\" stroke=\"#ccc\" "
        "stroke-width=\"0.5\"><title>{:.3g}</title></rect>",
        num(left + k * 12), num(ly), shade(k / 10.0), o.max * k / 10.0);
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">0</text>"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.3g}</text>"
      "<text x=\"{}\" y=\"{}\" dy=\"0.35em\">{}</text></g>\n",
      num(left + 6), num(ly + 21), num(left + 126), num(ly + 21), o.max,
      num(left + 140 + (o.max == 1 ? 0 : 24)), num(ly + 5), escape(o.legend));
  if (!o.outline.empty())
    svg += fmt::format(
        "<g font-size=\"10\" fill=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" "
        "fill=\"none\" stroke=\"#e8590c\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\" "
        "dy=\"0.35em\">true alignment</text></g>\n",
        kAxis, num(left + 240), num(ly), num(left + 254), num(ly + 5));
  return svg + "</svg>\n";
}

std::string bar_chart(const std::vector<Bar>& bars, const BarChartOptions& o) {
  const ChartFrame& f = o.frame;
  double hi = 0;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) hi = std::max(hi, b.value);
  const std::vector<double> ticks = nice_ticks(0, std::max(hi, 1.0), 5);
  const double y1 = ticks.back();
  const double plot_w = f.width - f.left - f.right, plot_h = f.height - f.top - f.bottom;
  auto py = [&](double y) { return f.top + plot_h * (1 - y / y1); };

  std::string svg = svg_open(f.width, f.height, o.y_label + " by " + o.x_label);
  svg += y_axis(f, ticks, py, o.x_label, o.y_label);
  if (bars.empty()) return svg + "</svg>\n";
  const double band = plot_w / static_cast<double>(bars.size());
  const int bottom = f.height - f.bottom;
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double x = f.left + static_cast<double>(i) * band;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                       num(x + band / 2), bottom + 16, kAxis, escape(b.label));
    if (!b.note.empty())
      svg += fmt::format(
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" "
          "fill=\"#888\">{}</text>\n",
          num(x + band / 2), bottom + 29, escape(b.note));
    if (!std::isfinite(b.value)) continue;
    const double v = std::max(b.value, 0.0);
    svg += fmt::format(
        "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
        "<title>{}</title></rect>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{:.{}f}</text>\n",
        num(x + band * 0.15), num(py(v)), num(band * 0.7), num(bottom - py(v)), escape(o.color),
        escape(b.tooltip), num(x + band / 2), num(py(v) - 5), b.value, o.decimals);
  }
  return svg + "</svg>\n";
}

std::vector<int64_t> length_bucket_bounds(int64_t min_len, int64_t max_len, int max_buckets) {
  if (min_len > max_len) std::swap(min_len, max_len);
  max_buckets = std::max(max_buckets, 1);
  // Widths 1, 2, 5, 10, 20, 50, ...
  for (int64_t scale = 1;; scale *= 10) {
    for (int64_t m : {1, 2, 5}) {
      const int64_t w = m * scale;
      std::vector<int64_t> upper;
      for (int64_t u = (min_len + w - 1) / w * w; u < max_len; u += w) upper.push_back(u);
      if (static_cast<int64_t>(upper.size()) + 1 <= max_buckets) return upper;
    }
  }
}

}  // namespace tapestry::cli::html
