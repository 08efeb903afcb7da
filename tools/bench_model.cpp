// `tapestry bench --model DIR`: times training steps of a saved model on batches of real text and
// writes those batches out for tools/bench_exported.py, which times the exported PyTorch model.
#include "tools/bench_model.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "tapestry/core/blas.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/file_io.h"
#include "tapestry/core/parallel.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/saved_model.h"
#include "tapestry/models/train.h"
#include "tools/cli.h"
#include "tools/median.h"
#include "tools/text_files.h"

namespace tapestry::cli {

using namespace models;

namespace {

using Clock = std::chrono::steady_clock;

// The pairs of the two files, tokenised and encoded as training reads them; a pair with an empty
// side is left out (training refuses an empty source and learns nothing from an empty target).
std::vector<EncodedPair> read_pairs(const SavedModel& m, const std::string& src_path,
                                    const std::string& tgt_path) {
  const std::vector<std::string> src = read_text_lines(src_path, true),
                                 tgt = read_text_lines(tgt_path, true);
  if (src.size() != tgt.size())
    throw Error(fmt::format("'{}' has {} lines but '{}' has {}: they must align", src_path,
                            src.size(), tgt_path, tgt.size()));
  std::vector<EncodedPair> pairs;
  for (size_t i = 0; i < src.size(); ++i) {
    const auto s = m.preprocess.tokenize_source(src[i]), t = m.preprocess.tokenize_target(tgt[i]);
    if (s.empty() || t.empty()) continue;
    pairs.push_back({m.src.encode(s), m.tgt.encode(t)});
  }
  return pairs;
}

}  // namespace

int bench_saved_model(const ModelBenchOptions& o) {
  if (o.src.empty() || o.tgt.empty())
    throw UsageError{"--model needs --src-text and --tgt-text (line-aligned training text)"};
  if (!o.dump_batches.empty()) check_output_file("--dump-batches", o.dump_batches);
  set_parallel_threads(static_cast<int>(o.threads));
  const std::string checkpoint = model_file(o.model);
  SavedModel m = load_model(checkpoint);
  const std::vector<EncodedPair> pairs = read_pairs(m, o.src, o.tgt);
  // Batches as training makes them (similar lengths together, shuffled by the seed); the first
  // `pool` of them are cycled.
  Rng rng(o.seed);
  const auto rows = make_batches(pairs, o.batch, &rng);
  if (rows.empty()) throw Error(fmt::format("'{}': no sentence pair to train on", o.src));
  std::vector<Batch> pool;
  nlohmann::json dump = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && static_cast<int64_t>(pool.size()) < o.pool; ++i) {
    pool.push_back(make_batch(pairs, rows[i]));
    nlohmann::json src = nlohmann::json::array(), tgt = nlohmann::json::array();
    for (int64_t r : rows[i]) {
      src.push_back(pairs[static_cast<size_t>(r)].src);
      tgt.push_back(pairs[static_cast<size_t>(r)].tgt);
    }
    dump.push_back({{"src", src}, {"tgt", tgt}});
  }

  Seq2Seq& model = *m.model;
  TrainOptions topt;
  topt.optimizer = "adam";
  topt.lr = o.lr;
  topt.clip = o.clip;
  topt.teacher_forcing = 1.0;
  const auto& c = model.config();
  if (c.transformer()) topt.adam_beta2 = 0.98, topt.adam_eps = 1e-9;
  if (!o.dump_batches.empty()) {
    const nlohmann::json out = {{"model", checkpoint},
                                {"batches", dump},
                                {"optimizer",
                                 {{"lr", topt.lr},
                                  {"betas", {0.9, topt.adam_beta2}},
                                  {"eps", topt.adam_eps},
                                  {"clip", topt.clip}}}};
    write_file_atomic(o.dump_batches, out.dump() + "\n");
  }
  Trainer trainer(model, topt);
  fmt::print(
      "# tapestry  threads={} blas_core={} kernels={}  model={} params={} batches={} of {}\n",
      parallel_threads(), blas::core_name(), cpu::capability_name(cpu::kernels().capability),
      checkpoint, model.num_parameters(), pool.size(), o.batch);
  std::fflush(stdout);
  std::vector<double> times, losses;
  for (int64_t i = 0; i < o.warmup + o.iters; ++i) {
    const Batch& batch = pool[static_cast<size_t>(i) % pool.size()];
    const auto t0 = Clock::now();
    losses.push_back(trainer.step(batch));
    if (i >= o.warmup) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  double tokens = 0;
  for (const Batch& b : pool) tokens += static_cast<double>(b.target_tokens());
  tokens /= static_cast<double>(pool.size());
  const double step = times.empty() ? 0 : median_of(times);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  fmt::print(
      "train : {:9.1f} ms/batch over {} iters | {:9.0f} real tgt tok/s | loss {:.3f} -> {:.3f}\n",
      step * 1e3, times.size(), step > 0 ? tokens / step : 0, losses.front(), losses.back());
  nlohmann::json res = {{"impl", "tapestry"},
                        {"model", checkpoint},
                        {"threads", parallel_threads()},
                        {"blas_core", blas::core_name()},
                        {"kernels", cpu::capability_name(cpu::kernels().capability)},
                        {"params", model.num_parameters()},
                        {"batch", o.batch},
                        {"pool", pool.size()},
                        {"train_ms_median", step * 1e3},
                        {"train_real_tok_s", step > 0 ? tokens / step : 0},
                        {"loss_first", losses.front()},
                        {"loss_last", losses.back()},
                        {"peak_rss_mb", static_cast<double>(u.ru_maxrss) / 1024.0}};
  fmt::print("RESULT {}\n", res.dump());
  return 0;
}

}  // namespace tapestry::cli
