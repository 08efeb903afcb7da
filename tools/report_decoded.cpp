// The report's sections that decode the test split: sample translations with their attention
// heatmaps, a Transformer's every head, and BLEU by source length.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tapestry/models/bleu.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/metrics.h"
#include "tools/report_html.h"
#include "tools/report_page.h"
#include "tools/report_transformer.h"

namespace tapestry::cli {

using html::escape;

namespace report {
namespace {

constexpr int64_t kBatch = 64;
// Longer sources make heatmaps too small to read; samples prefer sentences up to this length.
constexpr size_t kSampleMaxLen = 20;

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

}  // namespace

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
    const std::string output = m.preprocess.detokenize_target(m.tgt.decode(h.tokens));
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
    const std::string out = m.preprocess.detokenize_target(m.tgt.decode(hyps[i][0].tokens));
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

}  // namespace report
}  // namespace tapestry::cli
