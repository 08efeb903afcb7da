// The report's Transformer section: one teacher-forced pass in eval mode, every attention's
// per-head weights drawn with the report's heatmaps.
#include "tools/report_transformer.h"

#include <fmt/format.h>

#include "tools/report_html.h"

namespace tapestry::cli {

namespace {

// Head h of weights (1,h,R,C) as floats, or their mean over heads for h = -1.
std::vector<float> head_weights(const Tensor& w, int64_t h) {
  const int64_t heads = w.dim(1), size = w.dim(2) * w.dim(3);
  std::vector<float> out(static_cast<size_t>(size), 0.0f);
  for (int64_t k = 0; k < heads; ++k) {
    if (h >= 0 && k != h) continue;
    for (int64_t i = 0; i < size; ++i)
      out[static_cast<size_t>(i)] +=
          static_cast<float>(w.at(k * size + i)) / static_cast<float>(h >= 0 ? 1 : heads);
  }
  return out;
}

// One figure per head (and the mean, when `mean`), side by side.
std::string head_row(const Tensor& w, const std::vector<std::string>& cols,
                     const std::vector<std::string>& rows, bool mean) {
  std::string s = "<div class=\"probes\">\n";
  html::HeatmapOptions o;
  o.cell = 14;
  for (int64_t h = mean ? -1 : 0; h < w.dim(1); ++h)
    s += fmt::format("<figure><figcaption>{}</figcaption>\n{}</figure>\n",
                     h < 0 ? std::string("mean of the heads") : fmt::format("head {}", h + 1),
                     html::heatmap(cols, rows, head_weights(w, h), o));
  return s + "</div>\n";
}

}  // namespace

std::string transformer_heads_section(models::SavedModel& m, const std::vector<std::string>& source,
                                      const std::vector<std::string>& target,
                                      const std::string& what) {
  models::Seq2Seq& model = *m.model;
  if (!model.is_transformer() || source.empty()) return "";
  models::TransformerModel& tf = model.transformer();
  models::Batch batch;
  batch.size = 1;
  batch.src_len = static_cast<int64_t>(source.size());
  for (const auto& w : source) batch.src.push_back(m.src.id(w));
  batch.src_lengths = {batch.src_len};
  batch.tgt_in.push_back(models::Vocab::kBos);
  for (const auto& w : target) {
    batch.tgt_in.push_back(m.tgt.id(w));
    batch.tgt_out.push_back(m.tgt.id(w));
  }
  batch.tgt_out.push_back(models::Vocab::kEos);
  batch.tgt_len = static_cast<int64_t>(batch.tgt_in.size());
  batch.tgt_lengths = {batch.tgt_len};

  const bool was_training = model.training();
  model.eval();
  Tape tape;
  models::TransformerModel::Weights weights;
  {
    NoGrad no_grad(tape);
    Rng unused(0);  // eval mode: no dropout draws
    const models::TransformerModel::Memory memory = tf.encode(tape, batch, unused, &weights);
    tf.decode(tape, memory, batch, unused, &weights);
  }
  if (was_training) model.train();

  std::string text;
  for (const auto& w : source) text += (text.empty() ? "" : " ") + w;
  std::vector<std::string> rows = target;  // row t is the position that writes y_t
  rows.push_back("<eos>");
  std::string s = fmt::format(
      "<h2>Every head of the Transformer</h2>\n<p>{}, <i>{}</i>, read with the reference as the "
      "decoder's input (teacher forcing), by the final model. Each decoder layer's "
      "cross-attention has {} heads, drawn one by one and as their mean: one row per output "
      "token, one column per source token; the report's other maps show the last layer's "
      "mean. Hover a cell for its value.</p>\n",
      what, html::escape(text), model.config().heads);
  for (size_t l = 0; l < weights.decoder.size(); ++l) {
    s += fmt::format("<h3>Decoder layer {}: cross-attention over the source</h3>\n", l + 1);
    s += head_row(weights.decoder[l].cross.value(), source, rows, true);
  }
  s += "<p>The encoder's self-attention: each source position (row) reading every source "
       "position (column), per layer and head.</p>\n";
  for (size_t l = 0; l < weights.encoder.size(); ++l) {
    s += fmt::format("<h3>Encoder layer {}: self-attention</h3>\n", l + 1);
    s += head_row(weights.encoder[l].value(), source, source, false);
  }
  return s;
}

}  // namespace tapestry::cli
