// Attention: the fused kernels equal the composed ops for every variant, and bad sizes or names
// are refused with messages that say what fits.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "results_close.h"
#include "tapestry/nn/attention.h"
#include "tapestry/ops/ops.h"

using namespace tapestry;
using namespace tapestry::nn;
using Catch::Contains;

namespace {
// Everything one attention step computes and every gradient it sends back, flattened.
std::vector<std::vector<double>> run_step(AttentionKind kind, bool fused) {
  Rng rng(21);
  AttentionConfig c{kind, 4, 4, 3, 1, fused};
  auto attn = Attention::make(c, rng, DType::f64);
  Tensor q = rng.uniform_tensor({3, 4}, -1, 1, DType::f64);
  Tensor keys = rng.uniform_tensor({3, 5, 4}, -1, 1, DType::f64);
  Tensor summary = rng.uniform_tensor({3, 4}, -1, 1, DType::f64);
  Tensor seed_a = rng.uniform_tensor({3, 5}, -1, 1, DType::f64);
  Tensor seed_c = rng.uniform_tensor({3, 4}, -1, 1, DType::f64);
  const int64_t lengths[] = {5, 2, 4};
  Tape tape;
  Var vq = tape.leaf(q), vk = tape.leaf(keys), vs = tape.leaf(summary);
  AttentionMemory m = attn->prepare(tape, vk, lengths, vs);
  AttentionResult r = attn->attend(tape, m, vq, 2);
  Var loss = ops::sum(ops::mul(r.context, seed_c));
  if (r.weights.value().defined()) loss = ops::add(loss, ops::sum(ops::mul(r.weights, seed_a)));
  tape.backward(loss);
  std::vector<std::vector<double>> out{r.context.value().to_vector()};
  if (r.weights.value().defined()) out.push_back(r.weights.value().to_vector());
  for (const Var* v : {&vq, &vk, &vs}) {
    Tensor g = tape.grad(*v);
    out.push_back(g.defined() ? g.to_vector() : std::vector<double>{});
  }
  for (auto* p : attn->parameters()) out.push_back(p->grad.to_vector());
  return out;
}
}  // namespace

TEST_CASE("fused attention kernels equal the composed ops, values and gradients", "[attention]") {
  for (AttentionKind kind : all_attention_kinds()) {
    testing::check_results_close(run_step(kind, true), run_step(kind, false), attention_name(kind),
                                 1e-15);
  }
}

TEST_CASE("attention refuses sizes that do not fit and unknown names", "[attention]") {
  Rng rng(1);
  REQUIRE_THROWS_WITH(parse_attention("luong"),
                      Contains("unknown attention 'luong' (valid: none, bahdanau, dot, general, "
                               "concat, scaled-dot, cosine, local-m, local-p)"));
  REQUIRE(parse_attention("scaled-dot") == AttentionKind::scaled_dot);
  REQUIRE_THROWS_WITH(Attention::make({AttentionKind::dot, 4, 8}, rng),
                      Contains("the query size 4 must equal the key size 8"));
  REQUIRE_THROWS_WITH(Attention::make({AttentionKind::local_p, 4, 4, 2, 0}, rng),
                      Contains("window half width must be at least 1"));
  auto attn = Attention::make({AttentionKind::bahdanau, 4, 6}, rng);
  Tape tape;
  const int64_t lengths[] = {3, 2};
  Var keys = Tensor::zeros({2, 3, 6}, DType::f32), summary = Tensor::zeros({2, 6}, DType::f32);
  REQUIRE_THROWS_WITH(attn->prepare(tape, Tensor::zeros({2, 3, 5}, DType::f32), lengths, summary),
                      Contains("keys (2,3,5), 2 lengths and summary (2,6) do not fit"));
  const int64_t too_long[] = {4, 2};
  REQUIRE_THROWS_WITH(attn->prepare(tape, keys, too_long, summary),
                      Contains("length 4 of row 0 is outside [0, 3]"));
  AttentionMemory m = attn->prepare(tape, keys, lengths, summary);
  REQUIRE_THROWS_AS(attn->attend(tape, m, Tensor::zeros({2, 5}, DType::f32), 0), ShapeError);
  REQUIRE_THROWS_WITH(ops::weighted_sum(Tensor::zeros({2, 4}, DType::f32), keys),
                      Contains("weighted_sum: shapes (2,4) and (2,3,6) do not fit"));
}
