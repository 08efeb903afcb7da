// The fused attention op against the attention composed step by step: the same bits in the output,
// the weights and every gradient (self- and cross-attention, masks, dropout, float32 and float64,
// heads of one column, products large enough for OpenBLAS, the Transformer layers), and its errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "tapestry/nn/multihead_attention.h"
#include "tapestry/nn/transformer.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using nn::AttentionPath;

namespace {

int count_fused_nodes(const Tape& tape) {
  int count = 0;
  for (size_t i = 0; i < tape.size(); ++i)
    if (tape.node(i).op && std::strcmp(tape.node(i).op->name, "scaled_dot_attention") == 0) ++count;
  return count;
}

// Everything one forward and backward gives: y, the weights (if any), and the gradients of the
// inputs and of every parameter, in that order; and how many fused nodes the tape recorded.
struct Run {
  std::vector<Tensor> values;
  int fused_nodes = 0;
};

// L = sum(y * r) for a fixed random r, so that every output has its own weight.
void backward_weighted(Tape& tape, const Var& y) {
  Rng seed(3);
  const Tensor r = seed.uniform_tensor(y.shape(), -1, 1, y.dtype());
  tape.backward(ops::sum(ops::mul(y, Var(r))));
}

void add_gradients(Run& out, const Tape& tape, const std::vector<Var>& xs, nn::Module& m) {
  for (const Var& x : xs) out.values.push_back(tape.grad(x));
  for (nn::Parameter* p : m.parameters()) out.values.push_back(p->grad.clone());
  out.fused_nodes = count_fused_nodes(tape);
}

// query, key and value are given as indices into `inputs` (the same index: the same Var).
Run run(nn::MultiheadAttention& mha, const std::vector<Tensor>& inputs, int iq, int ik, int iv,
        const Tensor& key_valid, bool causal, AttentionPath path, bool self) {
  Tape tape;
  std::vector<Var> xs;
  for (const Tensor& x : inputs) xs.push_back(tape.leaf(x.clone()));
  mha.zero_grad();
  Rng rng(17);  // the same dropout draws on both paths
  const auto o = self ? mha.self_attention(tape, xs[iq], key_valid, causal, rng, path)
                      : mha.forward(tape, xs[iq], xs[ik], xs[iv], key_valid, causal, rng, path);
  backward_weighted(tape, o.y);
  Run out;
  out.values.push_back(o.y.value());
  out.values.push_back(o.weights.value());
  add_gradients(out, tape, xs, mha);
  return out;
}

void require_same_bits(const Run& steps, const Run& fused) {
  CHECK(steps.fused_nodes == 0);
  CHECK(fused.fused_nodes > 0);  // the fused path was taken
  REQUIRE(steps.values.size() == fused.values.size());
  for (size_t i = 0; i < steps.values.size(); ++i) {
    INFO("tensor " << i << " (y, the weights, then the inputs' and parameters' gradients)");
    REQUIRE(steps.values[i].shape() == fused.values[i].shape());
    int64_t differ = 0;
    for (int64_t j = 0; j < steps.values[i].numel(); ++j)
      if (steps.values[i].at(j) != fused.values[i].at(j)) ++differ;
    CHECK(differ == 0);
  }
}

struct Sizes {
  int64_t b, t, s, d, heads;
};

void compare_paths(const Sizes& z, DType dtype, double dropout, bool packed) {
  Rng rng(9);
  nn::MultiheadAttention mha(z.d, z.heads, dropout, rng, dtype, packed);
  const Tensor x = rng.uniform_tensor({z.b, z.t, z.d}, -1, 1, dtype);
  const Tensor mem = rng.uniform_tensor({z.b, z.s, z.d}, -1, 1, dtype);
  const Tensor other = rng.uniform_tensor({z.b, z.s, z.d}, -1, 1, dtype);
  Tensor key_valid = Tensor::full({z.b, z.s}, 1.0, dtype);
  key_valid.set(z.b * z.s - 1, 0.0);  // the last row's last memory position is padding
  Tensor self_valid = Tensor::full({z.b, z.t}, 1.0, dtype);
  if (z.t > 1) self_valid.set(z.b * z.t - 1, 0.0);
  {
    INFO("self-attention, causal and padded");
    require_same_bits(run(mha, {x}, 0, 0, 0, self_valid, true, AttentionPath::steps, true),
                      run(mha, {x}, 0, 0, 0, self_valid, true, AttentionPath::fused, true));
  }
  {
    INFO("cross-attention over one memory as keys and values");
    require_same_bits(run(mha, {x, mem}, 0, 1, 1, key_valid, false, AttentionPath::steps, false),
                      run(mha, {x, mem}, 0, 1, 1, key_valid, false, AttentionPath::fused, false));
  }
  {
    INFO("keys and values apart, no mask");
    require_same_bits(
        run(mha, {x, mem, other}, 0, 1, 2, Tensor(), false, AttentionPath::steps, false),
        run(mha, {x, mem, other}, 0, 1, 2, Tensor(), false, AttentionPath::fused, false));
  }
}

}  // namespace

TEST_CASE("scaled_dot_attention: the same bits as the attention composed step by step",
          "[attention][fused]") {
  for (DType dtype : {DType::f32, DType::f64})
    for (double dropout : {0.0, 0.3}) {
      INFO("dtype " << dtype_name(dtype) << ", dropout " << dropout);
      // 3 heads of 4 (1/sqrt(4) is exact, so a scale applied in another order would agree too),
      // 4 heads of 3 (not exact), 12 heads of one column (one-column products), one query and
      // one key, and heads whose products are big enough for OpenBLAS rather than the small
      // kernels; separate q, k and v weights (the unpacked projections) once.
      for (const Sizes& z : {Sizes{2, 5, 4, 12, 3}, Sizes{2, 5, 4, 12, 4}, Sizes{2, 5, 4, 12, 12},
                             Sizes{1, 1, 1, 8, 2}, Sizes{2, 40, 36, 64, 2}}) {
        INFO("B " << z.b << ", T " << z.t << ", S " << z.s << ", d " << z.d << ", heads "
                  << z.heads);
        compare_paths(z, dtype, dropout, true);
      }
      INFO("unpacked projections");
      compare_paths({2, 5, 4, 12, 3}, dtype, dropout, false);
    }
}

TEST_CASE("scaled_dot_attention: Transformer layers give the same bits with and without weights",
          "[attention][fused]") {
  nn::TransformerLayerConfig c;
  c.d_model = 16, c.heads = 4, c.ffn = 24, c.dropout = 0.2;
  Rng init(1);
  nn::TransformerEncoderLayer enc(c, init);
  nn::TransformerDecoderLayer dec(c, init);
  const Tensor x = init.uniform_tensor({2, 6, 16}, -1, 1, DType::f32);
  const Tensor mem = init.uniform_tensor({2, 5, 16}, -1, 1, DType::f32);
  Tensor tgt_valid = Tensor::full({2, 6}, 1.0, DType::f32),
         mem_valid = Tensor::full({2, 5}, 1.0, DType::f32);
  tgt_valid.set(11, 0.0), mem_valid.set(9, 0.0);
  const auto encoder = [&](bool with_weights) {
    Tape tape;
    const Var vx = tape.leaf(x.clone());
    enc.zero_grad();
    Rng rng(5);
    Var weights;
    const Var y = enc.forward(tape, vx, tgt_valid, rng, with_weights ? &weights : nullptr);
    backward_weighted(tape, y);
    Run out;
    out.values.push_back(y.value());
    add_gradients(out, tape, {vx}, enc);
    return out;
  };
  const auto decoder = [&](bool with_weights) {
    Tape tape;
    const Var vx = tape.leaf(x.clone()), vm = tape.leaf(mem.clone());
    dec.zero_grad();
    Rng rng(6);
    nn::TransformerDecoderLayer::Weights weights;
    const Var y =
        dec.forward(tape, vx, vm, tgt_valid, mem_valid, rng, with_weights ? &weights : nullptr);
    backward_weighted(tape, y);
    Run out;
    out.values.push_back(y.value());
    add_gradients(out, tape, {vx, vm}, dec);
    return out;
  };
  INFO("encoder layer");
  require_same_bits(encoder(true), encoder(false));
  INFO("decoder layer");
  require_same_bits(decoder(true), decoder(false));
}

TEST_CASE("scaled_dot_attention: a query with no real key gets zeros and passes back zeros",
          "[attention][fused]") {
  Rng rng(4);
  const Tensor q = rng.uniform_tensor({1, 2, 4}, -1, 1, DType::f32);
  const Tensor kv = rng.uniform_tensor({1, 3, 8}, -1, 1, DType::f32);
  const Tensor none = Tensor::zeros({1, 1, 1, 3}, DType::f32);
  Tape tape;
  const Var vq = tape.leaf(q), vkv = tape.leaf(kv);
  Tensor weights;
  const Var y =
      ops::scaled_dot_attention(vq, vkv, vkv, 2, 2, {0, 0, 4}, none, 0.5, rng, true, &weights);
  tape.backward(ops::sum(y));
  for (int64_t i = 0; i < y.numel(); ++i) CHECK(y.value().at(i) == 0.0);
  for (int64_t i = 0; i < weights.numel(); ++i) CHECK(weights.at(i) == 0.0);
  for (const Tensor& g : {tape.grad(vq), tape.grad(vkv)})
    for (int64_t i = 0; i < g.numel(); ++i) CHECK(g.at(i) == 0.0);
}

TEST_CASE("scaled_dot_attention: constant operands take no gradient, the others theirs",
          "[attention][fused]") {
  Rng rng(8);
  const Tensor q = rng.uniform_tensor({2, 3, 4}, -1, 1, DType::f64);
  const Tensor k = rng.uniform_tensor({2, 5, 4}, -1, 1, DType::f64);
  const Tensor v = rng.uniform_tensor({2, 5, 4}, -1, 1, DType::f64);
  // Each operand alone needing a gradient gets the one it gets when all three do.
  Tensor all[3];
  {
    Tape tape;
    const Var x[3] = {tape.leaf(q.clone()), tape.leaf(k.clone()), tape.leaf(v.clone())};
    Rng drop(2);
    backward_weighted(
        tape, ops::scaled_dot_attention(x[0], x[1], x[2], 2, 2, {}, Tensor(), 0.25, drop, true));
    for (int i = 0; i < 3; ++i) all[i] = tape.grad(x[i]);
  }
  for (int only = 0; only < 3; ++only) {
    Tape tape;
    Var x[3] = {Var(q), Var(k), Var(v)};
    x[only] = tape.leaf(x[only].value().clone());
    Rng drop(2);
    backward_weighted(
        tape, ops::scaled_dot_attention(x[0], x[1], x[2], 2, 2, {}, Tensor(), 0.25, drop, true));
    const Tensor g = tape.grad(x[only]);
    INFO("operand " << only);
    REQUIRE(g.shape() == all[only].shape());
    for (int64_t i = 0; i < g.numel(); ++i) CHECK(g.at(i) == all[only].at(i));
  }
}

TEST_CASE("scaled_dot_attention: errors name the op and every shape", "[attention][fused]") {
  Rng rng(1);
  const Var q(Tensor::zeros({2, 3, 8}, DType::f32));
  const Var k(Tensor::zeros({2, 4, 8}, DType::f32));
  const Var k64(Tensor::zeros({2, 4, 8}, DType::f64));
  const Var k_other_batch(Tensor::zeros({3, 4, 8}, DType::f32));
  const auto call = [&](const Var& kk, int64_t heads, int64_t dk, ops::HeadColumns cols,
                        const Tensor& valid, double p) {
    return ops::scaled_dot_attention(q, kk, kk, heads, dk, cols, valid, p, rng, true);
  };
  CHECK_THROWS_WITH(call(k, 2, 4, {0, 0, 1}, Tensor(), 0.1),
                    Catch::Contains("scaled_dot_attention: q (2,3,8)") &&
                        Catch::Contains("v (2,4,8) (from 1)") && Catch::Contains("past"));
  CHECK_THROWS_AS(call(k, 2, 4, {-1, 0, 0}, Tensor(), 0.1), ShapeError);
  CHECK_THROWS_AS(call(k, int64_t{1} << 62, 4, {}, Tensor(), 0.1), ShapeError);  // heads*dk wraps
  CHECK_THROWS_AS(call(k, 1, 4, {INT64_MAX, 0, 0}, Tensor(), 0.1), ShapeError);
  CHECK_THROWS_AS(call(k_other_batch, 2, 4, {}, Tensor(), 0.1), ShapeError);
  CHECK_THROWS_AS(call(k64, 2, 4, {}, Tensor(), 0.1), DTypeError);
  CHECK_THROWS_AS(call(k, 2, 4, {}, Tensor::zeros({2, 1, 1, 4}, DType::f64), 0.1), DTypeError);
  CHECK_THROWS_WITH(call(k, 2, 4, {}, Tensor::zeros({2, 1, 2, 4}, DType::f32), 0.1),
                    Catch::Contains("mask (2,1,2,4)") && Catch::Contains("(B,1,T,S)"));
  CHECK_THROWS_AS(call(k, 2, 4, {}, Tensor::zeros({2, 4}, DType::f32), 0.1), ShapeError);
  CHECK_THROWS_WITH(call(k, 2, 4, {}, Tensor(), 1.0),
                    Catch::Contains("scaled_dot_attention") && Catch::Contains("p = 1"));
  CHECK_THROWS_AS(call(k, 0, 4, {}, Tensor(), 0.1), ShapeError);
}
