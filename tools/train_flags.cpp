// tapestry train's flags: their declarations with ranges and defaults, and the checks across
// them (one data source, the options of each kind of model, what cannot fit whatever the data).
#include <fmt/format.h>

#include <limits>
#include <span>

#include "tapestry/models/decode.h"
#include "tools/train_setup.h"

namespace tapestry::cli {

namespace {
constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
}  // namespace

void TrainSettings::declare(Flags& f) {
  f.section("data (one of --task, --data, --train-prefix)");
  f.add("task", &task, "a generated toy task", {"copy", "reverse", "sort", "dates", "grammar"});
  f.add("min-len", &min_len, "copy/reverse/sort: shortest sequence", 1, 10000);
  f.add("max-len", &max_len, "copy/reverse/sort: longest sequence", 1, 10000);
  f.add("symbols", &symbols, "copy/reverse/sort: number of distinct symbols", 2, 1000000);
  f.add("train-size", &train_size, "toy task: training pairs", 1, 100000000);
  f.add("valid-size", &valid_size, "toy task: validation pairs", 1, 100000000);
  f.add("test-size", &test_size, "toy task: test pairs", 1, 100000000);
  f.add("data", &data, "tab-separated pairs: source<TAB>target[<TAB>attribution] (Tatoeba)");
  f.add_switch("reverse", &reverse, "--data: translate the second column into the first");
  f.add_switch("tutorial-filter", &tutorial,
               "--data: the PyTorch tutorial's eng-fra preprocessing (normalise, English side "
               "starting 'i am', 'he is', ..., under 10 words)");
  f.add("valid-fraction", &valid_fraction, "--data: share of pairs held out for validation", 0, 1);
  f.add("test-fraction", &test_fraction, "--data: share of pairs held out for testing", 0, 1);
  f.add("train-prefix", &train_prefix, "parallel files PREFIX.SRC and PREFIX.TGT for training");
  f.add("valid-prefix", &valid_prefix, "validation files (with --train-prefix)");
  f.add("test-prefix", &test_prefix, "test files (with --train-prefix)");
  f.add("src", &src_lang, "source language suffix, e.g. de");
  f.add("tgt", &tgt_lang, "target language suffix, e.g. en");
  f.add_switch("lowercase", &lowercase, "lower-case the text");
  f.add_switch("split-punct", &split_punct, "split punctuation off words");
  f.add("max-tokens", &max_tokens,
        "drop training pairs longer than this many tokens on either side (0: keep all; --data: "
        "before the split, so held-out pairs too)",
        0, kBig);
  f.add("min-freq", &min_freq, "vocabulary: tokens seen fewer times become <unk>", 1, kBig);
  f.add("max-vocab", &max_vocab, "vocabulary: most frequent tokens kept (0: all)", 0, kBig);
  f.add("subword", &subword,
        "subword units by SentencePiece, trained on the training text (cased unless "
        "--lowercase; the model file keeps the segmentation)",
        {"bpe", "unigram"});
  f.add("vocab-size", &vocab_size, "--subword: pieces per vocabulary, with specials and bytes", 300,
        1000000);
  f.add_switch("joint-vocab", &joint_vocab,
               "--subword: one segmentation and vocabulary for both languages");
  f.add("subword-sample", &subword_sample,
        "--subword: resegment the training text every epoch by sampling (BPE-dropout "
        "probability, or unigram smoothing alpha; 0: off)",
        0, 1);

  f.section("model");
  f.add("arch", &arch, "architecture: RNN with attention, or the Transformer",
        {"rnn", "transformer"});
  f.add("dropout", &dropout, "dropout probability", 0, 0.95);
  f.section("model: --arch rnn");
  f.add("cell", &cell, "recurrent cell", {"rnn", "gru", "lstm"});
  f.add("attention", &attention, "attention variant",
        {"none", "bahdanau", "dot", "general", "concat", "scaled-dot", "cosine", "local-m",
         "local-p"});
  f.add("decoder", &decoder, "decoder style", {"bahdanau", "luong"});
  f.add("layers", &layers, "encoder and decoder layers", 1, 8);
  f.add_switch("bidirectional", &bidirectional, "bidirectional encoder");
  f.add("emb", &emb, "embedding size", 1, 65536);
  f.add("hidden", &hidden, "hidden size", 1, 65536);
  f.add("attn-size", &attn_size, "additive attention's hidden size (0: hidden)", 0, 65536);
  f.add("window", &window, "local attention's half width D", 1, 1000);
  f.add_switch("deep-output", &deep_output,
               "Bahdanau decoder: output layer reads state, context and embedding (else state)");
  f.section("model: --arch transformer");
  f.add("d-model", &d_model, "embedding and layer width d", 2, 65536);
  f.add("heads", &heads, "attention heads (d / heads each)", 1, 256);
  f.add("ffn", &ffn, "feed-forward inner width", 1, 65536);
  f.add("enc-layers", &enc_layers, "encoder layers", 1, 8);
  f.add("dec-layers", &dec_layers, "decoder layers", 1, 8);
  f.add("norm", &norm, "layer norm after each sublayer's residual (2017) or before it",
        {"post", "pre"});
  f.add("activation", &activation, "feed-forward nonlinearity", {"relu", "gelu"});
  f.add("positions", &positions, "positional encoding", {"sinusoidal", "learned"});
  f.add("max-positions", &max_positions, "learned positions: longest sentence + 1", 2, 8192);
  f.add_switch("share-embeddings", &share_embeddings,
               "the output layer's weight is the target embedding");

  f.section("training");
  f.add("epochs", &epochs, "passes over the training data", 1, 100000);
  f.add("batch-size", &batch_size, "sentence pairs per batch", 1, 100000);
  f.add("optimizer", &optimizer, "optimizer", {"adam", "adamw", "sgd"});
  f.add("lr", &lr, "learning rate", 1e-12, 100);
  f.add("weight-decay", &weight_decay, "L2 (adam, sgd) or decoupled (adamw) weight decay", 0, 10);
  f.add("adam-beta2", &adam_beta2, "adam, adamw: beta2 (a Transformer's: 0.98)", 0, 0.999999);
  f.add("adam-eps", &adam_eps, "adam, adamw: epsilon (a Transformer's: 1e-9)", 1e-15, 1);
  f.add("schedule", &schedule, "learning-rate schedule (noam: per step, warm-up then 1/sqrt)",
        {"none", "step", "plateau", "noam"});
  f.add("step-size", &step_size, "step schedule: epochs between decays", 1, 100000);
  f.add("gamma", &gamma, "step and plateau schedules: decay factor", 1e-6, 0.999999);
  f.add("patience", &patience, "plateau schedule: epochs without improvement", 0, 1000);
  f.add("warmup", &warmup, "noam schedule: steps of linear warm-up", 1, 10000000);
  f.add("label-smoothing", &label_smoothing,
        "share of the target probability spread evenly over the vocabulary", 0, 0.99);
  f.add("clip", &clip, "clip the global gradient norm to this (0: off)", 0, 1e9);
  f.add("teacher-forcing", &teacher_forcing, "probability of feeding the gold previous token", 0,
        1);
  f.add("seed", &seed, "seed for data, initialisation, dropout and batch order", 0, kBig);
  f.add("threads", &threads, "cores to use (0: all)", 0, 256);
  f.add("time-limit", &time_limit, "stop training after this many minutes (0: none)", 0, 1e6);
  f.add("average-last", &average_last,
        "keep the last N epochs' models (DIR/epochs/) and score their average "
        "(DIR/averaged.safetensors) at the end (0: off)",
        0, 1000);
  f.add("log-every", &log_every,
        "write the training loss to metrics.jsonl every this many steps (0: only per epoch)", 0,
        kBig);
  f.add_switch("detect-anomaly", &detect_anomaly,
               "stop at the first op whose value or gradient is NaN or infinite, naming it");
  f.add("valid-decode", &valid_decode,
        "validation sentences decoded each epoch for BLEU and exact match (0: none)", 0, kBig);
  f.add("test-beam", &test_beam, "beam width for the final test scores (1: greedy only)", 1, 100);

  f.section("output");
  f.add("out", &out, "run directory (default runs/<data>-<attention>)");
  f.add("resume", &resume, "continue the run in this directory from its last epoch");
  f.add_switch("quiet", &quiet, "no progress bar or per-epoch lines");
}

void TrainSettings::check(const Flags& f) const {
  const bool transformer = arch == "transformer";
  static const char* const rnn_only[] = {"cell",          "attention",   "decoder",        "layers",
                                         "emb",           "hidden",      "attn-size",      "window",
                                         "bidirectional", "deep-output", "teacher-forcing"};
  static const char* const transformer_only[] = {
      "d-model", "heads",      "ffn",       "enc-layers",    "dec-layers",
      "norm",    "activation", "positions", "max-positions", "share-embeddings"};
  for (const char* flag : transformer ? std::span<const char* const>(rnn_only)
                                      : std::span<const char* const>(transformer_only))
    if (f.given(flag))
      throw UsageError{fmt::format("--{} applies to --arch {}, not --arch {}", flag,
                                   transformer ? "rnn" : "transformer", arch)};
  if (transformer && d_model % heads != 0)
    throw UsageError{fmt::format("--d-model {} must be a multiple of --heads {}", d_model, heads)};
  if (transformer && positions == "sinusoidal" && d_model % 2 != 0)
    throw UsageError{fmt::format("--d-model {}: sinusoidal positions need an even width", d_model)};
  const int sources = !task.empty() + !data.empty() + !train_prefix.empty();
  if (sources != 1 && resume.empty())
    throw UsageError{
        "give exactly one data source: --task NAME, --data FILE or --train-prefix PREFIX"};
  if (!train_prefix.empty() && (src_lang.empty() || tgt_lang.empty()))
    throw UsageError{"--train-prefix needs --src and --tgt (the files' language suffixes)"};
  if (!train_prefix.empty() && (valid_prefix.empty() || test_prefix.empty()))
    throw UsageError{"--train-prefix needs --valid-prefix and --test-prefix"};
  if (!task.empty() && min_len > max_len)
    throw UsageError{fmt::format("--min-len {} is above --max-len {}", min_len, max_len)};
  if (tutorial && data.empty()) throw UsageError{"--tutorial-filter applies to --data files"};
  if (subword.empty()) {
    for (const char* flag : {"vocab-size", "joint-vocab", "subword-sample"})
      if (f.given(flag)) throw UsageError{fmt::format("--{} applies to --subword models", flag)};
  } else {
    if (!task.empty()) throw UsageError{"--subword applies to --data and --train-prefix corpora"};
    for (const char* flag : {"split-punct", "tutorial-filter", "min-freq", "max-vocab"})
      if (f.given(flag))
        throw UsageError{fmt::format(
            "--{} applies to word-level models; --subword segments the text itself", flag)};
  }
  if (data.empty() && (f.given("valid-fraction") || f.given("test-fraction")))
    throw UsageError{"--valid-fraction and --test-fraction apply to --data files"};
  if (valid_fraction + test_fraction >= 1)
    throw UsageError{"--valid-fraction plus --test-fraction must leave pairs for training"};
  if ((task == "copy" || task == "reverse" || task == "sort") && max_len > models::kMaxSourceTokens)
    throw UsageError{fmt::format(
        "--max-len {}: validation sentences are decoded, and decoding accepts up to {} tokens",
        max_len, models::kMaxSourceTokens)};
  // Before the data is read, with the smallest vocabularies the data could give: what the flags
  // alone make too large.
  check_training_memory(*this, -1, -1);
}

}  // namespace tapestry::cli
