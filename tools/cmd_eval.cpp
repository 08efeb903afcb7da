// tapestry eval: scores a model on a source and reference file: corpus BLEU as sacreBLEU computes
// it, exact match, perplexity, and the same by source-length bucket.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tapestry/models/bleu.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/metrics.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/scores.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/run_dir.h"
#include "tools/text_files.h"
#include "tools/train_setup.h"

namespace tapestry::cli {

namespace fs = std::filesystem;

using namespace models;

namespace {

constexpr const char* kAbout =
    "Translates --src with the model and scores the output against --ref (by default the run's\n"
    "test split, DIR/test.src and DIR/test.ref) as papers report it: sacreBLEU's default BLEU\n"
    "(cased, BLEU-4, 13a tokens, exp smoothing), its lower-cased BLEU and chrF2, each with its\n"
    "signature; exact-match and per-token accuracy on the model's tokens, perplexity of the\n"
    "reference under the model, and these with BLEU by source length (--lowercase: that BLEU\n"
    "lower-cased).\n\n"
    "examples:\n"
    "  tapestry eval --model runs/grammar\n"
    "  tapestry eval --model runs/m30k --src test_2016_flickr.de --ref test_2016_flickr.en "
    "--lowercase --beam 5";

std::vector<int64_t> parse_buckets(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_commas(text)) {
    const int64_t v =
        parse_int("--buckets", item, INT64_MIN, INT64_MAX, "a whole number (e.g. 10,20,30)");
    if (v < 1 || (!out.empty() && v <= out.back()))
      throw UsageError{"--buckets must be increasing positive lengths, e.g. 10,20,30"};
    out.push_back(v);
  }
  return out;
}

struct BucketScore {
  MatchCounts match;
  BleuStats bleu;
  int64_t source_tokens = 0;  // for the bucket's mean source length
};

}  // namespace

int cmd_eval(const Args& args) {
  std::string model, src_path, ref_path, buckets_text = "10,20,30,40", json_out;
  int64_t beam = 1, batch_size = 64;
  bool lowercase = false;
  Flags f("tapestry eval --model DIR [--src FILE --ref FILE] [options]", kAbout);
  f.add("model", &model, "run directory or .safetensors file (required)");
  f.add("src", &src_path, "source sentences, one per line (default DIR/test.src)");
  f.add("ref", &ref_path, "reference translations, line-aligned (default DIR/test.ref)");
  f.add("beam", &beam, "beam width (1: greedy)", 1, 1000);
  f.add_switch("lowercase", &lowercase,
               "BLEU by source length (and the JSON's \"bleu\") case-insensitive");
  f.add("buckets", &buckets_text, "upper ends of the source-length buckets");
  f.add("batch-size", &batch_size, "sentences decoded together", 1, 100000);
  f.add("json", &json_out, "also write the scores as JSON to this file");
  if (!f.parse(args)) return 0;
  if (model.empty()) throw UsageError{"--model is required (a run directory or .safetensors file)"};
  if (src_path.empty() != ref_path.empty())
    throw UsageError{"give both --src and --ref, or neither (the run's test split)"};
  LengthBuckets buckets(parse_buckets(buckets_text));
  if (!json_out.empty()) check_output_file("--json", json_out);
  const std::string checkpoint = model_file(model);
  if (src_path.empty()) {
    src_path = model + "/test.src";
    ref_path = model + "/test.ref";
  }

  // The text before the model: a bad file is refused without waiting for a large model to load.
  std::vector<std::string> src = read_text_lines(src_path), ref = read_text_lines(ref_path);
  if (src.size() != ref.size())
    throw Error(fmt::format("'{}' has {} lines but '{}' has {}: they must align", src_path,
                            src.size(), ref_path, ref.size()));
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i].empty())
      throw Error(fmt::format("{}:{}: empty reference line: every source needs its reference",
                              ref_path, i + 1));
  SavedModel m = load_model(checkpoint);
  std::vector<EncodedPair> pairs;
  std::vector<Example> tokens;  // as training tokenised its pairs
  for (size_t i = 0; i < src.size(); ++i) {
    auto s = m.preprocess.tokenize_source(src[i]);
    if (s.empty()) throw Error(fmt::format("{}:{}: empty source sentence", src_path, i + 1));
    tokens.push_back({s, m.preprocess.tokenize_target(ref[i]), {}});
    pairs.push_back({m.src.encode(s), m.tgt.encode(tokens.back().tgt)});
  }
  // Test sentences that training saw flatter the scores: count them, where the run is known.
  std::string overlap_note;
  int64_t same_sources = -1, same_pairs = -1;
  if (fs::is_directory(model) && fs::exists(fs::path(model) / "command.json")) {
    try {
      const TrainData data = run_data(model);
      std::set<std::vector<std::string>> train_src;
      std::set<std::pair<std::vector<std::string>, std::vector<std::string>>> train_pairs;
      for (const auto& e : data.splits.train) {
        train_src.insert(e.src);
        train_pairs.insert({e.src, e.tgt});
      }
      same_sources = same_pairs = 0;
      for (const auto& e : tokens)
        if (train_src.count(e.src)) {
          ++same_sources;
          same_pairs += static_cast<int64_t>(train_pairs.count({e.src, e.tgt}));
        }
      if (same_sources > 0)
        overlap_note = fmt::format(
            "warning: {} of {} test sources are also training sources ({} of them with the "
            "same reference): on those the scores flatter the model",
            same_sources, tokens.size(), same_pairs);
    } catch (const Error& e) {
      overlap_note = fmt::format("note: not checked against the training data: {}", e.what());
    }
  }
  DecodeOptions o;
  o.beam = beam;
  const auto decode_start = std::chrono::steady_clock::now();
  auto hyps = translate(*m.model, pairs, batch_size, o);
  const double decode_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - decode_start).count();
  LossResult loss = evaluate_loss(*m.model, pairs, batch_size);

  BleuOptions bo;
  bo.lowercase = lowercase;
  std::vector<std::string> out;
  MatchCounts all;
  std::vector<BucketScore> per(buckets.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& best = hyps[i][0].tokens;
    out.push_back(m.preprocess.detokenize_target(m.tgt.decode(best)));
    all.add(best, pairs[i].tgt);
    BucketScore& b = per[buckets.bucket(static_cast<int64_t>(pairs[i].src.size()))];
    b.match.add(best, pairs[i].tgt);
    b.source_tokens += static_cast<int64_t>(pairs[i].src.size());
    b.bleu += segment_bleu_stats(out.back(), {ref[i]}, bo);
  }
  const BleuStats stats = corpus_bleu_stats(out, {ref}, bo);
  BleuScore bleu = bleu_from_stats(stats, bo);

  fmt::print("model: {} ({})\n", checkpoint, m.model->config().summary());
  fmt::print("data:  {} sentences from {} against {}; {}\n", pairs.size(), src_path, ref_path,
             beam > 1 ? fmt::format("beam {}", beam) : "greedy");
  const FieldScores field = field_scores(out, ref);
  fmt::print("{}", field.lines());
  if (const std::string why = bleu_zero_reason(stats, bo); !why.empty())
    fmt::print("note: {}\n", why);
  if (!overlap_note.empty()) fmt::print("{}\n", overlap_note);
  fmt::print(
      "exact match {:.2f}%  token accuracy {:.2f}%  perplexity {:.3f} (loss {:.4f} over {} "
      "tokens)\n",
      100 * all.exact_match(), 100 * all.token_accuracy(), loss.perplexity, loss.loss, loss.tokens);
  fmt::print("decoding took {:.2f} s: {:.0f} sentences/s ({}, batch {})\n\n", decode_seconds,
             static_cast<double>(pairs.size()) / decode_seconds,
             beam > 1 ? fmt::format("beam {}", beam) : "greedy", batch_size);
  fmt::print("{:>12} {:>10} {:>8} {:>8} {:>10}{}\n", "src length", "sentences", "BLEU", "exact",
             "token acc", lowercase ? "   (BLEU case:lc)" : "");
  nlohmann::json by_length = nlohmann::json::array();
  for (size_t b = 0; b < per.size(); ++b) {
    if (per[b].match.sentences == 0) continue;
    const double score = bleu_from_stats(per[b].bleu, bo).score;
    fmt::print("{:>12} {:>10} {:>8.2f} {:>7.2f}% {:>9.2f}%\n", buckets.label(b),
               per[b].match.sentences, score, 100 * per[b].match.exact_match(),
               100 * per[b].match.token_accuracy());
    by_length.push_back({{"bucket", buckets.label(b)},
                         {"sentences", per[b].match.sentences},
                         {"mean_source_length", static_cast<double>(per[b].source_tokens) /
                                                    static_cast<double>(per[b].match.sentences)},
                         {"bleu", score},
                         {"exact", per[b].match.exact_match()},
                         {"token_acc", per[b].match.token_accuracy()}});
  }
  if (!json_out.empty()) {
    nlohmann::json j = {{"bleu", bleu.score},
                        {"bleu_line", bleu.str()},
                        {"bleu_cased", field.bleu.score},
                        {"bleu_lc", field.bleu_lc.score},
                        {"chrf", field.chrf.score},
                        {"bleu_signature", field.bleu_signature},
                        {"bleu_lc_signature", field.bleu_lc_signature},
                        {"chrf_signature", field.chrf_signature},
                        {"exact", all.exact_match()},
                        {"token_acc", all.token_accuracy()},
                        {"perplexity", loss.perplexity},
                        {"loss", loss.loss},
                        {"sentences", pairs.size()},
                        {"beam", beam},
                        {"model", m.model->config().summary()},
                        {"parameters", m.model->config().parameter_count()},
                        {"decode_seconds", decode_seconds},
                        {"by_length", by_length}};
    if (same_sources >= 0) j["train_overlap"] = {{"sources", same_sources}, {"pairs", same_pairs}};
    write_file_atomic(json_out, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace tapestry::cli
