// PyTorch parity of the Transformer in float64: our weights loaded into
// torch.nn.MultiheadAttention and into torch_transformer.py's model (torch.nn.Transformer inside)
// give the same outputs, attention weights, loss and every gradient, to 1e-10. Skipped (with a
// warning) where python3 has no torch.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "tapestry/models/seq2seq.h"
#include "tapestry/nn/multihead_attention.h"
#include "torch_run.h"

using namespace tapestry;
using namespace tapestry::testing;
using nlohmann::json;

namespace {

// Float64 agreement of two implementations of the same formulas: each element of the same
// computation done in another order differs by a few ulps, ~1e-15 here; 1e-10 leaves room for
// the longer chains of the whole model, and catches any error in a formula.
constexpr double kTolerance = 1e-10;

// torch.nn.MultiheadAttention(d, h, dropout=0, batch_first=True), loaded with our weights.
// Separate projections: torch keeps q_proj_weight, k_proj_weight and v_proj_weight only when kdim
// or vdim differs from embed_dim; for equal sizes the module is switched to them by hand, as its
// __init__ would have built it (forward() then calls F.multi_head_attention_forward with
// use_separate_proj_weight=True).
const char* kAttentionScript = R"PY(
import json, sys, torch
spec = json.load(open(sys.argv[1]))
f64 = torch.float64
d, h, mode = spec["d"], spec["heads"], spec["mode"]
def tensor(name):
    return torch.tensor(spec[name], dtype=f64).reshape(spec["shapes"][name])
m = torch.nn.MultiheadAttention(d, h, dropout=0.0, batch_first=True).double()
if not spec["packed"]:
    m._qkv_same_embed_dim = False
    m.in_proj_weight = None
    for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
        setattr(m, name, torch.nn.Parameter(torch.empty(d, d, dtype=f64)))
state = {k: torch.tensor(v, dtype=f64).reshape(spec["shapes"][k]) for k, v in spec["weights"].items()}
m.load_state_dict(state, strict=True)
q = tensor("query").requires_grad_()
inputs = {"query": q}
if mode == "self":
    k = v = q
elif mode == "shared":
    k = v = inputs["key"] = tensor("key").requires_grad_()
else:
    k = inputs["key"] = tensor("key").requires_grad_()
    v = inputs["value"] = tensor("value").requires_grad_()
T, S = q.shape[1], k.shape[1]
pad = torch.arange(S).unsqueeze(0) >= torch.tensor(spec["lengths"]).unsqueeze(1)  # True = pad
causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) if mode == "self" else None
y, w = m(q, k, v, key_padding_mask=pad, attn_mask=causal, need_weights=True,
         average_attn_weights=False)
(tensor("r") * y).sum().backward()
print(json.dumps({"y": y.flatten().tolist(), "weights": w.flatten().tolist(),
                  "grads": {n: p.grad.flatten().tolist() for n, p in m.named_parameters()},
                  "inputs": {n: x.grad.flatten().tolist() for n, x in inputs.items()}}))
)PY";

// The model of ../shared/bench/torch_transformer.py (class TransformerSeq2Seq and its
// PositionalEncoding, trimmed), in float64: the positions are computed in float64 rather than
// converted from float32 tables. Train mode with dropout 0: 1.13's encoder takes its nested-tensor
// fast path in eval only, and p = 0 draws nothing.
const char* kModelScript = R"PY(
import json, math, sys, torch
import torch.nn as nn
import torch.nn.functional as F
spec = json.load(open(sys.argv[1]))
f64 = torch.float64
PAD = 0

class PositionalEncoding(nn.Module):
    def __init__(self, d, dropout, max_len):
        super().__init__()
        pos = torch.arange(max_len, dtype=f64).unsqueeze(1)
        den = torch.exp(-torch.arange(0, d, 2, dtype=f64) * math.log(10000.0) / d)
        pe = torch.zeros(max_len, d, dtype=f64)
        pe[:, 0::2] = torch.sin(pos * den)
        pe[:, 1::2] = torch.cos(pos * den)
        self.register_buffer("pe", pe, persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(1)])

class TransformerSeq2Seq(nn.Module):
    def __init__(self, Vs, Vt, d, heads, n_enc, n_dec, ffn, dropout, max_len, norm_first):
        super().__init__()
        self.scale = math.sqrt(d)
        self.src_emb = nn.Embedding(Vs, d)
        self.tgt_emb = nn.Embedding(Vt, d)
        self.pos = PositionalEncoding(d, dropout, max_len)
        self.transformer = nn.Transformer(d_model=d, nhead=heads, num_encoder_layers=n_enc,
                                          num_decoder_layers=n_dec, dim_feedforward=ffn,
                                          dropout=dropout, activation="relu",
                                          batch_first=True, norm_first=norm_first)
        self.generator = nn.Linear(d, Vt)
        self.register_buffer("causal", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool),
                                                  diagonal=1), persistent=False)

    def src_in(self, src):
        return self.pos(self.src_emb(src) * self.scale)

    def tgt_in(self, y):
        return self.pos(self.tgt_emb(y) * self.scale)

    def forward(self, src, tgt_in, tgt_out):
        T = tgt_in.size(1)
        src_pad = src == PAD
        out = self.transformer(self.src_in(src), self.tgt_in(tgt_in),
                               tgt_mask=self.causal[:T, :T],
                               src_key_padding_mask=src_pad,
                               tgt_key_padding_mask=tgt_in == PAD,
                               memory_key_padding_mask=src_pad)
        logits = self.generator(out)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1),
                               ignore_index=PAD)

c = spec["config"]
m = TransformerSeq2Seq(c["src_vocab"], c["tgt_vocab"], c["d"], c["heads"], c["enc_layers"],
                       c["dec_layers"], c["ffn"], 0.0, 64, c["norm_first"]).double()
state = {k: torch.tensor(v, dtype=f64).reshape(spec["shapes"][k]) for k, v in spec["weights"].items()}
m.load_state_dict(state, strict=True)
m.train()
B, S, T = spec["B"], spec["S"], spec["T"]
src = torch.tensor(spec["src"], dtype=torch.long).reshape(B, S)
tgt_in = torch.tensor(spec["tgt_in"], dtype=torch.long).reshape(B, T)
tgt_out = torch.tensor(spec["tgt_out"], dtype=torch.long).reshape(B, T)
loss = m(src, tgt_in, tgt_out)
loss.backward()
print(json.dumps({"torch": torch.__version__, "loss": loss.item(),
                  "grads": {n: p.grad.flatten().tolist() for n, p in m.named_parameters()}}))
)PY";

std::vector<int64_t> dims_of(const Tensor& t) {
  return {t.shape().dims().begin(), t.shape().dims().end()};
}

// Adds U(-0.25, 0.25) to every parameter, so that no bias is zero and no LayerNorm is the
// identity: a term left out of either side would not vanish.
void perturb(nn::Module& module, Rng& rng) {
  for (nn::Parameter* p : module.parameters()) {
    const Tensor noise = rng.uniform_tensor(p->shape(), -0.25, 0.25, p->value.dtype());
    for (int64_t i = 0; i < p->numel(); ++i) p->value.set(i, p->value.at(i) + noise.at(i));
  }
}

// Every parameter's value and shape, by name, as the scripts load them into a state_dict.
void put_weights(nn::Module& module, json& spec) {
  for (auto& [name, p] : module.named_parameters()) {
    spec["weights"][name] = p->value.to_vector();
    spec["shapes"][name] = dims_of(p->value);
  }
}

void put_tensor(json& spec, const std::string& name, const Tensor& t) {
  spec[name] = t.to_vector();
  spec["shapes"][name] = dims_of(t);
}

// The largest |ours - theirs| / max(1, |theirs|): absolute on values up to 1, relative above.
double worst_difference(const Tensor& ours, const json& theirs, const std::string& what) {
  INFO(what);
  const auto ref = theirs.get<std::vector<double>>();
  REQUIRE(ours.defined());
  REQUIRE(ref.size() == static_cast<size_t>(ours.numel()));
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(ours.at(static_cast<int64_t>(i)) - ref[i]) /
                                std::max(1.0, std::abs(ref[i])));
  return worst;
}

}  // namespace

TEST_CASE("multi-head attention matches torch.nn.MultiheadAttention in values and gradients",
          "[torch][transformer]") {
  if (!torch_available()) {
    WARN("python3 with torch not found: multi-head attention's PyTorch parity not checked");
    return;
  }
  TempDir dir("mha");
  // self: x attends to itself under the causal mask; shared: cross-attention to a memory that is
  // both key and value (the decoder's case, one product for both); distinct: three inputs.
  for (const std::string mode : {"self", "shared", "distinct"})
    for (bool packed : {true, false}) {
      DYNAMIC_SECTION(mode << (packed ? ", packed in_proj_weight" : ", q/k/v_proj_weight")) {
        const int64_t b = 2, t = 4, d = 8, heads = 2;
        const int64_t s = mode == "self" ? t : 5;
        const int64_t lengths[] = {s, s - 2};  // row 1 ends in two padding keys
        Rng rng(41);
        nn::MultiheadAttention mha(d, heads, 0.0, rng, DType::f64, packed);
        perturb(mha, rng);
        const Tensor query = rng.uniform_tensor({b, t, d}, -1, 1, DType::f64);
        const Tensor key = rng.uniform_tensor({b, s, d}, -1, 1, DType::f64);
        const Tensor value = rng.uniform_tensor({b, s, d}, -1, 1, DType::f64);
        const Tensor r = rng.uniform_tensor({b, t, d}, -1, 1, DType::f64);
        Tensor valid = Tensor::zeros({b, s}, DType::f64);
        for (int64_t row = 0; row < b; ++row)
          for (int64_t j = 0; j < lengths[row]; ++j) valid.set(row * s + j, 1.0);

        json spec;
        spec["d"] = d;
        spec["heads"] = heads;
        spec["mode"] = mode;
        spec["packed"] = packed;
        spec["lengths"] = {lengths[0], lengths[1]};
        put_weights(mha, spec);
        put_tensor(spec, "query", query);
        if (mode != "self") put_tensor(spec, "key", key);
        if (mode == "distinct") put_tensor(spec, "value", value);
        put_tensor(spec, "r", r);
        const json got = run_torch_script(dir.path, kAttentionScript, spec);

        Tape tape;
        const Var q = tape.leaf(query);
        Var k, v;
        nn::MultiheadAttention::Output o;
        if (mode == "self") {
          o = mha.self_attention(tape, q, valid, true, rng);
        } else if (mode == "shared") {
          k = tape.leaf(key);
          o = mha.forward(tape, q, k, k, valid, false, rng);
        } else {
          k = tape.leaf(key);
          v = tape.leaf(value);
          o = mha.forward(tape, q, k, v, valid, false, rng);
        }
        tape.backward(o.y, r);  // loss = sum(r * y)

        const double y = worst_difference(o.y.value(), got.at("y"), "y");
        const double w = worst_difference(o.weights.value(), got.at("weights"), "weights");
        double grads = 0;
        REQUIRE(got.at("grads").size() == mha.named_parameters().size());
        for (auto& [name, p] : mha.named_parameters())
          grads = std::max(grads, worst_difference(p->grad, got.at("grads").at(name), name));
        double inputs = worst_difference(tape.grad(q), got.at("inputs").at("query"), "d query");
        if (mode != "self")
          inputs =
              std::max(inputs, worst_difference(tape.grad(k), got.at("inputs").at("key"), "d key"));
        if (mode == "distinct")
          inputs = std::max(
              inputs, worst_difference(tape.grad(v), got.at("inputs").at("value"), "d value"));
        INFO(fmt::format(
            "worst differences: y {:.2e}, weights {:.2e}, parameter gradients {:.2e}, input "
            "gradients {:.2e}",
            y, w, grads, inputs));
        CHECK(y <= kTolerance);
        CHECK(w <= kTolerance);
        CHECK(grads <= kTolerance);
        CHECK(inputs <= kTolerance);
      }
    }
}

TEST_CASE("the Transformer's parameters load into torch.nn.Transformer: same loss and gradients",
          "[torch][transformer]") {
  if (!torch_available()) {
    WARN("python3 with torch not found: the Transformer's PyTorch parity not checked");
    return;
  }
  TempDir dir("transformer");
  for (nn::NormPlace norm : {nn::NormPlace::post, nn::NormPlace::pre}) {
    DYNAMIC_SECTION(nn::norm_place_name(norm) << "-norm") {
      models::Seq2SeqConfig c;
      c.arch = models::Arch::transformer;
      c.src_vocab = c.tgt_vocab = 11;
      c.d_model = 8;
      c.heads = 2;
      c.ffn = 12;
      c.enc_layers = c.dec_layers = 2;
      c.norm = norm;
      c.activation = nn::Activation::relu;
      c.dropout = 0.0;
      c.seed = 7;
      models::Seq2Seq model(c, DType::f64);
      Rng rng(43);
      perturb(model, rng);
      // Sources of 5, 2, 7 and 1 tokens, targets of 3, 1, 5 and 2 (plus <eos>): padding in both,
      // and every row's position 0 real (<bos> in the target), so no query sees only padding.
      const std::vector<models::EncodedPair> pairs{{{4, 5, 6, 7, 8}, {5, 6, 7}},
                                                   {{9, 4}, {10}},
                                                   {{5, 5, 6, 10, 3, 4, 7}, {4, 4, 9, 10, 3}},
                                                   {{8}, {8, 9}}};
      const std::vector<int64_t> rows{0, 1, 2, 3};
      const models::Batch batch = models::make_batch(pairs, rows);

      json spec;
      spec["config"] = {{"src_vocab", c.src_vocab},
                        {"tgt_vocab", c.tgt_vocab},
                        {"d", c.d_model},
                        {"heads", c.heads},
                        {"enc_layers", c.enc_layers},
                        {"dec_layers", c.dec_layers},
                        {"ffn", c.ffn},
                        {"norm_first", norm == nn::NormPlace::pre}};
      put_weights(model, spec);
      spec["B"] = batch.size;
      spec["S"] = batch.src_len;
      spec["T"] = batch.tgt_len;
      spec["src"] = batch.src;
      spec["tgt_in"] = batch.tgt_in;
      spec["tgt_out"] = batch.tgt_out;
      const json got = run_torch_script(dir.path, kModelScript, spec);

      Tape tape;
      const Var loss = model.loss(tape, batch);
      tape.backward(loss);
      const double ref = got.at("loss").get<double>();
      const double loss_diff = std::abs(loss.value().at(0) - ref) / std::max(1.0, std::abs(ref));
      double grads = 0;
      std::string worst_name;
      REQUIRE(got.at("grads").size() == model.named_parameters().size());
      for (auto& [name, p] : model.named_parameters()) {
        const double diff = worst_difference(p->grad, got.at("grads").at(name), name);
        if (diff > grads || worst_name.empty()) worst_name = name;
        grads = std::max(grads, diff);
      }
      INFO(fmt::format("torch {}: worst differences: loss {:.2e}, gradients {:.2e} ({})",
                       got.at("torch").get<std::string>(), loss_diff, grads, worst_name));
      CHECK(loss_diff <= kTolerance);
      CHECK(grads <= kTolerance);
    }
  }
}
