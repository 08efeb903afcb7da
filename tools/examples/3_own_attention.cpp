// Example 3: your own attention. Bahdanau's additive attention written from elementary ops
// (matmul, tanh, softmax and a weighted sum), gradient-checked with its parameters in float64, then
// trained inside a small encoder-decoder built from nn layers to copy sequences of symbols.
#include <tapestry/tapestry.h>

#include <cstdio>

using namespace tapestry;

// e_j = v . tanh(W s + U h_j),   a = softmax(e),   c = sum_j a_j h_j
struct AdditiveAttention : nn::Module {
  nn::Linear W, U, v;
  AdditiveAttention(int64_t query, int64_t key, int64_t size, Rng& rng, DType dtype = DType::f32)
      : W(query, size, true, rng, dtype),
        U(key, size, false, rng, dtype),
        v(size, 1, false, rng, dtype) {
    add_module("W", W);
    add_module("U", U);
    add_module("v", v);
  }
  // s (B,Hq), h (B,S,K) -> the weights a (B,S) and the context c (B,K)
  std::pair<Var, Var> forward(Tape& tape, const Var& s, const Var& h) {
    const int64_t b = h.dim(0), n = h.dim(1), k = h.dim(2);
    Var q = ops::reshape(W.forward(tape, s), {b, 1, -1});  // (B,1,A)
    Var t = ops::tanh(U.forward(tape, h) + q);             // (B,S,A): q broadcast over S
    Var e = ops::reshape(v.forward(tape, t), {b, n});      // (B,S)
    Var a = ops::softmax(e, -1);                           // (B,S)
    Var c = ops::matmul(ops::reshape(a, {b, 1, n}), h);    // (B,1,S) x (B,S,K) -> (B,1,K)
    return {a, ops::reshape(c, {b, k})};
  }
};

constexpr int kVocab = 11;  // symbols 1..10; 0 starts the output
constexpr int64_t kEmb = 16, kHidden = 32;

// Embeddings, a bidirectional GRU encoder, the attention, a GRU decoder cell fed [E y; c], and an
// output layer on [s; c].
struct Copier : nn::Module {
  nn::Embedding src, tgt;
  nn::RNN encoder;
  AdditiveAttention attention;
  nn::Cell decoder;
  nn::Linear out;
  explicit Copier(Rng& rng)
      : src(kVocab, kEmb, rng),
        tgt(kVocab, kEmb, rng),
        encoder(nn::CellKind::gru, kEmb, kHidden, 1, true, rng),
        attention(kHidden, 2 * kHidden, kHidden, rng),
        decoder(nn::CellKind::gru, kEmb + 2 * kHidden, kHidden, rng),
        out(kHidden + 2 * kHidden, kVocab, true, rng) {
    add_module("src", src);
    add_module("tgt", tgt);
    add_module("encoder", encoder);
    add_module("attention", attention);
    add_module("decoder", decoder);
    add_module("out", out);
  }
  // x (B,S) -> h (B,S,2H)
  Var encode(Tape& tape, const std::vector<int32_t>& x, int64_t b, int64_t n) {
    std::vector<int64_t> lengths(static_cast<size_t>(b), n);
    return encoder.forward(tape, src.forward(tape, x, {b, n}), lengths).y;
  }
  // One decoder step from the previous tokens (B): updates s, returns the logits (B,V).
  Var step(Tape& tape, const Var& h, nn::RecurrentState& s, const std::vector<int32_t>& prev) {
    auto [a, c] = attention.forward(tape, s.h, h);
    s = decoder.forward(tape, ops::concat({tgt.forward(tape, prev, {h.dim(0)}), c}, 1), s);
    return out.forward(tape, ops::concat({s.h, c}, 1));
  }
};

// A batch of b random sequences of length n (row-major).
std::vector<int32_t> sequences(Rng& rng, int64_t b, int64_t n) {
  std::vector<int32_t> x(static_cast<size_t>(b * n));
  for (auto& t : x) t = static_cast<int32_t>(1 + rng.randint(kVocab - 1));
  return x;
}

int main() {
  Rng rng(1);
  // 1. Gradient check: the weights and the context, with respect to s, h, W, U and v.
  AdditiveAttention probe(4, 6, 5, rng, DType::f64);
  auto check = nn::gradcheck_module(probe,
                                    [&](Tape& tape, std::span<const Var> x) {
                                      auto [a, c] = probe.forward(tape, x[0], x[1]);
                                      return ops::concat({a, c}, 1);
                                    },
                                    {rng.uniform_tensor({2, 4}, -1, 1, DType::f64),
                                     rng.uniform_tensor({2, 3, 6}, -1, 1, DType::f64)});
  std::printf("gradient check of the attention (x0 = s, x1 = h):\n%s\n",
              gradcheck_table(check).c_str());

  // 2. Train to copy: teacher forcing, the target shifted right by one behind the start token 0.
  Copier model(rng);
  nn::Adam opt(model.parameters(), 3e-3);
  Tape tape;
  for (int it = 1; it <= 3000; ++it) {
    if (it == 2001) opt.set_lr(1e-3);  // smaller steps to settle, once the copy is learnt
    const int64_t b = 32, n = 3 + rng.randint(6);
    std::vector<int32_t> x = sequences(rng, b, n), targets, prev(static_cast<size_t>(b), 0);
    tape.clear();
    Var h = model.encode(tape, x, b, n);
    nn::RecurrentState s{Tensor::zeros({b, kHidden}, DType::f32)};
    std::vector<Var> logits;
    for (int64_t t = 0; t < n; ++t) {
      logits.push_back(model.step(tape, h, s, prev));
      for (int64_t r = 0; r < b; ++r) prev[r] = x[r * n + t];
    }
    for (int64_t r = 0; r < b; ++r)  // rows of the stacked logits: row r's steps in order
      for (int64_t t = 0; t < n; ++t) targets.push_back(x[r * n + t]);
    Var loss = ops::cross_entropy(ops::reshape(ops::stack(logits, 1), {b * n, kVocab}), targets);
    opt.zero_grad();
    tape.backward(loss);
    nn::clip_grad_norm(model.parameters(), 1.0);  // a rare large gradient must not undo training
    opt.step();
    if (it % 1000 == 0) std::printf("step %4d  loss %.4f\n", it, loss.value().item());
  }

  // 3. Greedy copies of 200 new sequences of 3 to 8 symbols.
  NoGrad inference(tape);
  int exact = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 3 + i % 6;
    std::vector<int32_t> x = sequences(rng, 1, n), y, prev{0};
    Var h = model.encode(tape, x, 1, n);
    nn::RecurrentState s{Tensor::zeros({1, kHidden}, DType::f32)};
    for (int64_t t = 0; t < n; ++t) {
      Tensor z = model.step(tape, h, s, prev).value();
      int32_t best = 0;
      for (int32_t v = 1; v < kVocab; ++v) best = z.at(v) > z.at(best) ? v : best;
      y.push_back(prev[0] = best);
    }
    exact += y == x;
  }
  std::printf("exact copies: %d of 200 (%.1f%%)\n", exact, exact / 2.0);
  return check.pass && exact >= 190 ? 0 : 1;
}
