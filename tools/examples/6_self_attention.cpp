// Example 6: self-attention. A Transformer encoder from nn layers (multi-head self-attention,
// feed-forward, layer norm) with sinusoidal positions, gradient-checked in float64, then trained
// to reverse sequences of symbols, every output position read off the encoder at once: a task of
// positions only, which attention solves by looking at the mirrored place.
#include <tapestry/tapestry.h>

#include <cstdio>

using namespace tapestry;

constexpr int kVocab = 10;
constexpr int64_t kLen = 6, kModel = 32;

// x (B,S) -> logits (B*S,V):  z = W encoder(E x + P) + b. (The Transformer scales E x by sqrt(d)
// because it starts E small, Xavier-uniform; nn::Embedding starts at N(0,1), already larger than
// P.)
struct Reverser : nn::Module {
  nn::Embedding emb;
  nn::TransformerEncoder encoder;
  nn::Linear out;
  Reverser(const nn::TransformerLayerConfig& c, Rng& rng, DType dtype = DType::f32)
      : emb(kVocab, c.d_model, rng, -1, dtype),
        encoder(c, 2, rng, dtype),
        out(c.d_model, kVocab, true, rng, dtype) {
    add_module("emb", emb);
    add_module("encoder", encoder);
    add_module("out", out);
  }
  Var forward(Tape& tape, const std::vector<int32_t>& x, int64_t b, Rng& rng) {
    const int64_t d = emb.dim();
    const DType dtype = emb.weight().value.dtype();
    Var e = emb.forward(tape, x, {b, kLen});
    Var h = encoder.forward(tape, e + Var(nn::sinusoidal_positions(0, kLen, d, dtype)), Tensor(),
                            rng);  // (B,S,d) + (S,d); no padding
    return out.forward(tape, ops::reshape(h, {b * kLen, d}));
  }
};

std::vector<int32_t> sequences(Rng& rng, int64_t b) {
  std::vector<int32_t> x(static_cast<size_t>(b * kLen));
  for (auto& t : x) t = static_cast<int32_t>(rng.randint(kVocab));
  return x;
}

// y_t = x_(S-1-t) for every row
std::vector<int32_t> reversed(const std::vector<int32_t>& x, int64_t b) {
  std::vector<int32_t> y(x.size());
  for (int64_t r = 0; r < b; ++r)
    for (int64_t t = 0; t < kLen; ++t) y[r * kLen + t] = x[r * kLen + kLen - 1 - t];
  return y;
}

int main() {
  Rng rng(1);
  nn::TransformerLayerConfig c;
  c.d_model = kModel;
  c.heads = 4;
  c.ffn = 64;
  c.dropout = 0;
  c.norm = nn::NormPlace::pre;

  // 1. Gradient check of one multi-head self-attention with a causal mask, in float64.
  nn::MultiheadAttention probe(8, 2, 0.0, rng, DType::f64);
  auto check =
      nn::gradcheck_module(probe,
                           [&](Tape& tape, std::span<const Var> x) {
                             return probe.self_attention(tape, x[0], Tensor(), true, rng).y;
                           },
                           {rng.uniform_tensor({2, 3, 8}, -1, 1, DType::f64)});
  std::printf("gradient check of multi-head self-attention (x0 = x):\n%s\n",
              gradcheck_table(check).c_str());

  // 2. Train: Adam, 1000 batches of 64 sequences.
  Reverser model(c, rng);
  nn::Adam opt(model.parameters(), 1e-3);
  Tape tape;
  for (int it = 1; it <= 1000; ++it) {
    const int64_t b = 64;
    std::vector<int32_t> x = sequences(rng, b);
    tape.clear();
    Var loss = ops::cross_entropy(model.forward(tape, x, b, rng), reversed(x, b));
    opt.zero_grad();
    tape.backward(loss);
    opt.step();
    if (it % 250 == 0) std::printf("step %4d  loss %.4f\n", it, loss.value().item());
  }

  // 3. 500 new sequences, every position at once.
  model.eval();
  NoGrad inference(tape);
  const int64_t b = 500;
  std::vector<int32_t> x = sequences(rng, b), y = reversed(x, b);
  Tensor z = model.forward(tape, x, b, rng).value();
  int exact = 0;
  for (int64_t r = 0; r < b; ++r) {
    bool all = true;
    for (int64_t t = 0; t < kLen; ++t) {
      int32_t best = 0;
      for (int32_t v = 1; v < kVocab; ++v)
        best = z.at((r * kLen + t) * kVocab + v) > z.at((r * kLen + t) * kVocab + best) ? v : best;
      all = all && best == y[r * kLen + t];
    }
    exact += all;
  }
  std::printf("exact reversals: %d of %lld (%.1f%%)\n", exact, static_cast<long long>(b),
              100.0 * exact / static_cast<double>(b));
  return check.pass && exact >= 475 ? 0 : 1;
}
