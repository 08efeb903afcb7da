// tapestry train's settings: flag declarations, data loading and the model configuration.
#include "tools/train_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <span>
#include <tuple>

#include "tapestry/models/corpus.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/limits.h"
#include "tapestry/models/subword.h"
#include "tapestry/nn/checkpoint.h"
#include "tools/progress.h"
#include "tools/run_dir.h"

namespace tapestry::cli {

namespace {
constexpr int64_t kBig = std::numeric_limits<int32_t>::max();

std::string with_commas(int64_t n) {
  return format_count(static_cast<double>(n));
}

// The longest sentences training will see, where the settings say: a copy, reverse or sort
// task's --max-len (its lengths are uniform up to it, so some batch reaches it). Otherwise 1: a
// corpus' --max-tokens bounds its lengths but is far above most, and batches group sentences of
// similar length, so only the parameters are counted (an estimate never too large).
int64_t longest_sentence(const TrainSettings& s) {
  if (s.task == "copy" || s.task == "reverse" || s.task == "sort") return s.max_len;
  return 1;
}

struct TrainingNeed {
  models::MemoryNeed bytes;
  std::string what;
};
// The smallest vocabulary the data could give before it is read: a copy, reverse or sort task's
// symbols and the 4 specials, else 5.
int64_t least_vocab(const TrainSettings& s) {
  return s.task == "copy" || s.task == "reverse" || s.task == "sort" ? s.symbols + 4 : 5;
}

// What training needs with these settings, in bytes, and what for. A vocabulary of -1 is the
// least the flags allow (least_vocab).
TrainingNeed training_need(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab) {
  if (src_vocab < 0) src_vocab = least_vocab(s);
  if (tgt_vocab < 0) tgt_vocab = least_vocab(s);
  const models::Seq2SeqConfig c = model_config_unchecked(s, src_vocab, tgt_vocab);
  const bool sgd = s.optimizer == "sgd";
  const int64_t len = longest_sentence(s);
  TrainingNeed n;
  n.bytes = models::training_memory(c, s.batch_size, len, len + 1, sgd ? 3 : 4);
  n.what = fmt::format(
      "{} for {} parameters, their gradients and {}, {} for a batch's activations",
      models::format_bytes(n.bytes.weights), format_count(static_cast<double>(c.parameter_count())),
      sgd ? "SGD's momentum" : "Adam's two moments", models::format_bytes(n.bytes.activations));
  return n;
}

// Refuses settings whose training cannot fit in this machine's memory, before anything is
// allocated, naming the flag most to blame: the size flag whose default would shrink the need
// most (a UsageError), else the vocabularies the data gave (an Error). Vocabularies of -1: the
// least the flags allow.
void check_memory(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab) {
  const TrainingNeed need = training_need(s, src_vocab, tgt_vocab);
  const std::string refusal = models::memory_refusal(need.bytes.total(), need.what);
  if (refusal.empty()) return;
  using Size = SizeFlag<TrainSettings>;
  static constexpr Size sizes[] = {{"hidden", &TrainSettings::hidden},
                                   {"emb", &TrainSettings::emb},
                                   {"attn-size", &TrainSettings::attn_size},
                                   {"layers", &TrainSettings::layers},
                                   {"batch-size", &TrainSettings::batch_size},
                                   {"max-len", &TrainSettings::max_len},
                                   {"symbols", &TrainSettings::symbols},
                                   {"d-model", &TrainSettings::d_model},
                                   {"ffn", &TrainSettings::ffn},
                                   {"enc-layers", &TrainSettings::enc_layers},
                                   {"dec-layers", &TrainSettings::dec_layers}};
  const Size* blamed = most_to_blame<TrainSettings>(s, sizes, [&](const TrainSettings& t) {
    return training_need(t, src_vocab, tgt_vocab).bytes.total();
  });
  if (blamed)
    throw UsageError{
        fmt::format("--{} {}: training would need {}", blamed->flag, s.*blamed->field, refusal)};
  throw Error(fmt::format(
      "vocabularies of {} source and {} target tokens: training would need {} (--max-vocab or "
      "--min-freq make them smaller)",
      with_commas(src_vocab), with_commas(tgt_vocab), refusal));
}

// Validation and test sentences are decoded after every epoch and at the end: one longer than
// decoding accepts, or decoding whose memory bound (models::decode_memory_bound, which decode
// itself refuses on) is too large, is refused when the data is loaded, not after hours of
// training.
void check_decodable(const TrainSettings& s, const TrainData& d) {
  const models::Seq2SeqConfig config = model_config_unchecked(s, 5, 5);
  const std::tuple<const char*, const std::vector<models::Example>*, int64_t> decoded[] = {
      {"validation", &d.splits.valid, 1}, {"test", &d.splits.test, s.test_beam}};
  for (const auto& [what, pairs, beam] : decoded) {
    int64_t longest = 0;
    for (const auto& e : *pairs) longest = std::max(longest, static_cast<int64_t>(e.src.size()));
    if (longest > models::kMaxSourceTokens) continue;  // named below
    models::DecodeOptions o;
    o.beam = beam;
    const int64_t rows = std::min<int64_t>(s.batch_size, static_cast<int64_t>(pairs->size()));
    const std::string refusal =
        models::memory_refusal(models::decode_memory_bound(config, rows, longest, o),
                               "the hypotheses' attention and the beam's scores");
    if (!refusal.empty())
      throw Error(fmt::format(
          "--batch-size {}{}: decoding the {} sentences (up to {} tokens) would need {}",
          s.batch_size, beam > 1 ? fmt::format(" with --test-beam {}", beam) : "", what, longest,
          refusal));
  }
  const std::pair<const char*, const std::vector<models::Example>*> held_out[] = {
      {"validation", &d.splits.valid}, {"test", &d.splits.test}};
  for (const auto& [what, pairs] : held_out)
    for (size_t i = 0; i < pairs->size(); ++i) {
      const int64_t n = static_cast<int64_t>((*pairs)[i].src.size());
      if (n <= models::kMaxSourceTokens) continue;
      const std::string why =
          fmt::format("{} tokens, more than the {} decoding accepts", n, models::kMaxSourceTokens);
      if (!s.task.empty())
        throw Error(fmt::format("--max-len {}: a {} sentence has {}", s.max_len, what, why));
      if (!s.data.empty())
        throw Error(
            fmt::format("{}: a {} pair's source has {} (--max-tokens {} or less drops such "
                        "pairs)",
                        s.data, what, why, models::kMaxSourceTokens));
      // Held-out files are read whole, one pair per line.
      const std::string& prefix =
          what == std::string("validation") ? s.valid_prefix : s.test_prefix;
      throw Error(fmt::format("{}.{}:{}: {}", prefix, s.src_lang, i + 1, why));
    }
}

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
  check_memory(*this, -1, -1);
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
  if (s.subword.empty()) return load_train_data(s);
  const models::Preprocess p = saved_preprocess(RunDir::open(dir).model_path());
  return load_train_data(s, &p);
}

models::Preprocess saved_preprocess(const std::string& model_path) {
  const auto meta = nn::read_checkpoint_metadata(model_path);
  const auto it = meta.find("preprocess");
  if (it == meta.end()) throw Error(fmt::format("'{}': no \"preprocess\" metadata", model_path));
  return models::Preprocess::from_json(it->second);
}

namespace {

// Whether a pair of src and tgt tokens is over --max-tokens on either side.
bool over_max_tokens(const TrainSettings& s, size_t src, size_t tgt) {
  return s.max_tokens > 0 &&
         (static_cast<int64_t>(src) > s.max_tokens || static_cast<int64_t>(tgt) > s.max_tokens);
}

// Trains the --subword segmentation(s) on the training pairs' raw text.
models::Preprocess train_segmentation(
    const TrainSettings& s, const std::vector<std::pair<std::string, std::string>>& text) {
  models::Preprocess p;
  p.mode = models::Preprocess::Mode::subword;
  p.text.lowercase = s.lowercase;
  models::SubwordOptions o;
  o.kind = models::parse_subword_kind(s.subword);
  o.vocab_size = s.vocab_size;
  std::vector<std::string> src, tgt;
  for (const auto& [a, b] : text) {
    src.push_back(p.subword_text(a));
    tgt.push_back(p.subword_text(b));
  }
  if (s.joint_vocab) {
    src.insert(src.end(), tgt.begin(), tgt.end());
    p.src_subword = p.tgt_subword =
        std::make_shared<const models::Subword>(models::Subword::train(src, o));
  } else {
    p.src_subword = std::make_shared<const models::Subword>(models::Subword::train(src, o));
    p.tgt_subword = std::make_shared<const models::Subword>(models::Subword::train(tgt, o));
  }
  return p;
}

// The raw lines of --subword pairs (read with CorpusOptions::raw) segmented by `p`.
void segment(std::vector<models::Example>& pairs, const models::Preprocess& p) {
  for (auto& e : pairs) {
    e.src = p.tokenize_source(e.src.front());
    e.tgt = p.tokenize_target(e.tgt.front());
  }
}

}  // namespace

std::vector<models::Example> sampled_training_pairs(const TrainSettings& s, const TrainData& d,
                                                    int64_t epoch) {
  const auto side = [&](bool target) {
    std::vector<std::string> text;
    for (const auto& pair : d.train_text) {
      const std::string& t = target ? pair.second : pair.first;
      text.push_back(d.preprocess.subword_text(t));
    }
    const models::Subword& model = target ? *d.preprocess.tgt_subword : *d.preprocess.src_subword;
    const uint64_t seed =
        static_cast<uint64_t>(s.seed) ^ (static_cast<uint64_t>(epoch * 2 + target) << 32);
    return models::sample_segmentations(model, text, s.subword_sample, seed);
  };
  const auto src = side(false), tgt = side(true);
  std::vector<models::Example> out = d.splits.train;
  for (size_t i = 0; i < out.size(); ++i) {
    if (over_max_tokens(s, src[i].size(), tgt[i].size())) continue;
    out[i].src = src[i];
    out[i].tgt = tgt[i];
  }
  return out;
}

TrainData load_train_data(const TrainSettings& s, const models::Preprocess* segmentation) {
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
    check_decodable(s, d);
    return d;
  }
  CorpusOptions o;
  o.text = {s.lowercase, s.split_punct};
  const bool subword = !s.subword.empty();
  o.raw = subword;
  // The length filter is applied here rather than by the reader, so that its count is told
  // apart from the tutorial filter's.
  o.max_len = 0;
  int64_t too_long = 0, considered = 0;
  auto drop_long = [&](std::vector<Example>& pairs) {
    considered += static_cast<int64_t>(pairs.size());
    if (s.max_tokens <= 0) return;
    const auto longer = [&](const Example& e) {
      return over_max_tokens(s, e.src.size(), e.tgt.size());
    };
    const auto kept = std::remove_if(pairs.begin(), pairs.end(), longer);
    too_long += static_cast<int64_t>(pairs.end() - kept);
    pairs.erase(kept, pairs.end());
  };
  auto dropped_note = [&](const char* what) {
    if (too_long == 0) return std::string();
    return fmt::format("; dropped {} of {} {} longer than {} tokens (--max-tokens)",
                       with_commas(too_long), with_commas(considered), what, s.max_tokens);
  };
  if (!s.data.empty()) {
    o.tutorial = s.tutorial;
    o.reverse = s.reverse;
    Corpus c = read_tsv(s.data, o);
    drop_long(c.pairs);  // before the split, as before: every split is bounded
    if (c.pairs.empty())
      throw Error(fmt::format("{}: all {} pairs are longer than --max-tokens {}", s.data,
                              with_commas(too_long), s.max_tokens));
    d.dropped = c.dropped + too_long;
    d.splits = split_corpus(std::move(c.pairs), s.valid_fraction, s.test_fraction,
                            static_cast<uint64_t>(s.seed));
    d.description =
        fmt::format("{} ({} of {} pairs kept{})", s.data, with_commas(c.lines - d.dropped),
                    with_commas(c.lines), dropped_note("pairs"));
  } else {
    auto read = [&](const std::string& prefix, bool filter) {
      Corpus c = read_parallel(prefix + "." + s.src_lang, prefix + "." + s.tgt_lang, o);
      d.dropped += c.dropped;
      if (filter) {  // held-out sets keep every sentence
        drop_long(c.pairs);
        d.dropped += too_long;
        if (c.pairs.empty())
          throw Error(fmt::format("{}.{}: all {} training pairs are longer than --max-tokens {}",
                                  prefix, s.src_lang, with_commas(too_long), s.max_tokens));
      }
      return std::move(c.pairs);
    };
    d.splits.train = read(s.train_prefix, true);
    d.splits.valid = read(s.valid_prefix, false);
    d.splits.test = read(s.test_prefix, false);
    d.description = fmt::format("{}.{{{},{}}}{}", s.train_prefix, s.src_lang, s.tgt_lang,
                                dropped_note("training pairs"));
  }
  if (s.tutorial) {
    d.preprocess.mode = Preprocess::Mode::tutorial;
  } else {
    d.preprocess.text = o.text;
  }
  if (subword) {
    for (const auto& e : d.splits.train) d.train_text.emplace_back(e.src.front(), e.tgt.front());
    d.preprocess = segmentation ? *segmentation : train_segmentation(s, d.train_text);
    segment(d.splits.train, d.preprocess);
    segment(d.splits.valid, d.preprocess);
    segment(d.splits.test, d.preprocess);
    // The length filter, which saw one token per line while the text was raw, now counts pieces:
    // training pairs only (held-out sentences are all scored), raw text kept in step.
    size_t kept = 0;
    const int64_t before = static_cast<int64_t>(d.splits.train.size());
    for (size_t i = 0; i < d.splits.train.size(); ++i) {
      const Example& e = d.splits.train[i];
      if (over_max_tokens(s, e.src.size(), e.tgt.size())) continue;
      if (kept != i) {  // a self-move would empty the pair
        d.splits.train[kept] = std::move(d.splits.train[i]);
        d.train_text[kept] = std::move(d.train_text[i]);
      }
      ++kept;
    }
    d.splits.train.resize(kept);
    d.train_text.resize(kept);
    const int64_t removed = before - static_cast<int64_t>(kept);
    d.dropped += removed;
    if (kept == 0)
      throw Error(fmt::format("{}: all {} training pairs are longer than --max-tokens {} pieces",
                              s.data_description(), with_commas(removed), s.max_tokens));
    if (removed > 0)
      d.description += fmt::format(
          "; dropped {} of {} training pairs longer than {} pieces "
          "(--max-tokens)",
          with_commas(removed), with_commas(before), s.max_tokens);
  }
  check_decodable(s, d);
  return d;
}

models::Seq2SeqConfig model_config(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab) {
  check_memory(s, src_vocab, tgt_vocab);
  return model_config_unchecked(s, src_vocab, tgt_vocab);
}

models::Seq2SeqConfig model_config_unchecked(const TrainSettings& s, int64_t src_vocab,
                                             int64_t tgt_vocab) {
  models::Seq2SeqConfig c;
  c.arch = models::parse_arch(s.arch);
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.d_model = s.d_model;
  c.heads = s.heads;
  c.ffn = s.ffn;
  c.enc_layers = static_cast<int>(s.enc_layers);
  c.dec_layers = static_cast<int>(s.dec_layers);
  c.norm = nn::parse_norm_place(s.norm);
  c.activation = nn::parse_activation(s.activation);
  c.positions = models::parse_positions(s.positions);
  c.max_positions = s.max_positions;
  c.share_embeddings = s.share_embeddings;
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
  o.warmup = s.warmup;
  o.adam_beta2 = s.adam_beta2;
  o.adam_eps = s.adam_eps;
  o.label_smoothing = s.label_smoothing;
  o.seed = static_cast<uint64_t>(s.seed);
  o.detect_anomaly = s.detect_anomaly;
  return o;
}

}  // namespace tapestry::cli
