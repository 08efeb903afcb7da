// tapestry train's settings: data loading, the memory checks and the model configuration (its flags
// are declared in tools/train_flags.cpp).
#include "tools/train_setup.h"

#include <fmt/format.h>

#include <algorithm>
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

// Refuses settings whose training cannot fit in this machine's memory, before anything is
// allocated, naming the flag most to blame: the size flag whose default would shrink the need
// most (a UsageError), else the vocabularies the data gave (an Error). Vocabularies of -1: the
// least the flags allow.
void check_training_memory(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab) {
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
  check_training_memory(s, src_vocab, tgt_vocab);
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
