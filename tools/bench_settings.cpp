// tapestry bench's settings: its flags, and the preset with their overrides, checked.
#include "tools/bench_settings.h"

#include <fmt/format.h>

#include <span>
#include <utility>

#include "tapestry/models/decode.h"
#include "tapestry/models/limits.h"
#include "tools/cli.h"

namespace tapestry::cli {

using namespace models;

const char* const kBenchAbout =
    "Times the model of the PyTorch reference benchmark (../shared/bench/torch_seq2seq.py) on its\n"
    "synthetic data: a GRU encoder (--bidir: two directions), s_0 = tanh(W_b h_last), Bahdanau\n"
    "attention, a GRU decoder and an output layer over s_t alone; random tokens 3..V-1 with row\n"
    "lengths uniform in [ceil(0.7 L), L], a pool of 8 batches cycled. After the warm-up it takes\n"
    "the median over iterations of a full training step (forward, backward, clipping at norm 1.0,\n"
    "Adam lr 1e-3), then of greedy decoding of a batch for T steps (decode_sent_s: every row\n"
    "runs all T steps, as in the reference; the same decoder stopping once every row has\n"
    "emitted <eos> is timed beside it), the weights packed for Tapestry's product kernel once, in\n"
    "the warm-up, as translate() packs them once for a corpus. The last line is 'RESULT {json}'\n"
    "with the reference's keys (train_tok_s counts the B*T decoder positions,\n"
    "gemm_gflop_per_step is the reference's analytic matrix-product count) and peak_rss_mb\n"
    "(getrusage).\n\n"
    "--arch transformer times torch_transformer.py's model instead, on the same batches: separate\n"
    "embeddings scaled by sqrt(d) plus sinusoidal positions, nn.Transformer's post-norm layers\n"
    "(ReLU, dropout 0.1, a final LayerNorm per stack), an output layer; Adam lr 5e-4, betas\n"
    "0.9/0.98, eps 1e-9, clipping at 1.0; greedy decoding of exactly T steps (Tapestry's decoder\n"
    "caches keys and values; the reference recomputes the prefix, and decode_gflops counts its\n"
    "work). Its RESULT has the reference's keys (model \"transformer\", src_vocab, d_model, "
    "...).\n\n"
    "train_heap_allocs_per_step counts the calls of operator new per timed training step once\n"
    "every batch of the pool has been trained on (a steady step should make none);\n"
    "train_new_blocks_per_step the tensor blocks the storage pool took from the system\n"
    "allocator; decode_heap_allocs_per_batch and decode_new_blocks_per_batch count the same\n"
    "over one steady greedy decoding call (TAPESTRY_HEAP_TRACE=1 prints each counted\n"
    "allocation's backtrace).\n\n"
    "Tapestry runs on --threads cores by training each batch as shards in parallel (and decoding\n"
    "half a batch per core), with OpenBLAS single-threaded inside each; set\n"
    "OPENBLAS_NUM_THREADS=1 as well, since OpenBLAS sizes its own pool when it loads.\n\n"
    "presets (V, E, H = A, B, S = T; warm-up, iterations):\n"
    "  tiny     32,   32,  64,  1, 10;  20, 200\n"
    "  small    1000, 64,  128, 32, 15;  5, 40\n"
    "  medium   8000, 256, 512, 64, 20;  2, 8\n"
    "presets of --arch transformer (V, d, layers enc = dec, h, f, B, S = T; warm-up, iterations):\n"
    "  tiny     32,   64,  2, 4, 128, 1,  10;  20, 200\n"
    "  small    1000, 128, 2, 4, 256, 32, 15;  5, 40\n"
    "  medium   8000, 256, 3, 8, 512, 64, 20;  2, 8\n\n"
    "examples:\n"
    "  tapestry bench --config small --threads 1\n"
    "  tapestry bench --config tiny --iters 3 --warmup 1 --decode-iters 3\n"
    "  tapestry bench --arch transformer --config medium --threads 2\n"
    "  tapestry bench --model runs/m30k --src-text train.de --tgt-text train.en --batch 128";

void BenchSettings::declare(Flags& f) {
  f.add("config", &config, "size preset; the flags below override single fields",
        bench_preset_names());
  f.add("arch", &arch,
        "rnn: torch_seq2seq.py's GRU with Bahdanau attention; transformer: torch_transformer.py's",
        {"rnn", "transformer"});
  f.add("threads", &threads, "cores Tapestry uses (0: all)", 0, 256);
  f.section("sizes (-1: the preset's)");
  f.add("vocab", &vocab, "V: source and target vocabulary, with the specials", -1, 1 << 24);
  f.add("batch", &batch, "B: sentences per batch", -1, 1 << 16);
  f.add("src-len", &src_len, "S: source length (rows are 70-100% of it)", -1, 1 << 16);
  f.add("tgt-len", &tgt_len, "T: target length with <eos>", -1, 1 << 16);
  f.add("warmup", &warmup, "untimed iterations before each timing (training and decoding)", -1,
        1 << 20);
  f.add("iters", &iters, "timed training steps", -1, 1 << 20);
  f.add("decode-iters", &decode_iters, "timed greedy decodings", -1, 1 << 20);
  f.section("sizes of --arch rnn (-1: the preset's)");
  f.add_switch("bidir", &bidir, "bidirectional encoder (D = 2H)");
  f.add("emb", &emb, "E: embedding size", -1, 1 << 16);
  f.add("hidden", &hidden, "H: encoder and decoder hidden size", -1, 1 << 16);
  f.add("attn-size", &attn, "A: attention hidden size (-1: H)", -1, 1 << 16);
  f.section("sizes of --arch transformer (-1: the preset's)");
  f.add("src-vocab", &src_vocab, "source vocabulary (-1: --vocab)", -1, 1 << 24);
  f.add("tgt-vocab", &tgt_vocab, "target vocabulary (-1: --vocab)", -1, 1 << 24);
  f.add("d-model", &d_model, "d: embedding and layer width (even, a multiple of --heads)", -1,
        1 << 16);
  f.add("heads", &heads, "h: attention heads", -1, kMaxHeads);
  f.add("ffn", &ffn, "f: the feed-forward block's inner width", -1, 1 << 18);
  f.add("enc-layers", &enc_layers, "encoder layers", -1, kMaxLayers);
  f.add("dec-layers", &dec_layers, "decoder layers", -1, kMaxLayers);
  f.add("dropout", &dropout, "dropout on embeddings, sublayers and attention weights (-1: 0.1)", -1,
        0.99);
  f.section("other");
  f.add("pool", &pool, "distinct batches, cycled", 1, 1 << 16);
  f.add("decode-shards", &decode_shards, "parts of the batch decoded in parallel", 1, 64);
  f.add("min-len-frac", &min_len_frac, "shortest row as a fraction of S and T", 0, 1);
  f.add("seed", &seed, "data and initialisation seed", 0, INT64_MAX);
  f.add("lr", &lr, "Adam learning rate (-1: the reference's, rnn 1e-3, transformer 5e-4)", -1, 1e9);
  f.add("clip", &clip, "global gradient norm clipping (0: off)", 0, 1e9);
  f.add("peak-gflops", &peak_gflops, "if given, report train_gflops as a fraction of it", 0, 1e9);
  f.add_switch("decode", &decode, "time greedy decoding");
  f.add_switch("decode-through-ops", &decode_through_ops,
               "decode every step through the ops even where the raw RNN path applies (the "
               "reference it is tested against, to time one against the other)");
  f.add_switch("phases", &phases,
               "also time forward, backward and clip+Adam separately (extra iterations)");
  f.section("a saved model on real text (tools/bench_recipe.sh)");
  f.add("model", &model,
        "time training steps of this run directory or .safetensors file instead of a preset "
        "(--batch, --pool, --warmup, --iters, --seed, --lr, --clip, --threads apply)");
  f.add("src-text", &src_text, "--model: source side of the training text, one per line");
  f.add("tgt-text", &tgt_text, "--model: target side, line-aligned");
  f.add("dump-batches", &dump_batches,
        "--model: also write the batches and Adam's settings as JSON (tools/bench_exported.py)");
}

void BenchSettings::check(const Flags& f) const {
  static const char* const rnn_only[] = {"bidir", "emb", "hidden", "attn-size"};
  static const char* const transformer_only[] = {
      "src-vocab", "tgt-vocab", "d-model", "heads", "ffn", "enc-layers", "dec-layers", "dropout"};
  for (const char* flag : transformer() ? std::span<const char* const>(rnn_only)
                                        : std::span<const char* const>(transformer_only))
    if (f.given(flag))
      throw UsageError{fmt::format("--{} applies to --arch {}, not --arch {}", flag,
                                   transformer() ? "rnn" : "transformer", arch)};
}

BenchShape BenchSettings::overridden() const {
  BenchShape s = bench_preset(config, transformer() ? Arch::transformer : Arch::rnn);
  auto over = [](int64_t& field, int64_t value) {
    if (value >= 0) field = value;
  };
  over(s.vocab, vocab), over(s.emb, emb), over(s.hidden, hidden), over(s.batch, batch);
  over(s.src_len, src_len), over(s.tgt_len, tgt_len), over(s.warmup, warmup);
  over(s.iters, iters), over(s.decode_iters, decode_iters);
  over(s.d_model, d_model), over(s.heads, heads), over(s.ffn, ffn);
  over(s.enc_layers, enc_layers), over(s.dec_layers, dec_layers);
  if (transformer()) {
    s.src_vocab = src_vocab >= 0 ? src_vocab : s.vocab;
    s.tgt_vocab = tgt_vocab >= 0 ? tgt_vocab : s.vocab;
    if (dropout >= 0) s.dropout = dropout;
  }
  s.attn = attn >= 0 ? attn : s.hidden;
  s.bidir = bidir, s.pool = pool, s.min_len_frac = min_len_frac;
  return s;
}

BenchShape BenchSettings::shape() const {
  BenchShape s = overridden();
  auto positive = [](const char* name, int64_t v) {
    if (v < 1) throw UsageError{fmt::format("--{} must be at least 1, got {}", name, v)};
  };
  if (transformer()) {
    positive("d-model", s.d_model), positive("heads", s.heads), positive("ffn", s.ffn);
    positive("enc-layers", s.enc_layers), positive("dec-layers", s.dec_layers);
    if (s.d_model % 2 != 0 || s.d_model % s.heads != 0)
      throw UsageError{fmt::format(
          "--d-model {} must be even (sinusoidal positions) and a multiple of --heads {}",
          s.d_model, s.heads)};
    using Named = std::pair<const char*, int64_t>;
    for (auto [name, v] : {Named{"src-vocab", s.src_vocab}, Named{"tgt-vocab", s.tgt_vocab}})
      if (v < 4)
        throw UsageError{
            fmt::format("--{} must be at least 4 (PAD, BOS, EOS and one word), got {}", name, v)};
  } else {
    positive("emb", s.emb), positive("hidden", s.hidden), positive("attn-size", s.attn);
  }
  positive("batch", s.batch), positive("src-len", s.src_len), positive("iters", s.iters);
  if (decode) positive("decode-iters", s.decode_iters);
  if (!transformer() && s.vocab < 4)
    throw UsageError{fmt::format("--vocab must be at least 4, got {}", s.vocab)};
  if (s.tgt_len < 2)
    throw UsageError{fmt::format("--tgt-len must be at least 2, got {}", s.tgt_len)};
  if (decode && s.src_len > kMaxSourceTokens)
    throw UsageError{fmt::format(
        "--src-len {}: decoding accepts sources of up to {} tokens (--no-decode times training "
        "alone)",
        s.src_len, kMaxSourceTokens)};
  if (decode && s.tgt_len > kMaxOutputTokens)
    throw UsageError{fmt::format(
        "--tgt-len {}: decoding stops after at most {} tokens (--no-decode times training "
        "alone)",
        s.tgt_len, kMaxOutputTokens)};
  check_memory(s);
  return s;
}

double BenchSettings::need(const BenchShape& s) {
  const models::MemoryNeed m =
      models::training_memory(bench_model_config(s, 0), s.batch, s.src_len, s.tgt_len, 4);
  // Each pooled batch: sources, targets in and out (int32) and lengths (int64).
  const double pool = static_cast<double>(s.pool) * static_cast<double>(s.batch) *
                      (4.0 * static_cast<double>(s.src_len + 2 * s.tgt_len) + 24);
  return m.total() + pool;
}

void BenchSettings::check_memory(const BenchShape& s) const {
  const double total = need(s);
  const std::string refusal = models::memory_refusal(
      total,
      "the parameters, their gradients and Adam's state, a batch's activations and the "
      "batch pool");
  if (refusal.empty()) return;
  using Size = SizeFlag<BenchSettings>;
  static constexpr Size sizes[] = {
      {"vocab", &BenchSettings::vocab},           {"src-vocab", &BenchSettings::src_vocab},
      {"tgt-vocab", &BenchSettings::tgt_vocab},   {"emb", &BenchSettings::emb},
      {"hidden", &BenchSettings::hidden},         {"attn-size", &BenchSettings::attn},
      {"d-model", &BenchSettings::d_model},       {"ffn", &BenchSettings::ffn},
      {"enc-layers", &BenchSettings::enc_layers}, {"dec-layers", &BenchSettings::dec_layers},
      {"batch", &BenchSettings::batch},           {"src-len", &BenchSettings::src_len},
      {"tgt-len", &BenchSettings::tgt_len},       {"pool", &BenchSettings::pool}};
  const Size* blamed = most_to_blame<BenchSettings>(
      *this, sizes, [](const BenchSettings& t) { return need(t.overridden()); });
  const std::string flag = blamed ? fmt::format("--{} {}", blamed->flag, this->*blamed->field)
                                  : fmt::format("--config {}", config);
  throw UsageError{fmt::format("{}: training would need {}", flag, refusal)};
}

}  // namespace tapestry::cli
