// tapestry train: trains an attention model on a toy task or a corpus, validating every epoch,
// keeping the best checkpoint, a metrics log and the test split in the run directory.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "tapestry/core/parallel.h"
#include "tapestry/models/average.h"
#include "tapestry/models/bleu.h"
#include "tapestry/models/evaluate.h"
#include "tapestry/models/metrics.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/scores.h"
#include "tapestry/nn/checkpoint.h"
#include "tools/cli.h"
#include "tools/progress.h"
#include "tools/run_dir.h"
#include "tools/train_setup.h"

namespace tapestry::cli {

namespace fs = std::filesystem;
using namespace models;

namespace {

constexpr const char* kAbout =
    "Trains an RNN encoder, an attention network and a decoder end to end on a toy task or a\n"
    "corpus. Every epoch it reports the validation loss, perplexity, BLEU and exact-match\n"
    "accuracy; it keeps the best model (by validation loss) in DIR/model.safetensors, the last\n"
    "epoch's state for --resume, a metrics log DIR/metrics.jsonl, and the test split as\n"
    "DIR/test.src and DIR/test.ref. At the end it scores the best model on the test split\n"
    "(greedy and beam) and prints a few translations.\n\n"
    "examples:\n"
    "  tapestry train --task reverse --epochs 5\n"
    "  tapestry train --task grammar --attention general --decoder luong --out runs/grammar\n"
    "  tapestry train --data ../shared/data/tatoeba/eng-fra.txt --reverse --tutorial-filter\n"
    "  tapestry train --train-prefix ../shared/data/multi30k/train --valid-prefix "
    "../shared/data/multi30k/val \\\n"
    "      --test-prefix ../shared/data/multi30k/test_2016_flickr --src de --tgt en --lowercase "
    "--split-punct";

// Scores of decoded sentences against their references.
struct DecodeScores {
  MatchCounts match;
  FieldScores field;  // BLEU (cased and lower-cased) and chrF2 on the detokenized text
  const BleuScore& bleu() const { return field.bleu; }
  // "BLEU 38.12 (case:lc 39.50)  chrF2 62.31  exact match 4.30%  token accuracy 35.85%"
  std::string summary() const {
    return fmt::format(
        "BLEU {:.2f} (case:lc {:.2f})  {} {:.2f}  exact match {:.2f}%  token "
        "accuracy {:.2f}%",
        field.bleu.score, field.bleu_lc.score, field.chrf.name, field.chrf.score,
        100 * match.exact_match(), 100 * match.token_accuracy());
  }
};

DecodeScores score(const std::vector<std::vector<Hypothesis>>& hyps,
                   std::span<const EncodedPair> pairs, std::span<const Example> examples,
                   const Vocab& tgt, const Preprocess& prep) {
  DecodeScores s;
  std::vector<std::string> out, refs;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto& best = hyps[i][0].tokens;
    s.match.add(best, pairs[i].tgt);
    out.push_back(prep.detokenize_target(tgt.decode(best)));
    refs.push_back(prep.detokenize_target(examples[i].tgt));
  }
  s.field = field_scores(out, refs);
  return s;
}

}  // namespace

int cmd_train(const Args& args) {
  TrainSettings s;
  Flags flags("tapestry train [options]", kAbout);
  s.declare(flags);
  if (!flags.parse(args)) return 0;
  RunDir run;
  if (!s.resume.empty()) {
    if (flags.given("out"))
      throw UsageError{fmt::format(
          "--resume {} continues that run in its own directory; --out cannot move it", s.resume)};
    // The run's own flags, then whatever this command line changes (e.g. more --epochs).
    run = RunDir::open(s.resume);
    Args all = run.read_command();
    for (const auto& a : all)  // the saved flags of a run never ask for help
      if (a == "--help" || a == "-h")
        throw Error(
            fmt::format("'{}' holds {}, not the flags of a run", run.file("command.json"), a));
    all.insert(all.end(), args.begin(), args.end());
    s = TrainSettings{};
    Flags again("tapestry train [options]", kAbout);
    s.declare(again);
    again.parse(all);
    s.out = run.path();
  }
  s.check(flags);
  if (s.resume.empty() && !s.out.empty()) RunDir::check_new(s.out);  // before any work
  set_parallel_threads(static_cast<int>(s.threads));
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();

  // A resumed subword run keeps the segmentation its saved model was trained with.
  std::optional<Preprocess> segmentation;
  if (!s.resume.empty() && !s.subword.empty() && fs::exists(run.model_path()))
    segmentation = saved_preprocess(run.model_path());
  TrainData data = load_train_data(s, segmentation ? &*segmentation : nullptr);
  Vocab src_vocab, tgt_vocab;
  if (data.preprocess.mode == Preprocess::Mode::subword) {
    src_vocab = data.preprocess.source_vocab();
    tgt_vocab = data.preprocess.target_vocab();
  } else {
    VocabBuilder src_counts, tgt_counts;
    for (const auto& e : data.splits.train) {
      src_counts.count(e.src);
      tgt_counts.count(e.tgt);
    }
    src_vocab = src_counts.build(s.min_freq, s.max_vocab);
    tgt_vocab = tgt_counts.build(s.min_freq, s.max_vocab);
  }
  if (data.splits.train.empty() || data.splits.valid.empty() || data.splits.test.empty())
    throw Error(fmt::format(
        "{}: train, valid and test need at least one pair each (have {}, {}, {})", data.description,
        data.splits.train.size(), data.splits.valid.size(), data.splits.test.size()));
  auto train = encode_pairs(data.splits.train, src_vocab, tgt_vocab);
  auto valid = encode_pairs(data.splits.valid, src_vocab, tgt_vocab);
  auto test = encode_pairs(data.splits.test, src_vocab, tgt_vocab);

  Seq2Seq model(model_config(s, src_vocab.size(), tgt_vocab.size()));
  Trainer trainer(model, train_options(s));
  if (s.out.empty())
    s.out = fmt::format("runs/{}-{}", fs::path(s.data_description()).filename().string(),
                        s.arch == "transformer" ? "transformer" : s.attention);
  if (s.resume.empty()) {
    run = RunDir::create(s.out);
    run.write_test_split(data.splits.test, data.preprocess);
    run.write_command(args);  // last: a directory with command.json holds a run
  }
  RunState state;  // epoch 0: nothing committed yet
  if (!s.resume.empty()) {
    if (run.has_state()) state = run.load_state(model, trainer.optimizer());
    for (const auto& note : run.recover(state)) fmt::print(stderr, "tapestry train: {}\n", note);
  }
  const int64_t first_epoch = state.epoch + 1;
  double best = state.epoch > 0 ? state.best_valid_loss : INFINITY;
  int64_t best_epoch = state.best_epoch;
  const double elapsed_before = state.seconds;

  const bool verbose = !s.quiet;
  if (verbose) {
    fmt::print("data:  {}: {} train, {} valid, {} test pairs; {}\n", data.description, train.size(),
               valid.size(), test.size(), data.preprocess.describe());
    fmt::print("vocab: {} source, {} target tokens\n", src_vocab.size(), tgt_vocab.size());
    fmt::print("model: {}, {} parameters\n", model.config().summary(),
               format_count(static_cast<double>(model.num_parameters())));
    fmt::print("run:   {}{}\n", run.path(),
               s.resume.empty()   ? ""
               : first_epoch == 1 ? " (resumed: no epoch had been saved, so from epoch 1)"
                                  : fmt::format(" (resumed after epoch {})", first_epoch - 1));
    std::fflush(stdout);  // progress goes to stderr: keep a redirected log in order
  }

  Progress progress(stderr);
  const double limit = s.time_limit * 60;
  auto elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(clock::now() - start).count();
  };
  DecodeOptions greedy;
  const auto n_decode = std::min<size_t>(valid.size(), static_cast<size_t>(s.valid_decode));
  std::span<const EncodedPair> valid_decode(valid.data(), n_decode);
  std::span<const Example> valid_examples(data.splits.valid.data(), n_decode);
  // The probe: one fixed validation sentence whose attention (reading its reference) is kept at
  // the end of every epoch, so the report shows how it sharpens.
  const bool probe = !valid.empty() && model.config().attention != nn::AttentionKind::none;
  std::vector<EncodedPair> sampled;      // --subword-sample: this epoch's segmentation
  int64_t trained_epochs = state.epoch;  // the last committed epoch
  for (int64_t epoch = first_epoch; epoch <= s.epochs; ++epoch) {
    if (s.subword_sample > 0)
      sampled = encode_pairs(sampled_training_pairs(s, data, epoch), src_vocab, tgt_vocab);
    std::span<const EncodedPair> epoch_pairs = s.subword_sample > 0 ? sampled : train;
    EpochResult r = trainer.epoch(epoch_pairs, epoch, [&](const StepProgress& p) {
      if (verbose) progress.step(epoch, s.epochs, p);
      if (s.log_every > 0 && p.step % s.log_every == 0)
        run.append_metrics(nlohmann::json{
            {"kind", "step"},
            {"epoch", epoch},
            {"step", trainer.steps()},
            {"epoch_step", p.step},
            {"epoch_steps", p.steps},
            {"loss", p.loss},
            {"lr", trainer.optimizer().lr()},
            {"elapsed_seconds",
             elapsed()}}.dump());
      return limit <= 0 || elapsed() < limit;
    });
    progress.end_epoch();
    LossResult vl = evaluate_loss(model, valid, s.batch_size);
    DecodeScores ds;
    if (n_decode > 0)
      ds = score(translate(model, valid_decode, s.batch_size, greedy), valid_decode, valid_examples,
                 tgt_vocab, data.preprocess);
    const double lr = trainer.optimizer().lr();
    nlohmann::json m = {{"epoch", epoch},
                        {"step", trainer.steps()},
                        {"train_loss", r.loss},
                        {"valid_loss", vl.loss},
                        {"valid_ppl", vl.perplexity},
                        {"lr", lr},
                        {"grad_norm", r.grad_norm},
                        {"tokens_per_s", r.tokens / std::max(r.seconds, 1e-9)},
                        {"epoch_seconds", r.seconds},
                        {"elapsed_seconds", elapsed()},
                        {"skipped_steps", r.skipped}};
    if (n_decode > 0) {
      m["valid_bleu"] = ds.bleu().score;
      m["valid_chrf"] = ds.field.chrf.score;
      m["valid_exact"] = ds.match.exact_match();
      m["valid_token_acc"] = ds.match.token_accuracy();
    }
    // The epoch's end is a transaction (tools/run_dir.h): the better model waits beside the
    // best one until last.safetensors commits the epoch.
    const bool improved = vl.loss < best;
    if (improved) {
      best = vl.loss;
      best_epoch = epoch;
      save_model(run.next_model_path(), model, src_vocab, tgt_vocab, data.preprocess,
                 {{"epoch", std::to_string(epoch)}, {"valid_loss", fmt::format("{}", vl.loss)}});
    }
    m["best"] = improved;
    if (probe) {
      const Example& ex = data.splits.valid.front();
      const std::vector<float> w =
          reference_attention(model, std::span<const EncodedPair>(valid.data(), 1), 1).front();
      std::vector<std::string> rows = ex.tgt;
      rows.push_back("<eos>");
      nlohmann::json weights = nlohmann::json::array();
      const size_t cols = ex.src.size();
      for (size_t t = 0; t < rows.size() && (t + 1) * cols <= w.size(); ++t)
        weights.push_back(std::vector<float>(w.begin() + static_cast<long>(t * cols),
                                             w.begin() + static_cast<long>((t + 1) * cols)));
      m["probe"] = {{"source", ex.src}, {"target", rows}, {"weights", weights}};
      if (!ex.align.empty()) m["probe"]["align"] = ex.align;
    }
    run.append_metrics(m.dump());
    if (s.average_last > 0) {
      fs::create_directories(fs::path(run.epoch_model_path(epoch)).parent_path());
      save_model(run.epoch_model_path(epoch), model, src_vocab, tgt_vocab, data.preprocess,
                 {{"epoch", std::to_string(epoch)}, {"valid_loss", fmt::format("{}", vl.loss)}});
    }
    run.save_state(
        model, trainer.optimizer(),
        {.epoch = epoch, .best_valid_loss = best, .seconds = elapsed(), .best_epoch = best_epoch});
    if (improved) run.promote_next_model();
    trained_epochs = epoch;
    if (s.average_last > 0)  // after the commit: the kept epochs never fall below N
      for (const auto& [e, path] : run.epoch_models())
        if (e <= epoch - s.average_last) fs::remove(path);
    trainer.end_epoch(vl.loss);
    if (verbose)
      fmt::print(
          "epoch {}/{}  train loss {:.4f}  valid loss {:.4f} ppl {:.2f}{}  lr {:.3g}  {} tok/s  "
          "{}{}\n",
          epoch, s.epochs, r.loss, vl.loss, vl.perplexity,
          n_decode > 0 ? fmt::format("  BLEU {:.2f}  exact {:.1f}%", ds.bleu().score,
                                     100 * ds.match.exact_match())
                       : "",
          lr, format_count(r.tokens / std::max(r.seconds, 1e-9)), format_duration(elapsed()),
          improved ? "  (best, saved)" : "");
    std::fflush(stdout);
    if (r.stopped) {
      if (verbose)
        fmt::print("time limit of {} reached during epoch {}\n", format_duration(limit), epoch);
      break;
    }
  }

  // The best model on the test split.
  SavedModel best_model = load_model(run.model_path());
  Seq2Seq& bm = *best_model.model;
  LossResult tl = evaluate_loss(bm, test, s.batch_size);
  nlohmann::json result = {
      {"test_loss", tl.loss}, {"test_ppl", tl.perplexity}, {"train_seconds", elapsed()}};
  // Greedy and beam scores of `m` on the test split, printed and kept in result.json under
  // `prefix` + "greedy_bleu", ...
  const auto score_test = [&](Seq2Seq& m, const std::string& prefix) {
    DecodeScores g = score(translate(m, test, s.batch_size, greedy), test, data.splits.test,
                           tgt_vocab, data.preprocess);
    fmt::print("  greedy:  {}\n", g.summary());
    const auto keep = [&](const std::string& kind, const DecodeScores& d) {
      result[prefix + kind + "_bleu"] = d.bleu().score;
      result[prefix + kind + "_bleu_lc"] = d.field.bleu_lc.score;
      result[prefix + kind + "_chrf"] = d.field.chrf.score;
      result[prefix + kind + "_exact"] = d.match.exact_match();
      result[prefix + kind + "_token_acc"] = d.match.token_accuracy();
    };
    keep("greedy", g);
    if (s.test_beam > 1) {
      DecodeOptions beam;
      beam.beam = s.test_beam;
      DecodeScores b = score(translate(m, test, s.batch_size, beam), test, data.splits.test,
                             tgt_vocab, data.preprocess);
      fmt::print("  beam {}:  {}\n", s.test_beam, b.summary());
      keep("beam", b);
      result["beam"] = s.test_beam;
    }
    result["bleu_signature"] = g.field.bleu_signature;
    result["chrf_signature"] = g.field.chrf_signature;
    return g;
  };
  fmt::print("test (best model, epoch {}): loss {:.4f} ppl {:.2f}\n", best_model.metadata["epoch"],
             tl.loss, tl.perplexity);
  const DecodeScores g = score_test(bm, "");
  fmt::print("  (sacreBLEU on the detokenized text: BLEU {}; chrF {})\n", g.field.bleu_signature,
             g.field.chrf_signature);
  if (bm.config().attention != nn::AttentionKind::none && !data.splits.test.empty() &&
      !data.splits.test[0].align.empty()) {
    AlignmentCounts ac;
    auto att = reference_attention(bm, test, s.batch_size);
    for (size_t i = 0; i < test.size(); ++i)
      ac.add(att[i], static_cast<int64_t>(test[i].src.size()), data.splits.test[i].align);
    fmt::print(
        "  alignment: argmax of attention = true source position for {:.2f}% of {} "
        "target tokens\n",
        100 * ac.rate(), ac.positions);
    result["alignment_agreement"] = ac.rate();
  }
  if (s.average_last > 0) {
    auto kept = run.epoch_models();
    std::erase_if(kept, [&](const auto& e) { return e.first > trained_epochs; });
    if (static_cast<int64_t>(kept.size()) > s.average_last)
      kept.erase(kept.begin(), kept.end() - s.average_last);
    std::vector<std::string> paths;
    std::string epochs;
    for (const auto& [e, path] : kept) {
      paths.push_back(path);
      if (!epochs.empty()) epochs += ',';
      epochs += std::to_string(e);
    }
    SavedModel avg = average_models(paths);
    save_model(run.file("averaged.safetensors"), *avg.model, avg.src, avg.tgt, avg.preprocess,
               {{"averaged_epochs", epochs}});
    fmt::print("averaged model (epochs {}):\n", epochs);
    result["averaged_epochs"] = epochs;
    score_test(*avg.model, "averaged_");
  }
  run.write_result(result.dump(2));
  auto samples =
      translate(bm, std::span<const EncodedPair>(test.data(), std::min<size_t>(test.size(), 4)),
                s.batch_size, greedy);
  for (size_t i = 0; i < samples.size(); ++i) {
    fmt::print("\n  source:    {}\n", data.preprocess.detokenize_source(data.splits.test[i].src));
    fmt::print("  reference: {}\n", data.preprocess.detokenize_target(data.splits.test[i].tgt));
    fmt::print("  output:    {}\n",
               data.preprocess.detokenize_target(tgt_vocab.decode(samples[i][0].tokens)));
  }
  fmt::print("\nmodel: {}\n", run.model_path());
  return 0;
}

}  // namespace tapestry::cli
