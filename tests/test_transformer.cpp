// The Transformer: masks, padding invariance, causality, the key/value cache equal to
// recomputing the prefix (one layer, and greedy and beam decoding), config and parameter names.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "tapestry/models/decode.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/nn/transformer.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using namespace tapestry::models;

namespace {

Seq2SeqConfig tiny_transformer(nn::NormPlace norm = nn::NormPlace::post) {
  Seq2SeqConfig c;
  c.arch = Arch::transformer;
  c.src_vocab = c.tgt_vocab = 12;
  c.d_model = 16;
  c.heads = 4;
  c.ffn = 24;
  c.enc_layers = c.dec_layers = 2;
  c.norm = norm;
  c.seed = 5;
  return c;
}

std::vector<EncodedPair> pairs() {
  return {{{4, 5, 6, 7, 8}, {5, 6, 7}},
          {{9, 4}, {10}},
          {{5, 5, 6, 11, 10, 4, 7}, {4, 4, 9, 10, 11}},
          {{8}, {8, 9}}};
}

Batch batch_of(const std::vector<EncodedPair>& ps) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < ps.size(); ++i) rows.push_back(static_cast<int64_t>(i));
  return make_batch(ps, rows);
}

double max_diff(const Tensor& a, const Tensor& b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a.at(i) - b.at(i)));
  return m;
}

// Row r of a (B,L,d) tensor, its first `len` positions, as a flat vector.
std::vector<double> rows_of(const Tensor& x, int64_t r, int64_t len) {
  const int64_t l = x.dim(1), d = x.dim(2);
  std::vector<double> out;
  for (int64_t i = 0; i < len * d; ++i) out.push_back(x.at(r * l * d + i));
  return out;
}

// log p(j) over the output tokens (those from <eos> on), as decoding ranks them.
std::vector<double> log_softmax_outputs(const Tensor& z, int64_t row) {
  const int64_t v = z.dim(1);
  double m = -INFINITY;
  for (int64_t j = Vocab::kEos; j < v; ++j) m = std::max(m, z.at(row * v + j));
  double s = 0;
  for (int64_t j = Vocab::kEos; j < v; ++j) s += std::exp(z.at(row * v + j) - m);
  std::vector<double> lp(static_cast<size_t>(v), -INFINITY);
  for (int64_t j = Vocab::kEos; j < v; ++j) lp[j] = z.at(row * v + j) - m - std::log(s);
  return lp;
}

// The logits (T,V) at every position of <bos> `tokens` for `src`, the whole model run over the
// whole prefix: what decoding without a cache computes.
Tensor prefix_logits(Seq2Seq& model, const std::vector<int32_t>& src,
                     const std::vector<int32_t>& tokens) {
  std::vector<EncodedPair> one{{src, tokens}};
  Batch b = batch_of(one);
  Tape tape;
  NoGrad no_grad(tape);
  Rng rng(0);
  TransformerModel& t = model.transformer();
  const auto memory = t.encode(tape, b, rng);
  const Var h = t.decode(tape, memory, b, rng);  // (1,T,d)
  return t.logits(tape, ops::reshape(h, {b.tgt_len, model.config().d_model})).value();
}

// The log-probability of `tokens` (and <eos> if finished) given `src`, by recomputation.
double score_by_recomputation(Seq2Seq& model, const std::vector<int32_t>& src,
                              const std::vector<int32_t>& tokens, bool finished) {
  const Tensor z = prefix_logits(model, src, tokens);
  double total = 0;
  const size_t steps = tokens.size() + (finished ? 1 : 0);
  for (size_t i = 0; i < steps; ++i) {
    const int32_t next = i < tokens.size() ? tokens[i] : Vocab::kEos;
    total += log_softmax_outputs(z, static_cast<int64_t>(i))[next];
  }
  return total;
}

// Greedy decoding that reruns the decoder over the whole prefix at every step (as
// torch.nn.Transformer does): the reference for the cached decoder.
std::vector<std::vector<int32_t>> greedy_by_recomputation(Seq2Seq& model,
                                                          const std::vector<EncodedPair>& ps,
                                                          int64_t steps) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : ps) {
    std::vector<int32_t> tokens;
    for (int64_t s = 0; s < steps; ++s) {
      const Tensor z = prefix_logits(model, p.src, tokens);  // (len + 1, V)
      const std::vector<double> lp = log_softmax_outputs(z, z.dim(0) - 1);
      int32_t best = Vocab::kEos;
      for (int32_t j = Vocab::kEos; j < static_cast<int32_t>(lp.size()); ++j)
        if (lp[j] > lp[best]) best = j;
      if (best == Vocab::kEos) break;
      tokens.push_back(best);
    }
    out.push_back(tokens);
  }
  return out;
}

}  // namespace

TEST_CASE("multi-head weights: a distribution over real keys, none on padding or the future",
          "[transformer]") {
  Rng rng(2);
  nn::MultiheadAttention mha(8, 2, 0.0, rng, DType::f64);
  mha.eval();
  const Tensor x = rng.uniform_tensor({2, 4, 8}, -1, 1, DType::f64);
  Tensor valid = Tensor::full({2, 4}, 1.0, DType::f64);
  valid.set(7, 0.0);  // row 1's last key is padding
  Tape tape;
  for (bool causal : {false, true}) {
    const auto o = mha.self_attention(tape, Var(x), valid, causal, rng);
    REQUIRE(o.weights.shape() == Shape{2, 2, 4, 4});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t t = 0; t < 4; ++t) {
          double sum = 0;
          for (int64_t s = 0; s < 4; ++s) {
            const double w = o.weights.value().at(((b * 2 + h) * 4 + t) * 4 + s);
            const bool masked = (b == 1 && s == 3) || (causal && s > t);
            if (masked) CHECK(w == 0.0);
            sum += w;
          }
          CHECK(sum == Approx(1.0).epsilon(1e-14));
        }
  }
}

TEST_CASE("a sentence's encoding and loss do not depend on the padding added to it",
          "[transformer]") {
  for (auto norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    Seq2Seq model(tiny_transformer(norm), DType::f64);
    model.eval();
    const std::vector<EncodedPair> ps = pairs();
    // Row 1 alone (S = 2) and inside the batch (S = 7, padded with 5 <pad>).
    Batch alone = batch_of({ps[1]});
    Batch padded = batch_of(ps);
    Tape tape;
    NoGrad no_grad(tape);
    Rng rng(0);
    TransformerModel& t = model.transformer();
    const auto m1 = t.encode(tape, alone, rng);
    const auto m2 = t.encode(tape, padded, rng);
    const auto a = rows_of(m1.states.value(), 0, 2), b = rows_of(m2.states.value(), 1, 2);
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-12));
    // The decoder's output at row 1's real target positions too.
    const Var h1 = t.decode(tape, m1, alone, rng), h2 = t.decode(tape, m2, padded, rng);
    const auto c = rows_of(h1.value(), 0, 2), d = rows_of(h2.value(), 1, 2);
    for (size_t i = 0; i < c.size(); ++i) CHECK(c[i] == Approx(d[i]).margin(1e-12));
  }
}

TEST_CASE(
    "no position attends to a later one: changing a later target token changes no earlier "
    "output",
    "[transformer]") {
  Seq2Seq model(tiny_transformer(), DType::f64);
  model.eval();
  std::vector<EncodedPair> ps{{{4, 5, 6, 7}, {5, 6, 7, 8, 9}}};
  Batch a = batch_of(ps);
  ps[0].tgt[3] = 11;  // tgt_in position 4 (after <bos>) changes
  Batch b = batch_of(ps);
  Tape tape;
  NoGrad no_grad(tape);
  Rng rng(0);
  TransformerModel& t = model.transformer();
  const auto memory = t.encode(tape, a, rng);
  const Tensor ha = t.decode(tape, memory, a, rng).value(),
               hb = t.decode(tape, memory, b, rng).value();
  const int64_t d = model.config().d_model;
  CHECK(max_diff(ha, hb, 4 * d) == 0.0);  // positions 0..3 are bit-identical
  double later = 0;
  for (int64_t i = 4 * d; i < 6 * d; ++i) later = std::max(later, std::abs(ha.at(i) - hb.at(i)));
  CHECK(later > 1e-3);  // the changed position itself does change
}

TEST_CASE("a decoder step with the key/value cache equals the whole prefix recomputed",
          "[transformer]") {
  for (auto norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    Seq2Seq model(tiny_transformer(norm), DType::f64);
    model.eval();
    const std::vector<EncodedPair> ps = pairs();
    Batch batch = batch_of(ps);
    Tape tape;
    NoGrad no_grad(tape);
    Rng rng(0);
    TransformerModel& t = model.transformer();
    const auto memory = t.encode(tape, batch, rng);
    const Tensor full = t.decode(tape, memory, batch, rng).value();  // (B,T,d)
    auto state = t.start(tape, batch, {}, batch.tgt_len);
    const int64_t b = batch.size, steps = batch.tgt_len, d = model.config().d_model;
    double worst = 0;
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> y;
      for (int64_t r = 0; r < b; ++r) y.push_back(batch.tgt_in[r * steps + s]);
      const Tensor h = t.step(tape, state, y).value();  // (B,d)
      for (int64_t r = 0; r < b; ++r) {
        if (s >= batch.tgt_lengths[r]) continue;  // padded positions differ by design
        for (int64_t i = 0; i < d; ++i)
          worst = std::max(worst, std::abs(h.at(r * d + i) - full.at((r * steps + s) * d + i)));
      }
    }
    CHECK(worst < 1e-12);
  }
}

TEST_CASE(
    "cached greedy decoding gives the tokens of recomputing the prefix, log-probabilities "
    "to 1e-5",
    "[transformer][decode]") {
  for (auto norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    Seq2Seq model(tiny_transformer(norm), DType::f32);
    for (auto* p : model.parameters())  // sharper, so outputs vary with the input
      for (int64_t i = 0; i < p->numel(); ++i) p->value.set(i, p->value.at(i) * 2);
    const std::vector<EncodedPair> ps = pairs();
    DecodeOptions o;
    o.max_len_ratio = 0;
    o.max_len_extra = 8;
    const auto hyps = decode(model, batch_of(ps), o);
    const auto reference = greedy_by_recomputation(model, ps, 8);
    int64_t tokens = 0;
    for (size_t r = 0; r < ps.size(); ++r) {
      const Hypothesis& h = hyps[r][0];
      CHECK(h.tokens == reference[r]);
      tokens += static_cast<int64_t>(h.tokens.size());
      const double score = score_by_recomputation(model, ps[r].src, h.tokens, h.finished);
      CHECK(h.log_prob == Approx(score).epsilon(1e-5));
      // The kept attention: one row per step over the real source positions, summing to 1.
      REQUIRE(static_cast<int64_t>(h.attention.size()) == h.steps() * h.src_len);
      for (int64_t s = 0; s < h.steps(); ++s) {
        double sum = 0;
        for (int64_t j = 0; j < h.src_len; ++j) sum += h.attention[s * h.src_len + j];
        CHECK(sum == Approx(1.0).epsilon(1e-5));
      }
    }
    CHECK(tokens > 8);  // not a model that ends every sentence at once
  }
}

TEST_CASE("cached beam search: every hypothesis scores what recomputing it gives",
          "[transformer][decode]") {
  Seq2Seq model(tiny_transformer(nn::NormPlace::pre), DType::f32);
  for (auto* p : model.parameters())
    for (int64_t i = 0; i < p->numel(); ++i) p->value.set(i, p->value.at(i) * 2);
  const std::vector<EncodedPair> ps = pairs();
  DecodeOptions o;
  o.beam = 4;
  o.nbest = 4;
  o.max_len_ratio = 0;
  o.max_len_extra = 6;
  const auto beams = decode(model, batch_of(ps), o);
  int64_t checked = 0;
  for (size_t r = 0; r < ps.size(); ++r)
    for (const Hypothesis& h : beams[r]) {
      CHECK(h.log_prob ==
            Approx(score_by_recomputation(model, ps[r].src, h.tokens, h.finished)).epsilon(1e-5));
      ++checked;
    }
  CHECK(checked >= 8);
  // Beam 1 is greedy, for the Transformer as for the RNN.
  DecodeOptions g = o;
  g.beam = g.nbest = 1;
  const auto greedy = decode(model, batch_of(ps), g);
  g.beam = 1;
  const auto beam1 = beam_decode(model, batch_of(ps), g);
  for (size_t r = 0; r < ps.size(); ++r) CHECK(greedy[r][0].tokens == beam1[r][0].tokens);
}

TEST_CASE("decoding with learned positions stops at the last position instead of failing",
          "[transformer][decode]") {
  Seq2SeqConfig c = tiny_transformer(nn::NormPlace::pre);
  c.positions = Positions::learned;
  c.max_positions = 8;  // the longest source (7) fits; 3 x 7 + 5 output steps would not
  Seq2Seq model(c, DType::f32);
  for (auto* p : model.parameters())
    for (int64_t i = 0; i < p->numel(); ++i) p->value.set(i, p->value.at(i) * 2);
  const std::vector<EncodedPair> ps = pairs();
  DecodeOptions o;
  o.max_len_ratio = 3;
  CHECK(max_decode_steps(c, o, 7) == 8);
  CHECK(max_decode_steps(tiny_transformer(), o, 7) == 26);  // sinusoidal: no last position
  for (int64_t beam : {1, 3}) {
    INFO("beam " << beam);
    o.beam = beam;
    const auto hyps = decode(model, batch_of(ps), o);
    int64_t at_limit = 0;
    for (const auto& h : hyps) {
      CHECK(h[0].steps() <= 8);
      at_limit += h[0].steps() == 8 && !h[0].finished;
    }
    CHECK(at_limit > 0);  // an untrained model runs on: the limit, not <eos>, ended some
  }
}

TEST_CASE("a transformer config round-trips through JSON and names its parameters as PyTorch",
          "[transformer]") {
  Seq2SeqConfig c = tiny_transformer(nn::NormPlace::pre);
  c.positions = Positions::learned;
  c.share_embeddings = true;
  c.activation = nn::Activation::gelu;
  const Seq2SeqConfig back = Seq2SeqConfig::from_json(c.to_json());
  CHECK(back.to_json() == c.to_json());
  CHECK(back.transformer());
  Seq2Seq model(c);
  const auto shapes = c.parameter_shapes();
  const auto named = model.named_parameters();
  REQUIRE(shapes.size() == named.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    CHECK(shapes[i].first == named[i].first);
    CHECK(shapes[i].second == named[i].second->shape());
  }
  CHECK(named.front().first == "src_emb.weight");
  CHECK(named[4].first == "transformer.encoder.layers.0.self_attn.in_proj_weight");
  CHECK(c.parameter_count() == model.num_parameters());
  // An RNN's config has no arch key, as before the Transformer.
  Seq2SeqConfig rnn;
  rnn.src_vocab = rnn.tgt_vocab = 9;
  CHECK(rnn.to_json().find("arch") == std::string::npos);
  CHECK_THROWS_WITH(Seq2SeqConfig::from_json(R"({"arch":"lstm"})"),
                    Catch::Contains("config.arch") && Catch::Contains("rnn, transformer"));
}

TEST_CASE("the torch_transformer.py parameter count", "[transformer]") {
  // Its README: parameters = (Vs + Vt) d + L_enc (4d^2 + 2df + f + 9d) + L_dec (8d^2 + 2df + f +
  // 15d) + 4d + d Vt + Vt; 173,856 for `tiny`, 1,048,040 for `small`, 10,106,688 for `medium`.
  auto count = [](int64_t v, int64_t d, int layers, int64_t heads, int64_t f) {
    Seq2SeqConfig c;
    c.arch = Arch::transformer;
    c.src_vocab = c.tgt_vocab = v;
    c.d_model = d;
    c.enc_layers = c.dec_layers = layers;
    c.heads = heads;
    c.ffn = f;
    return c.parameter_count();
  };
  CHECK(count(32, 64, 2, 4, 128) == 173856);
  CHECK(count(1000, 128, 2, 4, 256) == 1048040);
  CHECK(count(8000, 256, 3, 8, 512) == 10106688);
}

TEST_CASE("a packing lists the real positions and unpacking reads real rows only",
          "[transformer][packing]") {
  nn::Packing p;
  p.assign(std::vector<int64_t>{3, 1, 0, 5}, 3);  // a row without positions; one past L
  CHECK(p.b == 4);
  CHECK(p.l == 3);
  CHECK(p.rows == std::vector<int32_t>{0, 1, 2, 3, 9, 10, 11});
  CHECK(p.slots == std::vector<int32_t>{0, 1, 2, 3, 3, 3, 0, 0, 0, 4, 5, 6});
  const Tensor valid = p.valid(DType::f32);
  REQUIRE(valid.shape() == Shape{4, 3});
  const std::vector<double> expected{1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1};
  for (int64_t i = 0; i < 12; ++i) CHECK(valid.at(i) == expected[static_cast<size_t>(i)]);
  // x (B,L,w) with x[r,j,c] = 100 r + 10 j + c
  Tensor x = Tensor::empty({4, 3, 2}, DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set(i, static_cast<double>(i / 6 * 100 + i / 2 % 3 * 10 + i % 2));
  const Var packed = nn::pack(Var(x), p);
  REQUIRE(packed.shape() == Shape{7, 2});
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t c = 0; c < 2; ++c) CHECK(packed.value().at(i * 2 + c) == x.at(p.rows[i] * 2 + c));
  const Var back = nn::unpack(packed, p);
  REQUIRE(back.shape() == Shape{4, 3, 2});
  for (int64_t i = 0; i < 12; ++i)
    for (int64_t c = 0; c < 2; ++c)
      CHECK(back.value().at(i * 2 + c) == packed.value().at(p.slots[i] * 2 + c));
  // Real positions come back as they were.
  for (int32_t r : p.rows)
    for (int64_t c = 0; c < 2; ++c) CHECK(back.value().at(r * 2 + c) == x.at(r * 2 + c));
  // Reusing a packing keeps nothing of the last assignment.
  p.assign(std::vector<int64_t>{1}, 2);
  CHECK(p.rows == std::vector<int32_t>{0});
  CHECK(p.slots == std::vector<int32_t>{0, 0});
}

TEST_CASE("packing and unpacking name the shapes that do not fit", "[transformer][packing]") {
  nn::Packing p;
  p.assign(std::vector<int64_t>{2, 1}, 2);
  CHECK_THROWS_WITH(nn::pack(Var(Tensor::zeros({2, 3, 4}, DType::f64)), p),
                    Catch::Contains("pack: input (2,3,4)") && Catch::Contains("(2,2,*)"));
  CHECK_THROWS_WITH(nn::unpack(Var(Tensor::zeros({4, 4}, DType::f64)), p),
                    Catch::Contains("unpack: input (4,4)") && Catch::Contains("(3,*)"));
  // The step-by-step attention (explain's) takes padded input only.
  Rng rng(1);
  nn::MultiheadAttention mha(4, 2, 0.0, rng, DType::f64);
  Tape tape;
  const Var x(Tensor::zeros({3, 4}, DType::f64));
  CHECK_THROWS_AS(mha.self_attention(tape, x, Tensor(), false, rng, nn::AttentionPath::steps, &p),
                  ValueError);
  CHECK_THROWS_WITH(mha.self_attention(tape, Var(Tensor::zeros({4, 4}, DType::f64)), Tensor(),
                                       false, rng, nn::AttentionPath::fused, &p),
                    Catch::Contains("packed query (4,4)"));
  CHECK_THROWS_WITH(mha.forward(tape, x, x, x, Tensor(), false, rng, nn::AttentionPath::fused, &p),
                    Catch::Contains("need both packings"));
  nn::Packing empty;
  empty.assign(std::vector<int64_t>{0, 0}, 2);
  CHECK_THROWS_WITH(nn::unpack(Var(Tensor::zeros({0, 4}, DType::f64)), empty),
                    Catch::Contains("has no real positions"));
}

TEST_CASE("packed attention masks the packing's padding whatever the key mask says",
          "[transformer][packing]") {
  // The keys' padding holds copies of real rows; without a mask they would take weight.
  Rng rng(2);
  nn::MultiheadAttention mha(4, 2, 0.0, rng, DType::f64);
  nn::Packing p;
  p.assign(std::vector<int64_t>{3, 1}, 3);
  const Var x(rng.uniform_tensor({4, 4}, -1, 1, DType::f64));
  Tensor lengths_mask = Tensor::zeros({2, 3}, DType::f64);
  for (int32_t r : p.rows) lengths_mask.set(r, 1.0);
  Tape tape;
  const auto masked =
      mha.self_attention(tape, x, lengths_mask, false, rng, nn::AttentionPath::fused, &p);
  const auto unmasked =
      mha.self_attention(tape, x, Tensor(), false, rng, nn::AttentionPath::fused, &p);
  CHECK(max_diff(masked.y.value(), unmasked.y.value(), masked.y.value().numel()) == 0.0);
  // Row 1's one query puts all its weight on its one real key, in every head.
  for (int64_t h = 0; h < 2; ++h) {
    const int64_t at = ((1 * 2 + h) * 3 + 0) * 3;  // (B,h,T,S): row 1, head h, query 0
    CHECK(unmasked.weights.value().at(at) == 1.0);
    CHECK(unmasked.weights.value().at(at + 1) == 0.0);
    CHECK(unmasked.weights.value().at(at + 2) == 0.0);
  }
}

TEST_CASE("the training loss on packed rows equals the padded encoder and decoder's",
          "[transformer][packing]") {
  // loss() packs the batch; encode() and decode() run every padded position. With dropout off
  // the loss and every gradient agree (the products sum their rows in another order).
  for (auto norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    INFO(nn::norm_place_name(norm));
    Seq2SeqConfig c = tiny_transformer(norm);
    c.dropout = 0;
    // Learned positions with pre-norm: the packed embedding looks up both tables.
    if (norm == nn::NormPlace::pre) c.positions = Positions::learned;
    Seq2Seq model(c, DType::f64);
    model.train();
    std::vector<EncodedPair> ps = pairs();
    Batch batch = batch_of(ps);
    batch.tgt_out[1] = Vocab::kPad;  // a target skipped inside a row: the loss gathers rows
    TransformerModel& t = model.transformer();
    Tape tape;
    Rng rng(3);
    const Var packed = t.loss(tape, batch, rng);
    tape.backward(packed);
    std::vector<std::vector<double>> grads;
    for (nn::Parameter* p : model.parameters()) grads.push_back(p->grad.to_vector());

    model.zero_grad();
    Tape tape2;
    Rng rng2(3);
    const auto memory = t.encode(tape2, batch, rng2);
    const Var h = t.decode(tape2, memory, batch, rng2);  // (B,T,d)
    std::vector<int32_t> rows, targets;
    for (int64_t i = 0; i < batch.size * batch.tgt_len; ++i)
      if (batch.tgt_out[i] != Vocab::kPad) {
        rows.push_back(static_cast<int32_t>(i));
        targets.push_back(batch.tgt_out[i]);
      }
    const Var z = t.logits(
        tape2, ops::gather(ops::reshape(h, {batch.size * batch.tgt_len, c.d_model}), rows));
    const Var padded = ops::cross_entropy(z, targets, Vocab::kPad);
    tape2.backward(padded);
    CHECK(std::abs(packed.value().item() - padded.value().item()) < 1e-12);
    size_t i = 0;
    for (nn::Parameter* p : model.parameters()) {
      const std::vector<double> g = p->grad.to_vector();
      double worst = 0;
      for (size_t j = 0; j < g.size(); ++j) worst = std::max(worst, std::abs(g[j] - grads[i][j]));
      CHECK(worst < 1e-12);
      ++i;
    }
  }
}

TEST_CASE("embedded positions are the sinusoid's rows, past the cached table too, packed or not",
          "[transformer][packing]") {
  Seq2SeqConfig c = tiny_transformer();
  c.dropout = 0;
  Seq2Seq model(c, DType::f64);
  model.eval();
  TransformerModel& t = model.transformer();
  const std::vector<int32_t> ids{4, 5, 6, 7, 8, 9};  // (B,L) = (2,3)
  nn::Packing p;
  p.assign(std::vector<int64_t>{3, 1}, 3);
  const Tensor& table = t.tgt_emb().weight().value;  // (V,d)
  const double scale = std::sqrt(static_cast<double>(c.d_model));
  // Inside the cached 256 positions, straddling its end, and wholly past it.
  for (const int64_t start : {int64_t{0}, int64_t{5}, int64_t{254}, int64_t{300}}) {
    INFO("start " << start);
    const Tensor sines = nn::sinusoidal_positions(0, start + 3, c.d_model, DType::f64);
    Tape tape;
    Rng rng(1);
    const Var padded = t.embed(tape, true, ids, 2, 3, start, rng);      // (2,3,d)
    const Var packed = t.embed(tape, true, ids, 2, 3, start, rng, &p);  // (4,d)
    REQUIRE(padded.shape() == Shape{2, 3, c.d_model});
    REQUIRE(packed.shape() == Shape{4, c.d_model});
    double worst = 0;
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t i = 0; i < c.d_model; ++i) {
        const double want = table.at(ids[static_cast<size_t>(r)] * c.d_model + i) * scale +
                            sines.at((start + r % 3) * c.d_model + i);
        worst = std::max(worst, std::abs(padded.value().at(r * c.d_model + i) - want));
      }
    for (int64_t n = 0; n < p.n(); ++n)
      for (int64_t i = 0; i < c.d_model; ++i)
        worst = std::max(worst, std::abs(packed.value().at(n * c.d_model + i) -
                                         padded.value().at(p.rows[n] * c.d_model + i)));
    CHECK(worst < 1e-12);
  }
  // A packing without real positions is refused by name, not broadcast.
  nn::Packing none;
  none.assign(std::vector<int64_t>{0, 0}, 3);
  Tape tape;
  Rng rng(1);
  CHECK_THROWS_WITH(t.embed(tape, true, ids, 2, 3, 0, rng, &none),
                    Catch::Contains("target packing of (2,3) has no real positions"));
}
