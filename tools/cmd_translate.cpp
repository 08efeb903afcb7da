// tapestry translate: translates sentences from stdin or a file with a trained model, greedy or
// beam search, optionally with n-best lists and the attention weights as JSON.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tapestry/models/evaluate.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/text_input.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/report_html.h"
#include "tools/run_dir.h"
#include "tools/text_files.h"

namespace tapestry::cli {

using namespace models;

namespace {
constexpr const char* kAbout =
    "Translates one sentence per line, from --input or standard input, with a model trained by\n"
    "'tapestry train' (its run directory or a .safetensors file). The text is tokenised as the\n"
    "model's training data was; unknown words become <unk>. An empty line gives an empty line.\n"
    "With --nbest N > 1 each line is 'INDEX ||| TRANSLATION ||| SCORE' (Moses' n-best format).\n"
    "--attention FILE writes, per sentence, the source and output tokens and the weights (one row\n"
    "per output token, then the row of <eos>) as JSON.\n\n"
    "examples:\n"
    "  echo 'the big red house' | tapestry translate --model runs/grammar\n"
    "  tapestry translate --model runs/m30k --input test.de --beam 5 --attention attn.json";
constexpr const char* kHeatmapCss = R"css(
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px;
       color: #1d2330; max-width: 1100px; }
h1 { font-size: 20px; } h2 { font-size: 15px; margin: 22px 0 4px; }
.note { color: #5b6475; font-size: 13px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 4px 0 8px; }
dt { color: #5b6475; } dd { margin: 0; }
)css";

// One sentence's section of the --heatmap page: its source, its translation and the attention.
// Subword pieces merged into words for display: the labels (each word's text) and the attention
// over words (see models::merge_piece_attention).
void merge_pieces(const Preprocess& p, std::vector<std::string>& cols,
                  std::vector<std::string>& rows, std::vector<float>& weights) {
  const auto col_words = piece_words(cols), row_words = piece_words(rows);
  weights = merge_piece_attention(weights, row_words, col_words);
  const auto labels = [](const std::vector<std::string>& pieces, const auto& words,
                         const auto& join) {
    std::vector<std::string> out;
    for (const auto& [b, e] : words) {
      const std::vector<std::string> word(pieces.begin() + static_cast<long>(b),
                                          pieces.begin() + static_cast<long>(e));
      out.push_back(word.size() == 1 && word[0] == "<eos>" ? word[0] : join(word));
    }
    return out;
  };
  cols = labels(cols, col_words, [&](const auto& w) { return p.detokenize_source(w); });
  rows = labels(rows, row_words, [&](const auto& w) { return p.detokenize_target(w); });
}

std::string heatmap_section(const SavedModel& m, const std::vector<std::string>& source,
                            const EncodedPair& pair, const Hypothesis& h, size_t line,
                            bool has_attention, bool merge) {
  std::vector<std::string> cols, rows = m.tgt.decode(h.tokens);
  for (size_t j = 0; j < source.size(); ++j)
    cols.push_back(pair.src[j] == Vocab::kUnk && source[j] != "<unk>" ? source[j] + "*"
                                                                      : source[j]);
  const std::string output = m.preprocess.detokenize_target(rows);
  if (h.finished) rows.push_back("<eos>");
  std::vector<float> weights = h.attention;
  if (merge && has_attention && !rows.empty() && weights.size() == rows.size() * cols.size())
    merge_pieces(m.preprocess, cols, rows, weights);
  std::string s = fmt::format(
      "<section><h2>Line {}</h2><dl><dt>source</dt><dd>{}</dd><dt>output</dt><dd>{}</dd></dl>\n",
      line, html::escape(m.preprocess.detokenize_source(source)), html::escape(output));
  if (!has_attention)
    return s +
           "<p class=\"note\">No attention: this model's decoder reads only the encoder's "
           "final state.</p></section>\n";
  if (rows.empty() || weights.size() != rows.size() * cols.size())
    return s + "<p class=\"note\">No attention matrix to draw.</p></section>\n";
  return s + html::heatmap(cols, rows, weights) + "</section>\n";
}

}  // namespace

int cmd_translate(const Args& args) {
  std::string model, input, attention_out, heatmap_out;
  int64_t beam = 1, nbest = 1, batch_size = 64, max_extra = 5;
  double max_ratio = 2.0, length_penalty = 1.0;
  Flags f("tapestry translate --model DIR [options] [< input]", kAbout);
  f.add("model", &model, "run directory or .safetensors file (required)");
  f.add("input", &input, "read sentences from this file instead of standard input ('-')");
  f.add("beam", &beam, "beam width (1: greedy)", 1, 1000);
  f.add("nbest", &nbest, "translations per sentence, at most the beam width", 1, 1000);
  f.add("max-len-ratio", &max_ratio, "stop after ratio * source length + max-len-extra tokens", 0,
        1000);
  f.add("max-len-extra", &max_extra, "see --max-len-ratio", 0, 100000);
  f.add("length-penalty", &length_penalty, "rank by log p / length^alpha", 0, 10);
  f.add("batch-size", &batch_size, "sentences decoded together", 1, 100000);
  f.add("attention", &attention_out, "write the attention weights as JSON to this file");
  f.add("heatmap", &heatmap_out,
        "draw each sentence's attention as a heatmap in this HTML page (self-contained)");
  bool merge = false;
  f.add_switch("merge-pieces", &merge,
               "subword models: --heatmap and --attention show words, each word's pieces merged "
               "(weights on a source word summed, a target word's rows averaged)");
  if (!f.parse(args)) return 0;
  if (model.empty()) throw UsageError{"--model is required (a run directory or .safetensors file)"};
  if (nbest > beam)
    throw UsageError{fmt::format("--nbest {} is larger than --beam {}", nbest, beam)};

  if (!attention_out.empty()) check_output_file("--attention", attention_out);
  if (!heatmap_out.empty()) check_output_file("--heatmap", heatmap_out);

  const std::string checkpoint = model_file(model);
  // The input before the model: a bad file is refused without waiting for a large model to load.
  // Standard input's lines are kept as they are (translate.py of an export reads them alike);
  // a file's are right-stripped, as for eval and bleu.
  const bool from_stdin = input.empty() || input == models::kStdinPath;
  const std::vector<std::string> lines =
      from_stdin ? models::read_lines(std::string(kStdinPath)) : read_text_lines(input, true);
  SavedModel m = load_model(checkpoint);
  if (merge && m.preprocess.mode != Preprocess::Mode::subword)
    throw Error(fmt::format("--merge-pieces: '{}' is a {} model, not a subword one", checkpoint,
                            m.preprocess.describe()));
  // Sentences with tokens are decoded; empty ones keep their place.
  std::vector<EncodedPair> pairs;
  std::vector<std::vector<std::string>> sources;
  std::vector<size_t> where;
  // Words the model never saw are read as <unk>: said on standard error (the first few lines in
  // full, then a count), never in the translations themselves.
  size_t unknown = 0, unknown_lines = 0, words = 0, cut_lines = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto tokens = m.preprocess.tokenize_source(lines[i]);
    if (tokens.empty()) continue;
    // Decoding's memory grows with the source's length: longer lines are cut, and said so.
    if (tokens.size() > static_cast<size_t>(kMaxSourceTokens)) {
      if (++cut_lines <= 5)
        fmt::print(stderr,
                   "tapestry translate: line {}: {} tokens, more than the {} a sentence may have; "
                   "translating its first {}\n",
                   i + 1, tokens.size(), kMaxSourceTokens, kMaxSourceTokens);
      tokens.resize(static_cast<size_t>(kMaxSourceTokens));
    }
    std::string missing;
    size_t here = 0;
    for (const auto& t : tokens)
      if (!m.src.contains(t)) {
        ++here;
        if (here <= 8) missing += fmt::format("{}'{}'", missing.empty() ? "" : ", ", t);
      }
    words += tokens.size();
    if (here > 0) {
      if (++unknown_lines <= 5)
        fmt::print(stderr, "tapestry translate: line {}: {} word{} read as <unk>: {}{}\n", i + 1,
                   here, here == 1 ? "" : "s", missing, here > 8 ? ", ..." : "");
      unknown += here;
    }
    pairs.push_back({m.src.encode(tokens), {}});
    sources.push_back(std::move(tokens));
    where.push_back(i);
  }
  DecodeOptions o;
  o.beam = beam;
  o.nbest = nbest;
  o.max_len_ratio = max_ratio;
  o.max_len_extra = max_extra;
  o.length_penalty = length_penalty;
  if (unknown > 0)
    fmt::print(stderr,
               "tapestry translate: {} of {} input words ({} of {} sentences) are not in the "
               "model's vocabulary and were read as <unk>\n",
               unknown, words, unknown_lines, pairs.size());
  if (cut_lines > 5)
    fmt::print(stderr, "tapestry translate: {} lines were cut to their first {} tokens\n",
               cut_lines, kMaxSourceTokens);
  auto hyps = translate(*m.model, pairs, batch_size, o);

  std::vector<std::vector<std::string>> out(lines.size());
  nlohmann::json attention = nlohmann::json::array();
  std::string page;  // the heatmaps, one section per sentence (best translation only)
  const bool has_attention = m.model->config().attention != nn::AttentionKind::none;
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (!heatmap_out.empty() && !hyps[k].empty())
      page +=
          heatmap_section(m, sources[k], pairs[k], hyps[k][0], where[k] + 1, has_attention, merge);
    for (const Hypothesis& h : hyps[k]) {
      std::vector<std::string> tokens = m.tgt.decode(h.tokens);
      const std::string text = m.preprocess.detokenize_target(tokens);
      out[where[k]].push_back(
          nbest > 1 ? fmt::format("{} ||| {} ||| {:.4f}", where[k], text, h.score) : text);
      if (attention_out.empty()) continue;
      std::vector<std::string> rows = tokens;
      if (h.finished) rows.push_back("<eos>");
      std::vector<std::string> src_tokens;
      for (int32_t id : pairs[k].src) src_tokens.push_back(m.src.token(id));
      std::vector<float> w = h.attention;
      if (merge && !rows.empty() && w.size() == rows.size() * src_tokens.size())
        merge_pieces(m.preprocess, src_tokens, rows, w);
      nlohmann::json weights = nlohmann::json::array();
      const size_t s = src_tokens.size();
      for (size_t r = 0; s > 0 && r * s < w.size(); ++r)
        weights.push_back(std::vector<float>(w.begin() + static_cast<long>(r * s),
                                             w.begin() + static_cast<long>((r + 1) * s)));
      attention.push_back({{"line", where[k] + 1},
                           {"source", src_tokens},
                           {"output", rows},
                           {"score", h.score},
                           {"weights", weights}});
    }
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (out[i].empty()) fmt::print("{}\n", nbest > 1 ? fmt::format("{} |||  ||| 0", i) : "");
    for (const auto& s : out[i]) fmt::print("{}\n", s);
  }
  if (!attention_out.empty()) write_file_atomic(attention_out, attention.dump() + "\n");
  if (!heatmap_out.empty()) {
    const std::string title = fmt::format("Attention of {}", model);
    write_file_atomic(
        heatmap_out,
        fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                    "<title>{0}</title>\n<style>{1}</style></head><body>\n<h1>{0}</h1>\n"
                    "<p class=\"note\">{2} &middot; {3} sentence{4} &middot; {5}. {6}; darker "
                    "is more weight.{7}</p>\n{8}</body></html>\n",
                    html::escape(title), kHeatmapCss, html::escape(m.model->config().summary()),
                    pairs.size(), pairs.size() == 1 ? "" : "s",
                    beam > 1 ? fmt::format("beam {}", beam) : std::string("greedy"),
                    merge ? "One row per output word (and the final &lt;eos&gt;), one column per "
                            "source word, each word's subword pieces merged: a column is the "
                            "weight on all its pieces, a row the mean of its pieces' rows"
                          : "One row per output token (and the final &lt;eos&gt;), one column "
                            "per source token",
                    m.preprocess.mode == Preprocess::Mode::subword
                        ? ""
                        : " A * marks a source word outside the model's vocabulary, read as "
                          "&lt;unk&gt;.",
                    page));
  }
  return 0;
}

}  // namespace tapestry::cli
