// Example 4: a character-level language model. A GRU reads a text file one byte at a time and
// learns to predict the next byte; then it writes text of its own, one sampled byte at a time.
//   usage: example_4_char_gru FILE [STEPS]
#include <tapestry/tapestry.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

using namespace tapestry;

constexpr int64_t kBytes = 256, kEmb = 32, kHidden = 128, kBatch = 32, kWindow = 32;

struct CharModel : nn::Module {
  nn::Embedding embed;
  nn::RNN gru;
  nn::Linear out;
  explicit CharModel(Rng& rng)
      : embed(kBytes, kEmb, rng),
        gru(nn::CellKind::gru, kEmb, kHidden, 1, false, rng),
        out(kHidden, kBytes, true, rng) {
    add_module("embed", embed);
    add_module("gru", gru);
    add_module("out", out);
  }
  // ids (B,T), state h (1,B,H) or undefined -> the logits (B*T, 256) and the last state
  std::pair<Var, Var> forward(Tape& tape, const std::vector<int32_t>& ids, int64_t b, int64_t t,
                              const Var& h = Var()) {
    std::vector<int64_t> lengths(static_cast<size_t>(b), t);
    nn::RNN::Output o = gru.forward(tape, embed.forward(tape, ids, {b, t}), lengths, h);
    return {ops::reshape(out.forward(tape, o.y), {b * t, kBytes}), o.h_n};
  }
};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [STEPS]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() < kWindow + 2) {
    std::fprintf(stderr, "%s: cannot read it, or under %lld bytes\n", argv[1], kWindow + 2LL);
    return 1;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 400;
  if (steps < 1) {
    std::fprintf(stderr, "STEPS must be a positive number, got '%s'\n", argv[2]);
    return 2;
  }
  const int last = std::min(steps, 50);  // the steps whose mean loss is reported
  Rng rng(1);
  CharModel model(rng);
  nn::Adam opt(model.parameters(), 3e-3);
  Tape tape;
  double recent = 0;  // the mean loss of the last steps, in nats per byte
  for (int step = 1; step <= steps; ++step) {
    // A batch of random windows; the targets are the inputs moved on by one byte.
    std::vector<int32_t> x, y;
    for (int64_t r = 0; r < kBatch; ++r) {
      const auto at =
          static_cast<size_t>(rng.randint(static_cast<int64_t>(text.size()) - kWindow - 1));
      for (int64_t t = 0; t < kWindow; ++t) {
        x.push_back(static_cast<unsigned char>(text[at + t]));
        y.push_back(static_cast<unsigned char>(text[at + t + 1]));
      }
    }
    tape.clear();
    Var loss = ops::cross_entropy(model.forward(tape, x, kBatch, kWindow).first, y);
    opt.zero_grad();
    tape.backward(loss);
    nn::clip_grad_norm(opt.params(), 1.0);
    opt.step();
    if (step > steps - last) recent += loss.value().item() / last;
    if (step % 100 == 0) std::printf("step %4d  loss %.3f nats/byte\n", step, loss.value().item());
  }
  // What the byte frequencies alone would give (the entropy of the text's unigram distribution).
  double counts[kBytes] = {}, unigram = 0;
  for (char ch : text) counts[static_cast<unsigned char>(ch)] += 1;
  for (double c : counts)
    if (c > 0) unigram -= c / text.size() * std::log(c / text.size());
  std::printf("mean loss of the last %d steps: %.3f nats/byte (byte frequencies alone: %.3f)\n",
              last, recent, unigram);

  // Sampling: feed each byte back in, carrying the GRU's state; temperature 0.8.
  NoGrad inference(tape);
  std::string sample = "The ";
  Var h;
  for (int i = 0; i < 300; ++i) {
    auto [z, h_next] = model.forward(tape, {static_cast<unsigned char>(sample.back())}, 1, 1, h);
    h = h_next;
    Var p = ops::softmax(z * (1 / 0.8));
    double u = rng.uniform(), sum = 0;
    int next = 0;
    while (next < kBytes - 1 && (sum += p.value().at(next)) < u) ++next;
    sample += static_cast<char>(next);
  }
  std::printf("sample:\n%s\n", sample.c_str());
  return recent < 2.4 ? 0 : 1;  // learned more than which bytes are frequent
}
