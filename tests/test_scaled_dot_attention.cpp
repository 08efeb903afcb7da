// The fused attention op against the attention composed step by step: the same bits in the output,
// the weights and every gradient (self- and cross-attention, masks, dropout, float32 and float64),
// and its errors.
#include <catch2/catch.hpp>

#include "tapestry/nn/multihead_attention.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using nn::AttentionPath;

namespace {

// Everything one forward and backward of a MultiheadAttention gives: y, the weights, and the
// gradients of the inputs and of every parameter, in that order.
struct Run {
  std::vector<Tensor> values;
};

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
  // A loss that weighs every output differently: L = sum(y * r).
  Rng seed(3);
  const Tensor r = seed.uniform_tensor(o.y.shape(), -1, 1, o.y.dtype());
  tape.backward(ops::sum(ops::mul(o.y, Var(r))));
  Run out;
  out.values.push_back(o.y.value());
  out.values.push_back(o.weights.value());
  for (const Var& x : xs) out.values.push_back(tape.grad(x));
  for (nn::Parameter* p : mha.parameters()) out.values.push_back(p->grad.clone());
  return out;
}

void require_same_bits(const Run& a, const Run& b) {
  REQUIRE(a.values.size() == b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    INFO("tensor " << i << " (0: y, 1: the weights, then the inputs' and parameters' gradients)");
    REQUIRE(a.values[i].shape() == b.values[i].shape());
    int64_t differ = 0;
    for (int64_t j = 0; j < a.values[i].numel(); ++j)
      if (a.values[i].at(j) != b.values[i].at(j)) ++differ;
    CHECK(differ == 0);
  }
}

}  // namespace

TEST_CASE("scaled_dot_attention: the same bits as the attention composed step by step",
          "[attention][fused]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (double dropout : {0.0, 0.3}) {
      INFO("dtype " << dtype_name(dtype) << ", dropout " << dropout);
      Rng rng(9);
      // 3 heads of 4: 1/sqrt(4) is exact, so a scale applied in another order would agree too;
      // 4 heads of 3 are not exact, and must agree as well.
      for (int64_t heads : {3, 4}) {
        const int64_t d = 12;
        nn::MultiheadAttention mha(d, heads, dropout, rng, dtype);
        const Tensor x = rng.uniform_tensor({2, 5, d}, -1, 1, dtype);
        const Tensor mem = rng.uniform_tensor({2, 4, d}, -1, 1, dtype);
        const Tensor other = rng.uniform_tensor({2, 4, d}, -1, 1, dtype);
        Tensor key_valid = Tensor::full({2, 4}, 1.0, dtype);
        key_valid.set(7, 0.0);  // row 1's last memory position is padding
        Tensor self_valid = Tensor::full({2, 5}, 1.0, dtype);
        self_valid.set(8, 0.0), self_valid.set(9, 0.0);
        INFO(heads << " heads; self-attention, causal and padded");
        require_same_bits(run(mha, {x}, 0, 0, 0, self_valid, true, AttentionPath::steps, true),
                          run(mha, {x}, 0, 0, 0, self_valid, true, AttentionPath::fused, true));
        INFO("cross-attention over one memory as keys and values");
        require_same_bits(
            run(mha, {x, mem}, 0, 1, 1, key_valid, false, AttentionPath::steps, false),
            run(mha, {x, mem}, 0, 1, 1, key_valid, false, AttentionPath::fused, false));
        INFO("keys and values apart, no mask");
        require_same_bits(
            run(mha, {x, mem, other}, 0, 1, 2, Tensor(), false, AttentionPath::steps, false),
            run(mha, {x, mem, other}, 0, 1, 2, Tensor(), false, AttentionPath::fused, false));
      }
    }
  }
}

TEST_CASE("scaled_dot_attention: a query with no real key gets zeros, not NaN",
          "[attention][fused]") {
  Rng rng(4);
  const Tensor q = rng.uniform_tensor({1, 2, 4}, -1, 1, DType::f32);
  const Tensor kv = rng.uniform_tensor({1, 3, 8}, -1, 1, DType::f32);
  const Tensor none = Tensor::zeros({1, 1, 1, 3}, DType::f32);
  Tape tape;
  const Var vq = tape.leaf(q), vkv = tape.leaf(kv);
  Tensor weights;
  const Var y =
      ops::scaled_dot_attention(vq, vkv, vkv, 2, 2, {0, 0, 4}, none, 0.0, rng, true, &weights);
  tape.backward(ops::sum(y));
  for (int64_t i = 0; i < y.numel(); ++i) CHECK(y.value().at(i) == 0.0);
  for (int64_t i = 0; i < weights.numel(); ++i) CHECK(weights.at(i) == 0.0);
  const Tensor g = tape.grad(vkv);
  for (int64_t i = 0; i < g.numel(); ++i) CHECK(std::isfinite(g.at(i)));
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
  CHECK_THROWS_AS(call(k_other_batch, 2, 4, {}, Tensor(), 0.1), ShapeError);
  CHECK_THROWS_AS(call(k64, 2, 4, {}, Tensor(), 0.1), DTypeError);
  CHECK_THROWS_WITH(call(k, 2, 4, {}, Tensor::zeros({2, 1, 2, 4}, DType::f32), 0.1),
                    Catch::Contains("mask (2,1,2,4)") && Catch::Contains("(B,1,T,S)"));
  CHECK_THROWS_AS(call(k, 2, 4, {}, Tensor(), 1.0), ValueError);
  CHECK_THROWS_AS(call(k, 0, 4, {}, Tensor(), 0.1), ShapeError);
}
