// The report's sections built from the run's files alone: the title and cards (model, data, test
// scores), the training curves with the per-epoch table, and the probe's attention over training;
// and the markup helpers the sections share.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "tools/flags.h"
#include "tools/progress.h"
#include "tools/report_html.h"
#include "tools/report_page.h"
#include "tools/train_setup.h"

namespace tapestry::cli {

using html::escape;
using nlohmann::json;

namespace report {
namespace {

constexpr const char* kBlue = "#2f6fb0";
constexpr const char* kOrange = "#e07b24";
constexpr const char* kGreen = "#2e9a4c";
constexpr const char* kLightBlue = "#8fb4dc";

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_./=:,+-@%") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string command_line(const std::string& name, const Args& args) {
  std::string s = fmt::format("tapestry {}", name);
  for (const auto& a : args) s += fmt::format(" {}", shell_quote(a));
  return s;
}

// A definition list row; `value` is markup (escape text before passing it).
std::string row(const std::string& key, const std::string& value) {
  return fmt::format("<dt>{}</dt><dd>{}</dd>\n", escape(key), value);
}

std::string percent(double x, int decimals) {
  return std::isfinite(x) ? fmt::format("{:.{}f}%", 100 * x, decimals) : "&ndash;";
}

std::string fixed(double x, int decimals) {
  return std::isfinite(x) ? fmt::format("{:.{}f}", x, decimals) : "&ndash;";
}

namespace {

double number_or_nan(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return NAN;
  return j[key].get<double>();
}

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

}  // namespace

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

}  // namespace report
}  // namespace tapestry::cli
