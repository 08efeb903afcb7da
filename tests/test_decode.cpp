// Decoding: beam 1 is greedy, outputs do not depend on the batch, attention weights are a
// distribution over the real source positions, and bad options are refused.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "tapestry/core/packed.h"
#include "tapestry/core/parallel.h"
#include "tapestry/models/decode.h"
#include "tapestry/models/rnn_inference.h"
#include "tapestry/models/seq2seq.h"

using namespace tapestry;
using namespace tapestry::models;

namespace {

Seq2SeqConfig small_config(nn::AttentionKind attention, DecoderKind decoder, nn::CellKind cell) {
  Seq2SeqConfig c;
  c.src_vocab = c.tgt_vocab = 12;
  c.emb = 8;
  c.hidden = 10;
  c.attention = attention;
  c.decoder = decoder;
  c.cell = cell;
  c.bidirectional = attention != nn::AttentionKind::dot &&
                    attention != nn::AttentionKind::scaled_dot &&
                    attention != nn::AttentionKind::cosine;
  c.seed = 3;
  return c;
}

// Sources of lengths 5, 2, 7, 1 and 4 (targets unused by decoding).
std::vector<EncodedPair> sources() {
  return {{{4, 5, 6, 7, 8}, {}},
          {{9, 4}, {}},
          {{5, 5, 6, 11, 10, 4, 7}, {}},
          {{8}, {}},
          {{11, 10, 9, 8}, {}}};
}

// The five sources as one padded batch.
Batch all_sources() {
  const std::vector<EncodedPair> pairs = sources();
  const std::vector<int64_t> rows{0, 1, 2, 3, 4};
  return make_batch(pairs, rows);
}

// Each source as a batch of its own (decoding one sentence, where the raw path uses tables).
std::vector<Batch> one_by_one() {
  const std::vector<EncodedPair> pairs = sources();
  std::vector<Batch> out;
  for (int64_t i = 0; i < static_cast<int64_t>(pairs.size()); ++i)
    out.push_back(make_batch(pairs, std::vector<int64_t>{i}));
  return out;
}

// The same hypotheses, to the bit: for every row and every hypothesis, the tokens, whether it
// finished, the log-probability, the score and the attention weights.
void check_same(const std::vector<std::vector<Hypothesis>>& a,
                const std::vector<std::vector<Hypothesis>>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t r = 0; r < a.size(); ++r) {
    REQUIRE(a[r].size() == b[r].size());
    for (size_t i = 0; i < a[r].size(); ++i) {
      CHECK(a[r][i].tokens == b[r][i].tokens);
      CHECK(a[r][i].finished == b[r][i].finished);
      CHECK(a[r][i].log_prob == b[r][i].log_prob);
      CHECK(a[r][i].score == b[r][i].score);
      CHECK(a[r][i].attention == b[r][i].attention);
    }
  }
}

// Greedy decoding of each source alone through the raw path and through the ops gives the same
// hypotheses.
// On one core and on two (where the machine has them), since with two a sentence's first
// decoder cell computes its hidden product on the other core while this one attends.
void raw_equals_ops_one_by_one(Seq2Seq& model) {
  struct DefaultThreads {
    ~DefaultThreads() { set_parallel_threads(0); }
  } restore;
  for (int threads : {1, 2}) {
    set_parallel_threads(threads);
    INFO(threads << " threads");
    for (const Batch& one : one_by_one()) {
      DecodeOptions o;
      const auto raw = decode(model, one, o);
      o.through_ops = true;
      check_same(raw, decode(model, one, o));
    }
  }
}

// Scales every parameter so the untrained model's outputs vary with the input instead of
// repeating one token.
void sharpen(Seq2Seq& m) {
  for (auto* p : m.parameters())
    dispatch(p->value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* d = p->value.data<T>();
      for (int64_t i = 0; i < p->value.numel(); ++i) d[i] *= T(3);
    });
}

}  // namespace

TEST_CASE("beam search of width 1 is greedy decoding exactly", "[decode]") {
  const Batch batch = all_sources();
  for (nn::AttentionKind kind : nn::all_attention_kinds()) {
    for (DecoderKind dec : {DecoderKind::bahdanau, DecoderKind::luong}) {
      Seq2Seq model(small_config(kind, dec, nn::CellKind::gru));
      sharpen(model);
      DecodeOptions o;
      o.beam = 1;
      auto greedy = greedy_decode(model, batch, o);
      auto beam = beam_decode(model, batch, o);
      INFO(fmt::format("{} attention, {} decoder", nn::attention_name(kind), decoder_name(dec)));
      REQUIRE(greedy.size() == 5);
      REQUIRE(beam.size() == 5);
      for (size_t r = 0; r < 5; ++r) {
        REQUIRE(beam[r].size() == 1);
        CHECK(beam[r][0].tokens == greedy[r][0].tokens);
        CHECK(beam[r][0].finished == greedy[r][0].finished);
        CHECK(beam[r][0].log_prob == greedy[r][0].log_prob);
        CHECK(beam[r][0].attention == greedy[r][0].attention);
      }
    }
  }
}

TEST_CASE("the raw RNN path decodes to the same bits as the ops", "[decode][inference]") {
  // Every cell, attention and decoder the raw path covers, 1 and 2 layers, with and without the
  // deep output: greedy (one shard and two, and each sentence alone) and beam 3 with 3-best
  // lists, tokens, log-probabilities, scores and attention weights compared for exact equality
  // with decoding through the ops.
  const Batch batch = all_sources();
  int configs = 0;
  for (nn::CellKind cell : {nn::CellKind::rnn, nn::CellKind::gru, nn::CellKind::lstm})
    for (nn::AttentionKind kind :
         {nn::AttentionKind::none, nn::AttentionKind::bahdanau, nn::AttentionKind::dot,
          nn::AttentionKind::scaled_dot, nn::AttentionKind::general})
      for (DecoderKind dec : {DecoderKind::bahdanau, DecoderKind::luong})
        for (int layers : {1, 2})
          for (bool deep : {true, false}) {
            if (dec == DecoderKind::luong && !deep) continue;  // Luong has no deep output
            Seq2SeqConfig c = small_config(kind, dec, cell);
            c.layers = layers;
            c.deep_output = deep;
            Seq2Seq model(c);
            sharpen(model);
            INFO(fmt::format("{} cell, {} attention, {} decoder, {} layers, deep output {}",
                             nn::cell_name(cell), nn::attention_name(kind), decoder_name(dec),
                             layers, deep));
            // Where the packed kernel is off (TAPESTRY_KERNELS=portable) both sides run the ops.
            REQUIRE(rnn_inference_supported(model) == packed_kernel_available());
            for (int64_t beam : {1, 3})
              for (int64_t shards : {1, 2}) {
                DecodeOptions o;
                o.beam = beam;
                o.nbest = beam;
                o.shards = shards;
                const auto raw = decode(model, batch, o);
                o.through_ops = true;
                INFO("beam " << beam << ", " << shards << " shards");
                check_same(raw, decode(model, batch, o));
              }
            raw_equals_ops_one_by_one(model);  // one sentence: the tables' path
            ++configs;
          }
  REQUIRE(configs == 3 * 5 * 3 * 2);
}

TEST_CASE("the raw RNN path equals the ops with a vocabulary too big for its tables",
          "[decode][inference]") {
  // One sentence at a time, the raw path reads the first cells' gx from tables of projected
  // embeddings, up to 2 MB each; 20,000 ids of 3H = 30 (GRU) or 4H = 40 (LSTM) floats are more,
  // so the first cells' products run instead.
  for (nn::CellKind cell : {nn::CellKind::gru, nn::CellKind::lstm})
    for (DecoderKind dec : {DecoderKind::bahdanau, DecoderKind::luong}) {
      Seq2SeqConfig c = small_config(nn::AttentionKind::bahdanau, dec, cell);
      c.src_vocab = c.tgt_vocab = 20000;
      Seq2Seq model(c);
      sharpen(model);
      INFO(fmt::format("{} cell, {} decoder", nn::cell_name(cell), decoder_name(dec)));
      raw_equals_ops_one_by_one(model);
    }
}

TEST_CASE("a decoding step computes what the teacher-forced training step computes", "[decode]") {
  // Decoder::step without teacher inputs and without recording splits the first cell's input as
  // teacher forcing does, gx = (e W_head^T + b_ih) + r W_tail^T: fed the same tokens, the logits
  // are the same bits, through the weight packs as training and decoding read them, for a batch
  // and for one sentence. Without packs (TAPESTRY_KERNELS=portable) the products are OpenBLAS's,
  // whose kernels may round a row otherwise according to the rows beside it (its Zen kernels do,
  // for a step's 5 rows against the same rows among all 4 steps' 20): there the logits are
  // compared to float rounding (4e-6 of 1 + |logit|), which still catches a step computing
  // something else.
  const bool packs_read = packed_kernel_available();
  std::vector<Batch> batches{all_sources(), one_by_one()[2]};
  const int64_t steps = 4;
  for (nn::CellKind cell : {nn::CellKind::gru, nn::CellKind::lstm})
    for (DecoderKind dec : {DecoderKind::bahdanau, DecoderKind::luong})
      for (int layers : {1, 2})
        for (const Batch& batch : batches) {
          Seq2SeqConfig c = small_config(nn::AttentionKind::bahdanau, dec, cell);
          c.layers = layers;
          Seq2Seq model(c);
          sharpen(model);
          model.eval();
          const int64_t b = batch.size;
          INFO(fmt::format("{} cell, {} decoder, {} layers, {} rows", nn::cell_name(cell),
                           decoder_name(dec), layers, b));
          std::vector<int32_t> tgt_in(static_cast<size_t>(b * steps));  // (B,T), row-major
          for (size_t i = 0; i < tgt_in.size(); ++i)
            tgt_in[i] = static_cast<int32_t>(1 + (i * 7) % 11);
          Tape tape;
          WeightPacks packs;
          if (packs_read) tape.set_weight_packs(&packs);
          NoGrad no_grad(tape);
          const nn::AttentionMemory memory = model.encode(tape, batch);
          DecoderState taught = model.decoder().start(tape, memory.summary);
          DecoderState decoded = model.decoder().start(tape, memory.summary);
          const TeacherInputs teacher =
              model.decoder().teacher_inputs(tape, tgt_in, b, steps, model.rng());
          for (int64_t t = 0; t < steps; ++t) {
            std::vector<int32_t> y(static_cast<size_t>(b));
            for (int64_t r = 0; r < b; ++r) y[r] = tgt_in[r * steps + t];
            Decoder& d = model.decoder();
            const Var with =
                d.logits(tape, d.step(tape, memory, taught, y, t, model.rng(), &teacher).features,
                         model.rng());
            const Var without = d.logits(
                tape, d.step(tape, memory, decoded, y, t, model.rng()).features, model.rng());
            REQUIRE(with.shape() == without.shape());
            const float* p = with.value().data<float>();
            const float* q = without.value().data<float>();
            // Differing bits, and differences past 4e-6 of 1 + |logit| (seen: up to 4.7e-7, a
            // few floats' rounding; a NaN on either side counts as past it).
            int64_t differ = 0, beyond = 0;
            for (int64_t i = 0; i < with.numel(); ++i) {
              differ += p[i] != q[i];
              beyond += !(std::abs(double(p[i]) - q[i]) <= 4e-6 * (1 + std::abs(double(p[i]))));
            }
            INFO("step " << t << ": " << differ << " logits differ, " << beyond << " beyond 4e-6");
            if (packs_read)
              CHECK(differ == 0);
            else
              CHECK(beyond == 0);
          }
        }
}

TEST_CASE("the raw path's tables of projected embeddings follow the weights' generation",
          "[decode][inference]") {
  // A workspace kept across calls keeps its steppers and their tables. After the weights change,
  // decoding must give what a fresh call gives: with packs kept across calls, once the caller
  // invalidates them; without, since each call's own packs have a generation never seen before.
  const std::vector<Batch> sentences = one_by_one();
  for (bool keep_packs : {true, false})
    for (DecoderKind dec : {DecoderKind::bahdanau, DecoderKind::luong}) {
      Seq2Seq model(small_config(nn::AttentionKind::bahdanau, dec, nn::CellKind::gru));
      sharpen(model);
      WeightPacks packs;
      DecodeWorkspace workspace;
      DecodeOptions kept;
      kept.packs = keep_packs ? &packs : nullptr;
      kept.workspace = &workspace;
      std::vector<std::vector<float>> before;
      for (const Batch& batch : sentences)  // the tables are made here
        before.push_back(greedy_decode(model, batch, kept)[0][0].attention);
      sharpen(model);
      packs.invalidate();
      int changed = 0;
      for (size_t i = 0; i < sentences.size(); ++i) {
        const auto fresh = greedy_decode(model, sentences[i]);
        INFO(decoder_name(dec) << (keep_packs ? ", packs kept" : ", packs per call")
                               << ", sentence " << i);
        check_same(greedy_decode(model, sentences[i], kept), fresh);
        changed += fresh[0][0].attention != before[i];
      }
      CHECK(changed > 0);  // the new weights decode differently: stale tables would show
    }
}

TEST_CASE("models the raw RNN path does not cover decode through the ops", "[decode][inference]") {
  Seq2Seq concat(small_config(nn::AttentionKind::concat, DecoderKind::bahdanau, nn::CellKind::gru));
  CHECK_FALSE(rnn_inference_supported(concat));
  Seq2Seq f64(small_config(nn::AttentionKind::bahdanau, DecoderKind::bahdanau, nn::CellKind::gru),
              DType::f64);
  CHECK_FALSE(rnn_inference_supported(f64));
  Tape tape;
  REQUIRE_THROWS_AS(make_rnn_inference_stepper(concat, tape), ValueError);
  // Decoding them still works (through the ops).
  const auto out = greedy_decode(concat, all_sources());
  CHECK(out.size() == 5);
}

TEST_CASE("a greedy step takes the most likely output token with its log-softmax probability",
          "[decode]") {
  const Batch batch = all_sources();
  for (DType dtype : {DType::f64, DType::f32}) {
    Seq2Seq model(
        small_config(nn::AttentionKind::bahdanau, DecoderKind::bahdanau, nn::CellKind::gru), dtype);
    sharpen(model);
    DecodeOptions o;
    o.max_len_ratio = 0;
    o.max_len_extra = 1;  // one step
    auto greedy = greedy_decode(model, batch, o);

    // The first step's logits by hand, and the softmax over <eos> and the words in double.
    model.eval();
    Tape tape;
    NoGrad no_grad(tape);
    nn::AttentionMemory memory = model.encode(tape, batch);
    DecoderState state = model.decoder().start(tape, memory.summary);
    std::vector<int32_t> bos(5, Vocab::kBos);
    Var z = model.decoder().logits(
        tape, model.decoder().step(tape, memory, state, bos, 0, model.rng()).features, model.rng());
    const int64_t v = z.dim(1);
    for (int64_t r = 0; r < 5; ++r) {
      int64_t best = Vocab::kEos;
      double m = -INFINITY, sum = 0;
      for (int64_t j = Vocab::kEos; j < v; ++j) {
        const double zj = z.value().at(r * v + j);
        if (zj > m) m = zj, best = j;
      }
      for (int64_t j = Vocab::kEos; j < v; ++j) sum += std::exp(z.value().at(r * v + j) - m);
      INFO(fmt::format("{} row {}", dtype_name(dtype), r));
      const Hypothesis& h = greedy[static_cast<size_t>(r)][0];
      REQUIRE(h.steps() == 1);
      CHECK((h.finished ? Vocab::kEos : h.tokens[0]) == best);
      CHECK(h.log_prob == Approx(-std::log(sum)).margin(dtype == DType::f64 ? 1e-12 : 1e-5));
    }
  }
}

TEST_CASE("weight packs kept across calls give what a fresh call gives, and follow invalidate",
          "[decode]") {
  const Batch batch = all_sources();
  Seq2Seq model(
      small_config(nn::AttentionKind::bahdanau, DecoderKind::bahdanau, nn::CellKind::gru));
  sharpen(model);
  WeightPacks packs;
  DecodeOptions kept;
  kept.packs = &packs;
  const auto fresh = greedy_decode(model, batch);
  check_same(greedy_decode(model, batch, kept), fresh);
  REQUIRE((packs.size() > 0) == packed_kernel_available());  // none for the portable kernels
  check_same(greedy_decode(model, batch, kept), fresh);      // the packs of the first call, reused
  sharpen(model);                                            // the weights change...
  packs.invalidate();                                        // ...and the caller says so
  check_same(greedy_decode(model, batch, kept), greedy_decode(model, batch));
}

TEST_CASE("decoded tokens do not depend on the batch or its padding", "[decode]") {
  auto pairs = sources();
  for (nn::AttentionKind kind : nn::all_attention_kinds()) {
    for (int64_t beam : {1, 3}) {
      Seq2Seq model(small_config(kind, DecoderKind::luong, nn::CellKind::lstm));
      sharpen(model);
      DecodeOptions o;
      o.beam = beam;
      o.nbest = beam;
      auto together = decode(model, all_sources(), o);
      for (int64_t r = 0; r < 5; ++r) {
        std::vector<int64_t> one{r};
        auto alone = decode(model, make_batch(pairs, one), o);
        INFO(fmt::format("{} attention, beam {}, row {}", nn::attention_name(kind), beam, r));
        REQUIRE(alone[0].size() == together[r].size());
        for (size_t h = 0; h < alone[0].size(); ++h) {
          CHECK(alone[0][h].tokens == together[r][h].tokens);
          CHECK(std::abs(alone[0][h].log_prob - together[r][h].log_prob) < 1e-5);
          REQUIRE(alone[0][h].attention.size() == together[r][h].attention.size());
          for (size_t i = 0; i < alone[0][h].attention.size(); ++i)
            CHECK(std::abs(alone[0][h].attention[i] - together[r][h].attention[i]) < 1e-5);
        }
      }
    }
  }
}

TEST_CASE("attention weights sum to 1 over real positions and are exactly 0 on padding",
          "[decode]") {
  const Batch batch = all_sources();
  for (nn::AttentionKind kind : nn::all_attention_kinds()) {
    if (kind == nn::AttentionKind::none) continue;
    for (DecoderKind dec : {DecoderKind::bahdanau, DecoderKind::luong}) {
      Seq2Seq model(small_config(kind, dec, nn::CellKind::gru));
      Tape tape;
      nn::AttentionMemory memory = model.encode(tape, batch);
      DecoderState state = model.decoder().start(tape, memory.summary);
      std::vector<int32_t> y(5, Vocab::kBos);
      for (int64_t t = 0; t < 6; ++t) {
        DecoderStep step = model.decoder().step(tape, memory, state, y, t, model.rng());
        const Tensor& a = step.weights.value();
        REQUIRE(a.shape() == Shape{5, batch.src_len});
        for (int64_t r = 0; r < 5; ++r) {
          double sum = 0;
          for (int64_t j = 0; j < batch.src_len; ++j) {
            const double w = a.at(r * batch.src_len + j);
            if (j >= batch.src_lengths[r]) {
              INFO(fmt::format("{} row {} padded position {}", nn::attention_name(kind), r, j));
              CHECK(w == 0.0);
            }
            CHECK(w >= 0.0);
            sum += w;
          }
          INFO(fmt::format("{} {} decoder, step {}, row {}: sum {}", nn::attention_name(kind),
                           decoder_name(dec), t, r, sum));
          if (nn::weights_sum_to_one(kind))
            CHECK(std::abs(sum - 1.0) < 1e-5);
          else
            CHECK((sum > 0.0 && sum <= 1.0 + 1e-6));
        }
        for (int64_t r = 0; r < 5; ++r) y[r] = static_cast<int32_t>(4 + (t + r) % 8);
      }
    }
  }
}

TEST_CASE("beam search returns n-best lists ranked by normalised score, within the length limit",
          "[decode]") {
  const Batch batch = all_sources();
  Seq2Seq model(
      small_config(nn::AttentionKind::bahdanau, DecoderKind::bahdanau, nn::CellKind::gru));
  sharpen(model);
  DecodeOptions o;
  o.beam = 4;
  o.nbest = 3;
  o.max_len_ratio = 1.0;
  o.max_len_extra = 2;
  auto out = beam_decode(model, batch, o);
  for (int64_t r = 0; r < 5; ++r) {
    REQUIRE(!out[r].empty());
    REQUIRE(out[r].size() <= 3);
    for (size_t h = 0; h < out[r].size(); ++h) {
      const Hypothesis& hy = out[r][h];
      CHECK(hy.steps() <= max_decode_steps(o, batch.src_lengths[r]));
      CHECK(hy.attention.size() == static_cast<size_t>(hy.steps() * batch.src_lengths[r]));
      CHECK(hy.score == Approx(hy.log_prob / hy.steps()));
      if (h > 0) CHECK(out[r][h - 1].score >= hy.score);
      for (size_t g = 0; g < h; ++g) CHECK(out[r][g].tokens != hy.tokens);
    }
  }
}

TEST_CASE("beam search stops only when no live hypothesis can beat the k-th finished one",
          "[decode]") {
  // A confident model: after one step two unlikely <eos> candidates (normalised scores -5 and
  // -6) made the top k = 2 only because every other candidate was unlikely too, while the live
  // hypothesis scores -0.1. Stopping at k finished would return a -5 translation.
  CHECK_FALSE(beam_settled({-5, -6}, {-0.1, -7}, 2));
  // Once every live hypothesis scores at most the k-th finished one, the search is over.
  CHECK(beam_settled({-0.2, -5}, {-5.5, -9}, 2));
  CHECK(beam_settled({-0.2, -5}, {-5}, 2));  // a tie does not displace the one finished first
  // Fewer than k finished: go on; nothing alive: done.
  CHECK_FALSE(beam_settled({-0.2}, {-50}, 2));
  CHECK(beam_settled({}, {}, 3));
  CHECK(beam_settled({-1}, {}, 3));
}

TEST_CASE("decoding refuses bad options", "[decode]") {
  auto pairs = sources();
  std::vector<int64_t> rows{0};
  Batch batch = make_batch(pairs, rows);
  Seq2Seq model(small_config(nn::AttentionKind::general, DecoderKind::luong, nn::CellKind::gru));
  DecodeOptions o;
  o.beam = 0;
  REQUIRE_THROWS_AS(decode(model, batch, o), ValueError);
  o.beam = 2;
  o.nbest = 3;
  REQUIRE_THROWS_WITH(decode(model, batch, o),
                      Catch::Contains("nbest must be between 1 and the beam width 2"));
  o.nbest = 1;
  o.max_len_ratio = -1;
  REQUIRE_THROWS_AS(decode(model, batch, o), ValueError);
}
