// Greedy and beam search over a batch, with no tape recording; both rank a step's tokens by the
// same log-softmax with the same tie-break (lower id first), so beam 1 is greedy exactly.
#include "tapestry/models/decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "tapestry/core/packed.h"
#include "tapestry/core/parallel.h"
#include "tapestry/models/limits.h"
#include "tapestry/models/stepper.h"
#include "tapestry/ops/kernels.h"

namespace tapestry::models {

namespace {

// Switches a module to eval mode for a scope and restores its mode after.
class EvalScope {
 public:
  explicit EvalScope(nn::Module& m) : m_(m), was_training_(m.training()) { m.eval(); }
  ~EvalScope() { m_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  nn::Module& m_;
  bool was_training_;
};

void check_options(const DecodeOptions& o) {
  if (o.beam < 1) throw ValueError(fmt::format("decode: beam must be at least 1, got {}", o.beam));
  if (o.nbest < 1 || o.nbest > o.beam)
    throw ValueError(fmt::format("decode: nbest must be between 1 and the beam width {}, got {}",
                                 o.beam, o.nbest));
  if (o.shards < 1 || o.shards > 64)
    throw ValueError(fmt::format("decode: shards must be 1 to 64, got {}", o.shards));
  if (!(o.max_len_ratio >= 0) || o.max_len_extra < 0 || o.max_len_ratio * 1000 + 1 <= 0)
    throw ValueError(fmt::format("decode: max length ratio {} and extra {} must not be negative",
                                 o.max_len_ratio, o.max_len_extra));
}

double normalised(double log_prob, int64_t steps, double alpha) {
  return alpha == 0 ? log_prob
                    : log_prob / std::pow(static_cast<double>(std::max<int64_t>(steps, 1)), alpha);
}

// One step's log-probabilities, (B,V) row-major, in the model's dtype T.
template <class T>
struct LogProbs {
  std::vector<T> lp;
  int64_t v = 0;
  double at(int64_t r, int64_t j) const { return lp[static_cast<size_t>(r * v + j)]; }
};

// Over the tokens a translation may hold: <pad> and <bos> are never outputs, so they are left out
// of the softmax (their log-probability is exactly -inf).
static_assert(Vocab::kPad < Vocab::kEos && Vocab::kBos < Vocab::kEos);

// max_j z_j and log sum_j e^(z_j - max) over the output tokens j >= <eos>, in the lanes of
// ops/kernels.h (vectorised, added in a fixed order: the result depends on nothing but z).
template <class T>
struct RowNorm {
  T max, log_sum;
};
template <class T>
RowNorm<T> row_norm(const T* z, int64_t v) {
  const T* x = z + Vocab::kEos;
  const int64_t n = v - Vocab::kEos;
  const T m = ops::detail::max_value(x, n);
  return {m, std::log1p(ops::detail::softmax_rest(x, n, m))};
}

// Row log-softmax: out_j = (z_j - max) - log_sum, -inf for <pad> and <bos>.
template <class T>
void row_log_softmax(const T* z, int64_t v, T* out) {
  const RowNorm<T> norm = row_norm(z, v);
  for (int64_t j = 0; j < v; ++j) out[j] = (z[j] - norm.max) - norm.log_sum;
  out[Vocab::kPad] = out[Vocab::kBos] = -std::numeric_limits<T>::infinity();
}

// The token row_log_softmax ranks first (the highest log-probability, the lowest id among
// equals) and its log-probability, without writing the row: the greedy step. The highest
// log-probability is (max - max) - log_sum = -log_sum; the first token whose (z_j - max) -
// log_sum rounds to it is the one a scan of the whole row picks, so greedy and beam 1 agree bit
// for bit.
template <class T>
std::pair<int64_t, T> best_token(const T* z, int64_t v) {
  const RowNorm<T> norm = row_norm(z, v);
  const T top = -norm.log_sum;
  int64_t j = Vocab::kEos;
  while (j < v - 1 && (z[j] - norm.max) - norm.log_sum != top) ++j;
  return {j, top};
}

// log p(y_t = j) for every row and token, from the step's logits z (B,V).
template <class T>
void step_log_probs(const Var& z, LogProbs<T>& out) {
  const int64_t b = z.dim(0), v = z.dim(1);
  out.v = v;
  out.lp.resize(static_cast<size_t>(b * v));
  const T* pz = z.value().data<T>();
  for (int64_t r = 0; r < b; ++r) row_log_softmax(pz + r * v, v, out.lp.data() + r * v);
}

// Appends row r of the step's weights (its first s entries) to a hypothesis' attention.
void append_weights(std::vector<float>& out, const Var& weights, int64_t r, int64_t s) {
  if (!weights.value().defined()) return;
  const int64_t cols = weights.dim(1);
  dispatch(weights.dtype(), [&](auto tag) {
    const auto* row = weights.value().data<decltype(tag)>() + r * cols;
    for (int64_t j = 0; j < s; ++j) out.push_back(static_cast<float>(row[j]));
  });
}

}  // namespace

int64_t max_decode_steps(const DecodeOptions& o, int64_t s) {
  // In double: a ratio of 1000 and a long source must not overflow before the bound applies.
  const double steps =
      std::ceil(o.max_len_ratio * static_cast<double>(s)) + static_cast<double>(o.max_len_extra);
  return steps >= static_cast<double>(kMaxOutputTokens) ? kMaxOutputTokens
                                                        : static_cast<int64_t>(steps);
}

bool beam_settled(const std::vector<double>& finished, const std::vector<double>& alive,
                  int64_t k) {
  if (alive.empty()) return true;
  if (static_cast<int64_t>(finished.size()) < k) return false;
  const double kth = *std::min_element(finished.begin(), finished.end());
  return *std::max_element(alive.begin(), alive.end()) <= kth;
}

int64_t max_decode_steps(const Seq2SeqConfig& c, const DecodeOptions& o, int64_t s) {
  return std::min(max_decode_steps(o, s), c.position_limit());
}

double decode_memory_bound(const Seq2SeqConfig& c, int64_t rows, int64_t src_len,
                           const DecodeOptions& o) {
  const double b = static_cast<double>(rows), k = static_cast<double>(o.beam),
               s = static_cast<double>(src_len), v = static_cast<double>(c.tgt_vocab),
               steps = static_cast<double>(max_decode_steps(c, o, src_len));
  const double a = static_cast<double>(c.attn_size > 0 ? c.attn_size : c.hidden);
  const double shards =
      static_cast<double>(std::min<int64_t>(o.shards, std::max<int64_t>(rows, 1)));
  // The hypotheses (one a sentence for greedy; for a beam up to k alive and k finished), each
  // with steps x S attention weights.
  const double hypotheses = o.beam > 1 ? 2 * k : 1;
  const double attention = b * hypotheses * steps * s * sizeof(float);
  // Each step: (B k, V) log-probabilities (float64 at most), and per shard one sentence's k V
  // candidates (a double and two int64).
  const double scores = b * k * v * 8 + (o.beam > 1 ? shards * k * v * 24 : 0);
  // The encoder's states and the attention's precomputed keys, copied for each of the k rows.
  double memory = b * k * s * (static_cast<double>(c.key_size()) + a) * 8;
  if (c.transformer())  // per decoder layer, the self-attention's keys and values for every step
                        // and the memory's for every source position
    memory = b * k * static_cast<double>(c.dec_layers) * 2 * (steps + s) *
             static_cast<double>(c.d_model) * 8;
  return attention + scores + memory;
}

namespace {

// One shard's buffers in a DecodeWorkspace.
struct GreedyShard {
  Tape tape;   // records nothing: decoding runs under NoGrad
  Batch part;  // the shard's rows of the batch
  std::vector<int64_t> limit;
  std::vector<uint8_t> done;
  std::vector<int32_t> y;
  std::unique_ptr<Stepper> stepper;
  // The model `stepper` was made for, and its Transformer (null for an RNN): a model made where
  // another was freed gets a new stepper too.
  const void* model = nullptr;
  const void* transformer = nullptr;
  bool through_ops = false;
};

template <class T>
void greedy_shard(Seq2Seq& model, const Batch& batch, const DecodeOptions& options,
                  WeightPacks& packs, GreedyShard& ws, std::span<Hypothesis> hyps) {
  Tape& tape = ws.tape;
  tape.clear();
  NoGrad no_grad(tape);
  tape.set_weight_packs(&packs);
  const int64_t b = batch.size;
  ws.limit.resize(static_cast<size_t>(b));
  int64_t longest = 0, open = b;
  for (int64_t r = 0; r < b; ++r) {
    Hypothesis& h = hyps[r];
    h.tokens.clear();
    h.attention.clear();
    h.finished = false;
    h.log_prob = h.score = 0;
    h.src_len = batch.src_lengths[r];
    ws.limit[r] = max_decode_steps(model.config(), options, batch.src_lengths[r]);
    longest = std::max(longest, ws.limit[r]);
  }
  const void* transformer = model.is_transformer() ? &model.transformer() : nullptr;
  if (ws.model != &model || ws.transformer != transformer ||
      ws.through_ops != options.through_ops) {
    ws.stepper = make_stepper(model, tape, options.through_ops);
    ws.model = &model;
    ws.transformer = transformer;
    ws.through_ops = options.through_ops;
  }
  Stepper& stepper = *ws.stepper;
  stepper.start(batch, {}, longest);
  ws.done.assign(static_cast<size_t>(b), 0);
  ws.y.assign(static_cast<size_t>(b), Vocab::kBos);
  for (int64_t t = 0; t < longest && (open > 0 || !options.early_exit); ++t) {
    Var weights;
    const Var z = stepper.step(ws.y, t, weights);
    const int64_t v = z.dim(1);
    for (int64_t r = 0; r < b; ++r) {
      const auto [best, log_prob] = best_token(z.value().data<T>() + r * v, v);
      ws.y[r] = static_cast<int32_t>(best);
      if (ws.done[r]) continue;
      Hypothesis& h = hyps[r];
      h.log_prob += log_prob;
      append_weights(h.attention, weights, r, h.src_len);
      if (best == Vocab::kEos)
        h.finished = true;
      else
        h.tokens.push_back(ws.y[r]);
      if (h.finished || h.steps() >= ws.limit[r]) {
        ws.done[r] = 1;
        --open;
      }
    }
  }
  stepper.release();
  for (auto& h : hyps) h.score = normalised(h.log_prob, h.steps(), options.length_penalty);
}

template <class T>
std::vector<std::vector<Hypothesis>> beam_shard(Seq2Seq& model, const Batch& batch,
                                                const DecodeOptions& options, WeightPacks& packs) {
  Tape tape;
  NoGrad no_grad(tape);
  tape.set_weight_packs(&packs);
  const int64_t b = batch.size, k = options.beam;
  constexpr double kDead = -std::numeric_limits<double>::infinity();

  // k rows per sentence: rows s*k .. s*k+k-1 hold sentence s's hypotheses.
  std::vector<int32_t> expand;
  for (int64_t s = 0; s < b; ++s)
    for (int64_t i = 0; i < k; ++i) expand.push_back(static_cast<int32_t>(s));

  struct Sentence {
    std::vector<Hypothesis> alive;  // k slots; dead ones have log_prob kDead
    std::vector<Hypothesis> finished;
    int64_t limit = 0;
    bool done = false;
  };
  std::vector<Sentence> sents(static_cast<size_t>(b));
  int64_t longest = 0, open = b;
  for (int64_t s = 0; s < b; ++s) {
    Sentence& st = sents[s];
    st.limit = max_decode_steps(model.config(), options, batch.src_lengths[s]);
    longest = std::max(longest, st.limit);
    st.alive.resize(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      st.alive[i].src_len = batch.src_lengths[s];
      st.alive[i].log_prob = i == 0 ? 0.0 : kDead;  // one start, so the first step has no twins
    }
  }
  const std::unique_ptr<Stepper> stepper = make_stepper(model, tape, options.through_ops);
  stepper->start(batch, expand, longest);

  std::vector<int32_t> y(static_cast<size_t>(b * k), Vocab::kBos);
  std::vector<int32_t> parents(static_cast<size_t>(b * k));
  struct Candidate {
    double log_prob;
    int64_t slot, token;
  };
  std::vector<Candidate> cands;
  std::vector<double> finished_scores, alive_scores;  // a sentence's, for beam_settled
  LogProbs<T> lp;
  for (int64_t t = 0; t < longest && (open > 0 || !options.early_exit); ++t) {
    Var weights;
    step_log_probs(stepper->step(y, t, weights), lp);
    for (int64_t s = 0; s < b; ++s) {
      Sentence& st = sents[s];
      const int64_t row0 = s * k;
      if (st.done) {
        for (int64_t i = 0; i < k; ++i) parents[row0 + i] = static_cast<int32_t>(row0);
        continue;
      }
      cands.clear();
      for (int64_t i = 0; i < k; ++i) {
        if (st.alive[i].log_prob == kDead) continue;
        for (int64_t j = 0; j < lp.v; ++j)
          cands.push_back({st.alive[i].log_prob + lp.at(row0 + i, j), i, j});
      }
      // The best 2k: enough to fill k slots even if k of them end the sentence.
      const auto top = std::min<size_t>(cands.size(), static_cast<size_t>(2 * k));
      std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(top),
                        cands.end(), [](const Candidate& a, const Candidate& c) {
                          if (a.log_prob != c.log_prob) return a.log_prob > c.log_prob;
                          if (a.slot != c.slot) return a.slot < c.slot;
                          return a.token < c.token;
                        });
      std::vector<Hypothesis> next;
      std::vector<int32_t> next_parent;
      for (size_t c = 0; c < top && static_cast<int64_t>(next.size()) < k; ++c) {
        const Candidate& cd = cands[c];
        Hypothesis h = st.alive[cd.slot];
        h.log_prob = cd.log_prob;
        append_weights(h.attention, weights, row0 + cd.slot, h.src_len);
        if (cd.token == Vocab::kEos) {
          if (static_cast<int64_t>(c) >= k) continue;  // only the top k may end here
          h.finished = true;
          h.score = normalised(h.log_prob, h.steps(), options.length_penalty);
          st.finished.push_back(std::move(h));
          continue;
        }
        h.tokens.push_back(static_cast<int32_t>(cd.token));
        next.push_back(std::move(h));
        next_parent.push_back(static_cast<int32_t>(row0 + cd.slot));
      }
      // A hypothesis at the length limit is finished as it stands.
      if (!next.empty() && next[0].steps() >= st.limit) {
        for (auto& h : next) {
          h.score = normalised(h.log_prob, h.steps(), options.length_penalty);
          st.finished.push_back(std::move(h));
        }
        next.clear();
      }
      // Only the k best finished hypotheses can be returned: keep those (stable: among equal
      // scores the one finished first); beam_settled says whether the sentence is done.
      auto by_score = [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; };
      std::stable_sort(st.finished.begin(), st.finished.end(), by_score);
      if (static_cast<int64_t>(st.finished.size()) > k) st.finished.resize(static_cast<size_t>(k));
      finished_scores.clear();
      alive_scores.clear();
      for (const auto& h : st.finished) finished_scores.push_back(h.score);
      for (const auto& h : next)
        alive_scores.push_back(normalised(h.log_prob, h.steps(), options.length_penalty));
      if (beam_settled(finished_scores, alive_scores, k)) {
        st.done = true;
        --open;
      }
      for (int64_t i = 0; i < k; ++i) {
        const bool live = !st.done && i < static_cast<int64_t>(next.size());
        if (live) {
          st.alive[i] = std::move(next[i]);
          parents[row0 + i] = next_parent[i];
          y[row0 + i] = st.alive[i].tokens.back();
        } else {
          st.alive[i].log_prob = kDead;
          parents[row0 + i] = static_cast<int32_t>(row0);
          y[row0 + i] = Vocab::kPad;
        }
      }
    }
    // Each row continues from its parent's state.
    stepper->select_rows(parents);
  }

  std::vector<std::vector<Hypothesis>> out;
  for (auto& st : sents) {
    std::stable_sort(st.finished.begin(), st.finished.end(),
                     [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; });
    if (static_cast<int64_t>(st.finished.size()) > options.nbest)
      st.finished.resize(static_cast<size_t>(options.nbest));
    out.push_back(std::move(st.finished));
  }
  return out;
}

// The checks every decoding call makes before it starts (ValueError).
void check_call(const Seq2Seq& model, const Batch& batch, const DecodeOptions& options) {
  check_options(options);
  for (int64_t r = 0; r < batch.size; ++r)
    if (batch.src_lengths[r] > kMaxSourceTokens)
      throw ValueError(
          fmt::format("decode: a source of {} tokens (batch row {}) is longer than "
                      "the {} decoding accepts",
                      batch.src_lengths[r], r, kMaxSourceTokens));
  const std::string refusal = memory_refusal(
      decode_memory_bound(model.config(), batch.size, batch.src_len, options),
      "the hypotheses' attention, the beam's scores, the encoder states for every beam row");
  if (!refusal.empty())
    throw ValueError(fmt::format(
        "decode: beam {} over {} sentences of up to {} tokens would need {}; decode fewer "
        "sentences at once or use a narrower beam",
        options.beam, batch.size, batch.src_len, refusal));
}

// Decodes the batch's rows in options.shards contiguous parts, in parallel, concatenated.
template <class F>
std::vector<std::vector<Hypothesis>> sharded(Seq2Seq& model, const Batch& batch,
                                             const DecodeOptions& options, F shard) {
  check_call(model, batch, options);
  EvalScope eval(model);
  // The weights stay unchanged for the whole call: their packs are made once, by whichever shard
  // first needs each, and shared (or kept from earlier calls, in options.packs).
  WeightPacks own;
  WeightPacks& packs = options.packs ? *options.packs : own;
  const auto shards = static_cast<int>(std::min<int64_t>(options.shards, batch.size));
  if (shards <= 1) return shard(model, batch, options, packs);
  std::vector<Batch> parts;
  for (int k = 0; k < shards; ++k) {
    const int64_t begin = batch.size * k / shards, end = batch.size * (k + 1) / shards;
    parts.push_back(slice_rows(batch, begin, end - begin));
  }
  std::vector<std::vector<std::vector<Hypothesis>>> outs(static_cast<size_t>(shards));
  parallel_run(shards, [&](int k) { outs[k] = shard(model, parts[k], options, packs); });
  std::vector<std::vector<Hypothesis>> all;
  for (auto& o : outs)
    for (auto& h : o) all.push_back(std::move(h));
  return all;
}

}  // namespace

struct DecodeWorkspace::Impl {
  std::vector<std::unique_ptr<GreedyShard>> shards;  // pointers: a Tape does not move
};

DecodeWorkspace::DecodeWorkspace() : impl_(std::make_unique<Impl>()) {}
DecodeWorkspace::~DecodeWorkspace() = default;

void greedy_decode_into(Seq2Seq& model, const Batch& batch, const DecodeOptions& options,
                        std::vector<Hypothesis>& out) {
  check_call(model, batch, options);
  if (options.beam != 1)
    throw ValueError(fmt::format("greedy decoding: beam must be 1, got {}", options.beam));
  EvalScope eval(model);
  // The weights stay unchanged for the whole call: their packs are made once, by whichever shard
  // first needs each, and shared (or kept from earlier calls, in options.packs).
  WeightPacks own_packs;
  WeightPacks& packs = options.packs ? *options.packs : own_packs;
  std::unique_ptr<DecodeWorkspace> own_workspace;
  if (!options.workspace) own_workspace = std::make_unique<DecodeWorkspace>();
  auto& shards = (options.workspace ? *options.workspace : *own_workspace).impl().shards;
  out.resize(static_cast<size_t>(batch.size));
  const auto parts = static_cast<int>(std::min<int64_t>(options.shards, batch.size));
  while (static_cast<int>(shards.size()) < std::max(parts, 1))
    shards.push_back(std::make_unique<GreedyShard>());
  auto run = [&](const Batch& rows, GreedyShard& ws, std::span<Hypothesis> hyps) {
    if (model.dtype() == DType::f64)
      greedy_shard<double>(model, rows, options, packs, ws, hyps);
    else
      greedy_shard<float>(model, rows, options, packs, ws, hyps);
  };
  if (parts <= 1) return run(batch, *shards[0], out);
  parallel_run(parts, [&](int k) {
    const int64_t begin = batch.size * k / parts, end = batch.size * (k + 1) / parts;
    GreedyShard& ws = *shards[static_cast<size_t>(k)];
    slice_rows_into(batch, begin, end - begin, ws.part);
    run(ws.part, ws,
        std::span<Hypothesis>(out).subspan(static_cast<size_t>(begin),
                                           static_cast<size_t>(end - begin)));
  });
}

std::vector<std::vector<Hypothesis>> greedy_decode(Seq2Seq& model, const Batch& batch,
                                                   const DecodeOptions& options) {
  std::vector<Hypothesis> hyps;
  greedy_decode_into(model, batch, options, hyps);
  std::vector<std::vector<Hypothesis>> out;
  out.reserve(hyps.size());
  for (auto& h : hyps) out.push_back({std::move(h)});
  return out;
}

std::vector<std::vector<Hypothesis>> beam_decode(Seq2Seq& model, const Batch& batch,
                                                 const DecodeOptions& options) {
  if (model.dtype() == DType::f64) return sharded(model, batch, options, beam_shard<double>);
  return sharded(model, batch, options, beam_shard<float>);
}

std::vector<std::vector<Hypothesis>> decode(Seq2Seq& model, const Batch& batch,
                                            const DecodeOptions& options) {
  return options.beam == 1 ? greedy_decode(model, batch, options)
                           : beam_decode(model, batch, options);
}

}  // namespace tapestry::models
