// tapestry train's settings: flag declarations, data loading and the model configuration.
#include "tools/train_setup.h"

#include <fmt/format.h>

#include <limits>

#include "tapestry/models/corpus.h"
#include "tools/run_dir.h"

namespace tapestry::cli {

namespace {
constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
}

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
  f.add("max-tokens", &max_tokens, "drop pairs longer than this on either side (0: keep all)", 0,
        kBig);
  f.add("min-freq", &min_freq, "vocabulary: tokens seen fewer times become <unk>", 1, kBig);
  f.add("max-vocab", &max_vocab, "vocabulary: most frequent tokens kept (0: all)", 0, kBig);

  f.section("model");
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
  f.add("dropout", &dropout, "dropout probability", 0, 0.95);
  f.add_switch("deep-output", &deep_output,
               "Bahdanau decoder: output layer reads state, context and embedding (else state)");

  f.section("training");
  f.add("epochs", &epochs, "passes over the training data", 1, 100000);
  f.add("batch-size", &batch_size, "sentence pairs per batch", 1, 100000);
  f.add("optimizer", &optimizer, "optimizer", {"adam", "adamw", "sgd"});
  f.add("lr", &lr, "learning rate", 1e-12, 100);
  f.add("weight-decay", &weight_decay, "L2 (adam, sgd) or decoupled (adamw) weight decay", 0, 10);
  f.add("schedule", &schedule, "learning-rate schedule", {"none", "step", "plateau"});
  f.add("step-size", &step_size, "step schedule: epochs between decays", 1, 100000);
  f.add("gamma", &gamma, "step and plateau schedules: decay factor", 1e-6, 0.999999);
  f.add("patience", &patience, "plateau schedule: epochs without improvement", 0, 1000);
  f.add("clip", &clip, "clip the global gradient norm to this (0: off)", 0, 1e9);
  f.add("teacher-forcing", &teacher_forcing, "probability of feeding the gold previous token", 0,
        1);
  f.add("seed", &seed, "seed for data, initialisation, dropout and batch order", 0, kBig);
  f.add("threads", &threads, "cores to use (0: all)", 0, 256);
  f.add("time-limit", &time_limit, "stop training after this many minutes (0: none)", 0, 1e6);
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
  if (data.empty() && (f.given("valid-fraction") || f.given("test-fraction")))
    throw UsageError{"--valid-fraction and --test-fraction apply to --data files"};
  if (valid_fraction + test_fraction >= 1)
    throw UsageError{"--valid-fraction plus --test-fraction must leave pairs for training"};
}

std::string TrainSettings::data_description() const {
  if (!task.empty()) return task;
  if (!data.empty()) return data;
  return train_prefix;
}

TrainData run_data(const std::string& dir) {
  const Args args = RunDir::open(dir).read_command();
  TrainSettings s;
  Flags f("tapestry train [options]", "");
  s.declare(f);
  try {
    f.parse(args);
  } catch (const UsageError& e) {
    throw Error(fmt::format("'{}/command.json': {}", dir, e.message));
  }
  return load_train_data(s);
}

TrainData load_train_data(const TrainSettings& s) {
  using namespace models;
  TrainData d;
  if (!s.task.empty()) {
    TaskConfig tc{parse_task(s.task)};
    tc.min_len = s.min_len;
    tc.max_len = s.max_len;
    tc.vocab = s.symbols;
    tc.train = s.train_size;
    tc.valid = s.valid_size;
    tc.test = s.test_size;
    tc.seed = static_cast<uint64_t>(s.seed);
    d.splits = make_task(tc);
    if (tc.kind == TaskKind::dates) d.preprocess.mode = Preprocess::Mode::chars;
    d.description = tc.kind == TaskKind::dates || tc.kind == TaskKind::grammar
                        ? fmt::format("task {}", s.task)
                        : fmt::format("task {} (lengths {}-{}, {} symbols)", s.task, s.min_len,
                                      s.max_len, s.symbols);
    return d;
  }
  CorpusOptions o;
  o.text = {s.lowercase, s.split_punct};
  o.max_len = s.max_tokens;
  if (!s.data.empty()) {
    o.tutorial = s.tutorial;
    o.reverse = s.reverse;
    Corpus c = read_tsv(s.data, o);
    d.dropped = c.dropped;
    d.splits = split_corpus(std::move(c.pairs), s.valid_fraction, s.test_fraction,
                            static_cast<uint64_t>(s.seed));
    d.description = fmt::format("{} ({} of {} pairs kept)", s.data, c.lines - c.dropped, c.lines);
  } else {
    auto read = [&](const std::string& prefix, bool filter) {
      CorpusOptions po = o;
      if (!filter) po.max_len = 0;  // held-out sets keep every sentence
      Corpus c = read_parallel(prefix + "." + s.src_lang, prefix + "." + s.tgt_lang, po);
      d.dropped += c.dropped;
      return std::move(c.pairs);
    };
    d.splits.train = read(s.train_prefix, true);
    d.splits.valid = read(s.valid_prefix, false);
    d.splits.test = read(s.test_prefix, false);
    d.description = fmt::format("{}.{{{},{}}}", s.train_prefix, s.src_lang, s.tgt_lang);
  }
  if (s.tutorial) {
    d.preprocess.mode = Preprocess::Mode::tutorial;
  } else {
    d.preprocess.text = o.text;
  }
  return d;
}

models::Seq2SeqConfig model_config(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab) {
  models::Seq2SeqConfig c;
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.emb = s.emb;
  c.hidden = s.hidden;
  c.layers = static_cast<int>(s.layers);
  c.bidirectional = s.bidirectional;
  c.cell = nn::parse_cell(s.cell);
  c.attention = nn::parse_attention(s.attention);
  c.decoder = models::parse_decoder(s.decoder);
  c.attn_size = s.attn_size;
  c.window = s.window;
  c.dropout = s.dropout;
  c.deep_output = s.deep_output;
  c.seed = static_cast<uint64_t>(s.seed);
  return c;
}

models::TrainOptions train_options(const TrainSettings& s) {
  models::TrainOptions o;
  o.batch_size = s.batch_size;
  o.optimizer = s.optimizer;
  o.lr = s.lr;
  o.weight_decay = s.weight_decay;
  o.clip = s.clip;
  o.teacher_forcing = s.teacher_forcing;
  o.schedule = s.schedule;
  o.step_size = static_cast<int>(s.step_size);
  o.gamma = s.gamma;
  o.patience = static_cast<int>(s.patience);
  o.seed = static_cast<uint64_t>(s.seed);
  o.detect_anomaly = s.detect_anomaly;
  return o;
}

}  // namespace tapestry::cli
