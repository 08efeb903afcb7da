// tapestry bench: times a training step and greedy decoding of the PyTorch reference's model on its
// synthetic batches, and prints the reference's RESULT json (../shared/bench/torch_seq2seq.py, or
// torch_transformer.py for --arch transformer).
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <utility>

#include "tapestry/core/blas.h"
#include "tapestry/core/cpu_kernels.h"
#include "tapestry/core/memory.h"
#include "tapestry/core/packed.h"
#include "tapestry/core/parallel.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/rnn_inference.h"
#include "tapestry/models/train.h"
#include "tapestry/nn/clip.h"
#include "tools/bench_data.h"
#include "tools/bench_model.h"
#include "tools/bench_settings.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/heap_count.h"
#include "tools/median.h"

namespace tapestry::cli {

HeapCounter heap_counter;

using namespace models;

namespace {

// The reference's summarize(): median (mean of the middle two for an even count), min, p90.
struct Summary {
  double median = 0, min = 0, p90 = 0;
};

Summary summarize(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  Summary s;
  s.median = median_of(t);
  s.min = t.front();
  s.p90 = t[std::min(n - 1, static_cast<size_t>(0.9 * static_cast<double>(n)))];
  return s;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports kilobytes
}

// Trainer::step split at its phase boundaries, with its own optimizer (timing only).
struct PhaseTimes {
  double forward_ms = 0, backward_ms = 0, opt_ms = 0;
};

PhaseTimes time_phases(Seq2Seq& model, const std::vector<Batch>& pool, const BenchShape& s,
                       const TrainOptions& o) {
  std::vector<nn::Parameter*> params = model.parameters();
  nn::Adam adam(params, o.lr, 0.9, o.adam_beta2, o.adam_eps);
  const double clip = o.clip;
  Tape tape;
  std::vector<double> fwd, bwd, opt;
  model.train();
  for (int64_t i = 0; i < s.warmup + s.iters; ++i) {
    const Batch& batch = pool[static_cast<size_t>(i % s.pool)];
    auto t0 = Clock::now();
    adam.zero_grad();
    tape.clear();
    Var loss = model.loss(tape, batch);
    const double f = seconds_since(t0);
    t0 = Clock::now();
    tape.backward(loss);
    (void)loss.value().item();
    tape.clear();
    const double b = seconds_since(t0);
    t0 = Clock::now();
    // As the trainer: a step whose gradient norm is not finite is skipped.
    const double norm = nn::grad_norm(params);
    if (std::isfinite(norm)) adam.step(nn::clip_factor(norm, clip > 0 ? clip : INFINITY));
    const double o = seconds_since(t0);
    if (i >= s.warmup) fwd.push_back(f), bwd.push_back(b), opt.push_back(o);
  }
  return {median_of(fwd) * 1e3, median_of(bwd) * 1e3, median_of(opt) * 1e3};
}

// Heap allocations over a stretch of steps: operator new calls (when the program counts them,
// tools/heap_count.h) and the tensor blocks the storage pool took from the system.
struct AllocationCount {
  int64_t blocks_before = 0;
  void start() {
    blocks_before = static_cast<int64_t>(memory_stats().system_allocations);
    heap_counter.allocations = 0;
    heap_counter.counting = true;
  }
  // (operator new calls or -1 when not counted, new blocks)
  std::pair<int64_t, int64_t> stop() {
    heap_counter.counting = false;
    const int64_t heap = heap_counter.installed ? heap_counter.allocations.load() : -1;
    return {heap, static_cast<int64_t>(memory_stats().system_allocations) - blocks_before};
  }
};

}  // namespace

int cmd_bench(const Args& args) {
  BenchSettings set;
  Flags flags("tapestry bench [options]", kBenchAbout);
  set.declare(flags);
  if (!flags.parse(args)) return 0;
  if (!set.model.empty()) {
    ModelBenchOptions o;
    o.model = set.model;
    o.src = set.src_text;
    o.tgt = set.tgt_text;
    o.dump_batches = set.dump_batches;
    if (set.batch > 0) o.batch = set.batch;
    if (set.warmup >= 0) o.warmup = set.warmup;
    if (set.iters > 0) o.iters = set.iters;
    if (set.lr > 0) o.lr = set.lr;
    o.pool = set.pool;
    o.seed = static_cast<uint64_t>(set.seed);
    o.clip = set.clip;
    o.threads = set.threads;
    return bench_saved_model(o);
  }
  set.check(flags);
  const BenchShape s = set.shape();
  const bool transformer = set.transformer();
  set_parallel_threads(static_cast<int>(set.threads));

  Rng data_rng(static_cast<uint64_t>(set.seed));
  const std::vector<Batch> pool = make_bench_batches(s, data_rng);
  Seq2Seq model(bench_model_config(s, static_cast<uint64_t>(set.seed)));
  TrainOptions topt;
  topt.optimizer = "adam";
  topt.lr = set.learning_rate();
  topt.clip = set.clip;
  topt.teacher_forcing = 1.0;
  if (transformer) topt.adam_beta2 = 0.98, topt.adam_eps = 1e-9;  // torch_transformer.py's Adam
  Trainer trainer(model, topt);
  const int64_t n_params = model.num_parameters();
  const int blas_threads = blas::threads(), threads = parallel_threads();
  const std::string kernel_set(cpu::capability_name(cpu::kernels().capability));
  if (transformer)
    fmt::print(
        "# tapestry  threads={} blas_threads={} blas_core={} kernels={}  config={} Vsrc={} Vtgt={} "
        "d={} "
        "layers={}+{} heads={} ffn={} dropout={} B={} S={} T={} params={}\n",
        threads, blas_threads, blas::core_name(), kernel_set, set.config, s.source_vocab(),
        s.target_vocab(), s.d_model, s.enc_layers, s.dec_layers, s.heads, s.ffn, s.dropout, s.batch,
        s.src_len, s.tgt_len, n_params);
  else
    fmt::print(
        "# tapestry  threads={} blas_threads={} blas_core={} kernels={}  config={} V={} E={} H={} "
        "A={} B={} "
        "S={} T={} "
        "bidir={} proj=batched params={}\n",
        threads, blas_threads, blas::core_name(), kernel_set, set.config, s.vocab, s.emb, s.hidden,
        s.attn, s.batch, s.src_len, s.tgt_len, s.bidir ? "True" : "False", n_params);
  std::fflush(stdout);

  std::vector<double> losses, times;
  losses.reserve(static_cast<size_t>(s.warmup + s.iters));
  times.reserve(static_cast<size_t>(s.iters));
  int64_t skipped = 0;
  AllocationCount allocs;
  // Allocations are counted over the timed steps that follow a first pass over the pool (a batch
  // of new lengths may still grow the pools and buffers), or over the last step if there are none.
  // The count runs across the loop's own bookkeeping too, which allocates nothing (reserved above).
  const int64_t count_from = std::max(s.warmup, std::min(s.pool, s.warmup + s.iters - 1));
  for (int64_t i = 0; i < s.warmup + s.iters; ++i) {
    const Batch& batch = pool[static_cast<size_t>(i % s.pool)];
    if (i == count_from) allocs.start();
    const auto t0 = Clock::now();
    const double loss = trainer.step(batch);
    const double dt = seconds_since(t0);
    losses.push_back(loss);
    if (!std::isfinite(trainer.last_grad_norm())) ++skipped;
    if (i >= s.warmup) times.push_back(dt);
  }
  const auto [heap_allocs, new_blocks] = allocs.stop();
  const Summary tr = summarize(times);
  double real_tgt = 0, real_src = 0;
  for (const Batch& b : pool) {
    real_tgt += static_cast<double>(b.target_tokens());
    for (int64_t n : b.src_lengths) real_src += static_cast<double>(n);
  }
  real_tgt /= static_cast<double>(pool.size());
  real_src /= static_cast<double>(pool.size());
  const GemmFlops flops = train_gemm_flops(s, real_src);
  const double positions = static_cast<double>(s.batch * s.tgt_len);

  nlohmann::json res;
  res["impl"] = "tapestry";
  if (transformer) res["model"] = "transformer";
  res["config"] = set.config;
  res["threads"] = threads;
  res["blas_threads"] = blas_threads;
  res["blas_core"] = blas::core_name();
  res["kernels"] = kernel_set;
  if (transformer) {
    res["src_vocab"] = s.source_vocab();
    res["tgt_vocab"] = s.target_vocab();
    res["d_model"] = s.d_model;
    res["enc_layers"] = s.enc_layers;
    res["dec_layers"] = s.dec_layers;
    res["heads"] = s.heads;
    res["ffn"] = s.ffn;
    res["dropout"] = s.dropout;
  } else {
    res["bidir"] = s.bidir;
    res["proj"] = "batched";
    res["vocab"] = s.vocab;
    res["emb"] = s.emb;
    res["hid"] = s.hidden;
    res["attn_dim"] = s.attn;
  }
  res["batch"] = s.batch;
  res["src_len"] = s.src_len;
  res["tgt_len"] = s.tgt_len;
  res["params"] = n_params;
  res["train_ms_median"] = tr.median * 1e3;
  res["train_ms_min"] = tr.min * 1e3;
  res["train_ms_p90"] = tr.p90 * 1e3;
  res["train_tok_s"] = positions / tr.median;      // decoder positions (B*T)
  res["train_real_tok_s"] = real_tgt / tr.median;  // non-pad target tokens
  res["loss_first"] = losses.front();
  res["loss_last"] = losses.back();
  res["skipped_steps"] = skipped;
  res["gemm_gflop_per_step"] = flops.training * 1e-9;
  res["train_gflops"] = flops.training / tr.median * 1e-9;
  const double per_step = 1.0 / static_cast<double>(s.warmup + s.iters - count_from);
  if (heap_allocs >= 0)
    res["train_heap_allocs_per_step"] = static_cast<double>(heap_allocs) * per_step;
  res["train_new_blocks_per_step"] = static_cast<double>(new_blocks) * per_step;
  res["train_allocs_counted_steps"] = s.warmup + s.iters - count_from;
  fmt::print(
      "train : {:9.2f} ms/batch (min {:.2f}, p90 {:.2f}) over {} iters | {:10.0f} tgt pos/s, "
      "{:10.0f} real tgt tok/s | loss {:.3f} -> {:.3f}{}\n",
      tr.median * 1e3, tr.min * 1e3, tr.p90 * 1e3, s.iters, positions / tr.median,
      real_tgt / tr.median, losses.front(), losses.back(),
      transformer ? fmt::format(" (ln V = {:.3f})", std::log(static_cast<double>(s.target_vocab())))
                  : "");
  fmt::print(
      "        analytic GEMM work {:.3f} GFLOP/step (fwd {:.3f}) -> {:.1f} GFLOP/s achieved\n",
      flops.training * 1e-9, flops.forward * 1e-9, flops.training / tr.median * 1e-9);
  // The Transformer reference's count is of padded shapes, and Tapestry's packed loss skips the
  // padding's rows: its work is counted apart.
  const double computed =
      transformer ? transformer_train_flops(s, real_src, real_tgt).training : flops.training;
  if (transformer) {
    res["computed_gflop_per_step"] = computed * 1e-9;
    res["computed_gflops"] = computed / tr.median * 1e-9;
    fmt::print("        of which computed (padding skipped) {:.3f} GFLOP/step -> {:.1f} GFLOP/s\n",
               computed * 1e-9, computed / tr.median * 1e-9);
  }
  fmt::print(
      "        heap allocations per steady step: {} operator new, {:g} new tensor blocks (over {} "
      "steps)\n",
      heap_allocs >= 0 ? fmt::format("{:g}", static_cast<double>(heap_allocs) * per_step)
                       : std::string("(not counted)"),
      static_cast<double>(new_blocks) * per_step, s.warmup + s.iters - count_from);
  if (set.peak_gflops > 0) {
    const double frac = flops.training / tr.median * 1e-9 / set.peak_gflops;
    res["frac_of_peak"] = frac;
    fmt::print("        = {:.1f}% of {:.1f} GFLOP/s\n", 100 * frac, set.peak_gflops);
    if (transformer) {
      res["computed_frac_of_peak"] = computed / tr.median * 1e-9 / set.peak_gflops;
      fmt::print("        (computed: {:.1f}%)\n",
                 100 * computed / tr.median * 1e-9 / set.peak_gflops);
    }
  }
  std::fflush(stdout);

  if (set.decode) {
    // decode_sent_s: the reference's work, T greedy steps for every row of a batch: the library's
    // greedy_decode told to run every step (early_exit off). Beside it, the same decoder stopping
    // once every row has emitted <eos>, with the steps it actually ran.
    // The weights are packed once for every decoding call (in the warm-up), as translate() packs
    // them once for a whole corpus.
    WeightPacks packs;
    DecodeWorkspace workspace;
    std::vector<Hypothesis> hyps;
    DecodeOptions dopt;
    dopt.packs = &packs;
    dopt.workspace = &workspace;
    dopt.shards = set.decode_shards;
    dopt.through_ops = set.decode_through_ops;
    dopt.max_len_ratio = 0;
    dopt.max_len_extra = s.tgt_len;
    DecodeOptions fixed = dopt;
    fixed.early_exit = false;
    std::vector<double> fixed_times, api_times, steps;
    for (int64_t i = 0; i < s.warmup + s.decode_iters; ++i) {
      const Batch& batch = pool[static_cast<size_t>(i % s.pool)];
      auto t0 = Clock::now();
      greedy_decode_into(model, batch, fixed, hyps);
      const double fixed_s = seconds_since(t0);
      t0 = Clock::now();
      greedy_decode_into(model, batch, dopt, hyps);
      const double api = seconds_since(t0);
      int64_t run = 0;
      for (const auto& h : hyps) run = std::max(run, h.steps());
      if (i >= s.warmup)
        fixed_times.push_back(fixed_s), api_times.push_back(api),
            steps.push_back(static_cast<double>(run));
    }
    // Heap allocations of one more steady call (every shape seen in the warm-up), per batch.
    AllocationCount decode_allocs;
    decode_allocs.start();
    greedy_decode_into(model, pool[static_cast<size_t>((s.warmup + s.decode_iters) % s.pool)],
                       fixed, hyps);
    const auto [decode_heap, decode_blocks] = decode_allocs.stop();
    if (decode_heap >= 0) res["decode_heap_allocs_per_batch"] = decode_heap;
    res["decode_new_blocks_per_batch"] = decode_blocks;
    const Summary de = summarize(fixed_times), api = summarize(api_times);
    const double b = static_cast<double>(s.batch);
    const double steps_mean =
        std::accumulate(steps.begin(), steps.end(), 0.0) / static_cast<double>(steps.size());
    const bool raw = !set.decode_through_ops && rnn_inference_supported(model);
    res["decode_path"] = raw ? "raw" : "ops";
    res["decode_ms_median"] = de.median * 1e3;
    res["decode_ms_min"] = de.min * 1e3;
    res["decode_sent_s"] = b / de.median;
    res["decode_tok_s"] = positions / de.median;
    res["greedy_decode_ms_median"] = api.median * 1e3;
    res["greedy_decode_sent_s"] = b / api.median;
    res["greedy_decode_steps_min"] = *std::min_element(steps.begin(), steps.end());
    res["greedy_decode_steps_mean"] = steps_mean;
    res["greedy_decode_steps_max"] = *std::max_element(steps.begin(), steps.end());
    std::string work;
    if (transformer) {
      // The reference's count: it recomputes the whole prefix at every step; Tapestry does not.
      const double dflops = transformer_decode_gemm_flops(s);
      res["decode_gemm_gflop"] = dflops * 1e-9;
      res["decode_gflops"] = dflops / de.median * 1e-9;
      work = fmt::format("; the reference's work {:.3f} GFLOP/batch", dflops * 1e-9);
    }
    fmt::print(
        "decode: {:9.2f} ms/batch (min {:.2f}) over {} iters | {:10.1f} sent/s ({} greedy steps, "
        "batch {}, {} path{})\n",
        de.median * 1e3, de.min * 1e3, s.decode_iters, b / de.median, s.tgt_len, s.batch,
        raw ? "raw" : "ops", work);
    fmt::print(
        "        stopping at <eos>: {:.2f} ms/batch | {:.1f} sent/s, after "
        "{:.2f} steps on average (min {}, max {}) of {}\n",
        api.median * 1e3, b / api.median, steps_mean, res["greedy_decode_steps_min"].get<double>(),
        res["greedy_decode_steps_max"].get<double>(), s.tgt_len);
    fmt::print("        heap allocations per steady batch: {} operator new, {} new tensor blocks\n",
               decode_heap >= 0 ? std::to_string(decode_heap) : std::string("(not counted)"),
               decode_blocks);
  }
  if (set.phases) {
    const PhaseTimes p = time_phases(model, pool, s, topt);
    res["fwd_ms_median"] = p.forward_ms;
    res["bwd_ms_median"] = p.backward_ms;
    res["opt_ms_median"] = p.opt_ms;
    fmt::print(
        "phases: (a separate pass, medians) forward {:.2f} ms, backward {:.2f} ms, clip+Adam "
        "{:.2f} ms\n",
        p.forward_ms, p.backward_ms, p.opt_ms);
  }
  res["peak_rss_mb"] = peak_rss_mb();
  fmt::print("RESULT {}\n", res.dump());
  return 0;
}

}  // namespace tapestry::cli
