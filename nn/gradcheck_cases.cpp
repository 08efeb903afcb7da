// Gradient-check cases for the layers: Linear, Embedding, the three cells, and multi-layer
// bidirectional recurrent layers over padded batches, with gradients into the initial state.
#include "tapestry/nn/gradcheck_cases.h"

#include <fmt/format.h>

#include "tapestry/nn/attention.h"
#include "tapestry/nn/embedding.h"
#include "tapestry/nn/layer_norm.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/multihead_attention.h"
#include "tapestry/nn/rnn.h"
#include "tapestry/nn/transformer.h"
#include "tapestry/ops/arith.h"
#include "tapestry/ops/shape_ops.h"

namespace tapestry::nn {

namespace {

class ModuleFixture : public GradcheckFixture {
 public:
  ModuleFixture(std::unique_ptr<Module> m, std::vector<std::string> names, std::vector<Tensor> xs,
                ModuleFn fn)
      : m_(std::move(m)), names_(std::move(names)), xs_(std::move(xs)), fn_(std::move(fn)) {
    for (auto& x : xs_) dxs_.push_back(Tensor::zeros(x.shape(), x.dtype()));
  }
  std::vector<CheckedTensor> checked() override {
    std::vector<CheckedTensor> out;
    for (size_t i = 0; i < xs_.size(); ++i) out.push_back({names_[i], &xs_[i], &dxs_[i]});
    for (auto& [name, p] : m_->named_parameters()) out.push_back({name, &p->value, &p->grad});
    return out;
  }
  Var forward(Tape& tape) override {
    std::vector<Var> vs;
    for (size_t i = 0; i < xs_.size(); ++i) vs.push_back(tape.bind(xs_[i], dxs_[i]));
    return fn_(tape, *m_, vs);
  }

 private:
  std::unique_ptr<Module> m_;
  std::vector<std::string> names_;
  std::vector<Tensor> xs_, dxs_;
  ModuleFn fn_;
};

}  // namespace

GradcheckCase module_case(std::string layer, std::string name, std::vector<InputTensor> inputs,
                          ModuleMaker make, ModuleFn fn) {
  GradcheckCase c;
  c.op = std::move(layer);
  c.name = std::move(name);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) c.shapes += ' ';
    c.shapes += inputs[i].shape.str();
  }
  c.make = [inputs = std::move(inputs), make = std::move(make), fn = std::move(fn)](Rng& rng) {
    std::unique_ptr<Module> m = make(rng);
    std::vector<std::string> names;
    std::vector<Tensor> xs;
    for (const auto& in : inputs) {
      names.push_back(in.name);
      xs.push_back(rng.uniform_tensor(in.shape, in.lo, in.hi, DType::f64));
    }
    return std::unique_ptr<GradcheckFixture>(
        new ModuleFixture(std::move(m), std::move(names), std::move(xs), fn));
  };
  return c;
}

namespace {

template <class M>
M& as(Module& m) {
  return static_cast<M&>(m);
}

// Outputs and final states of a recurrent layer in one tensor, so one check covers all three.
Var rnn_outputs(const RNN::Output& o) {
  std::vector<Var> parts{ops::reshape(o.y, {-1}), ops::reshape(o.h_n, {-1})};
  if (o.c_n.value().defined()) parts.push_back(ops::reshape(o.c_n, {-1}));
  return ops::concat(parts, 0);
}

void add_recurrent_cases(GradcheckRegistry& reg, CellKind kind) {
  const std::string cell = cell_name(kind);
  const std::string cell_layer = "cell." + cell;
  const bool lstm = kind == CellKind::lstm;
  // A single cell step, gradients into x, h and (LSTM) c.
  std::vector<InputTensor> cell_in{{"x", {3, 4}}, {"h", {3, 5}}};
  if (lstm) cell_in.push_back({"c", {3, 5}});
  reg.add(module_case(
      cell_layer, "one step, batch 3", cell_in,
      [kind](Rng& rng) { return std::make_unique<Cell>(kind, 4, 5, rng, DType::f64); },
      [lstm](Tape& tape, Module& m, std::span<const Var> x) {
        RecurrentState s = as<Cell>(m).forward(tape, x[0], {x[1], lstm ? x[2] : Var()});
        return lstm ? ops::concat(std::vector<Var>{s.h, s.c}, 1) : s.h;
      }));

  // Layers over a padded batch of lengths 4, 2 and 3 (S = 4), with initial states.
  static const int64_t kLengths[] = {4, 2, 3};
  for (int layers : {1, 2}) {
    for (bool bidir : {false, true}) {
      if (layers == 1 && bidir && kind != CellKind::rnn) continue;  // covered by the 2-layer case
      const int64_t states = layers * (bidir ? 2 : 1);
      std::vector<InputTensor> in{{"x", {3, 4, 2}}, {"h0", {states, 3, 3}}};
      if (lstm) in.push_back({"c0", {states, 3, 3}});
      reg.add(module_case(
          cell,
          fmt::format("{} layer{}{}, padded batch", layers, layers > 1 ? "s" : "",
                      bidir ? " bidirectional" : ""),
          in,
          [kind, layers, bidir](Rng& rng) {
            return std::make_unique<RNN>(kind, 2, 3, layers, bidir, rng, DType::f64);
          },
          [lstm](Tape& tape, Module& m, std::span<const Var> x) {
            return rnn_outputs(as<RNN>(m).forward(tape, x[0], kLengths, x[1], lstm ? x[2] : Var()));
          }));
    }
  }
}

// One attention step over a padded batch (lengths 4 and 2 of S = 4), checking the query, the keys
// (their padded rows must get exactly no gradient), the summary and the variant's parameters.
void add_attention_cases(GradcheckRegistry& reg) {
  static const int64_t kLengths[] = {4, 2};
  for (AttentionKind kind : all_attention_kinds()) {
    const std::string layer = std::string("attention.") + attention_name(kind);
    reg.require_layer(layer);
    // local-m centres its window on the step; the others ignore it. Both the fused kernels and
    // the elementary ops they replace (what `tapestry explain` shows) are checked.
    for (int64_t step : {0, 3}) {
      for (bool fused : {true, false}) {
        if (step > 0 && kind != AttentionKind::local_m) continue;
        if (!fused && kind == AttentionKind::none) continue;
        reg.add(module_case(
            layer,
            fmt::format("B=2, S=4, lengths 4 and 2, step {}{}", step, fused ? "" : ", composed"),
            {{"query", {2, 3}}, {"keys", {2, 4, 3}}, {"summary", {2, 3}}},
            [kind, fused](Rng& rng) {
              AttentionConfig c{kind, 3, 3, 2, 1, fused};
              return std::unique_ptr<Module>(Attention::make(c, rng, DType::f64).release());
            },
            [step](Tape& tape, Module& m, std::span<const Var> x) {
              auto& attn = as<Attention>(m);
              AttentionMemory mem = attn.prepare(tape, x[1], kLengths, x[2]);
              AttentionResult r = attn.attend(tape, mem, x[0], step);
              if (!r.weights.value().defined()) return ops::reshape(r.context, {-1});
              return ops::concat(
                  std::vector<Var>{ops::reshape(r.weights, {-1}), ops::reshape(r.context, {-1})},
                  0);
            }));
      }
    }
  }
  // general and bahdanau with a query size different from the key size (a bidirectional encoder).
  for (AttentionKind kind : {AttentionKind::bahdanau, AttentionKind::general, AttentionKind::concat,
                             AttentionKind::local_p}) {
    reg.add(module_case(
        std::string("attention.") + attention_name(kind), "query 2, keys 4, attention 3",
        {{"query", {2, 2}}, {"keys", {2, 3, 4}}, {"summary", {2, 4}}},
        [kind](Rng& rng) {
          AttentionConfig c{kind, 2, 4, 3, 1};
          return std::unique_ptr<Module>(Attention::make(c, rng, DType::f64).release());
        },
        [](Tape& tape, Module& m, std::span<const Var> x) {
          static const int64_t lengths[] = {3, 1};
          auto& attn = as<Attention>(m);
          AttentionMemory mem = attn.prepare(tape, x[1], lengths, x[2]);
          AttentionResult r = attn.attend(tape, mem, x[0], 1);
          return ops::concat(
              std::vector<Var>{ops::reshape(r.weights, {-1}), ops::reshape(r.context, {-1})}, 0);
        }));
  }
}

// Tensors in one flat vector, so that one check covers outputs and weights together.
Var flat(std::initializer_list<Var> parts) {
  std::vector<Var> v;
  for (const Var& p : parts) v.push_back(ops::reshape(p, {-1}));
  return ops::concat(v, 0);
}

// Key padding (B,S) = (2,S): the second row's last key is padding.
Tensor padded_keys(int64_t s) {
  Tensor valid = Tensor::full({2, s}, 1.0, DType::f64);
  valid.set(2 * s - 1, 0.0);
  return valid;
}

// Multi-head attention and the Transformer layers: d = 4, 2 heads, keys with padding, the causal
// mask, packed and separate projections, post- and pre-norm. Every parameter and every input.
void add_transformer_cases(GradcheckRegistry& reg) {
  for (const char* layer :
       {"layer_norm", "multihead_attention", "transformer_encoder_layer",
        "transformer_decoder_layer", "transformer_encoder", "transformer_decoder"})
    reg.require_layer(layer);
  reg.add(module_case(
      "layer_norm", "(B,S,d) = (2,3,4)", {{"x", {2, 3, 4}}},
      [](Rng& rng) {
        auto m = std::make_unique<LayerNorm>(4, 1e-5, DType::f64);
        // Away from weight 1, bias 0, so their gradients are not a special case.
        for (auto* p : m->parameters())
          p->value.copy_from(rng.uniform_tensor(p->shape(), 0.5, 1.5, DType::f64));
        return m;
      },
      [](Tape& tape, Module& m, std::span<const Var> x) {
        return as<LayerNorm>(m).forward(tape, x[0]);
      }));
  for (bool packed : {true, false}) {
    for (bool causal : {false, true}) {
      reg.add(module_case(
          "multihead_attention",
          fmt::format("{} projections, d 4, 2 heads, key padding{}", packed ? "packed" : "separate",
                      causal ? ", causal" : ""),
          {{"query", {2, 3, 4}}, {"key", {2, 3, 4}}, {"value", {2, 3, 4}}},
          [packed](Rng& rng) {
            auto m = std::make_unique<MultiheadAttention>(4, 2, 0.0, rng, DType::f64, packed);
            // Non-zero biases, so their gradients are checked at a general point.
            for (auto& [name, p] : m->named_parameters())
              if (p->value.ndim() == 1)
                p->value.copy_from(rng.uniform_tensor(p->shape(), -0.5, 0.5, DType::f64));
            return m;
          },
          [causal](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            auto o = as<MultiheadAttention>(m).forward(tape, x[0], x[1], x[2], padded_keys(3),
                                                       causal, rng);
            return flat({o.y, o.weights});
          }));
    }
  }
  reg.add(module_case(
      "multihead_attention",
      "separate projections, packed rows: query (5,4) of lengths {3,2}, key and value (3,4) of "
      "lengths {2,1}",
      {{"query", {5, 4}}, {"key", {3, 4}}, {"value", {3, 4}}},
      [](Rng& rng) {
        return std::make_unique<MultiheadAttention>(4, 2, 0.0, rng, DType::f64, false);
      },
      [](Tape& tape, Module& m, std::span<const Var> x) {
        Rng rng(1);
        Packing q, kv;
        q.assign(std::vector<int64_t>{3, 2}, 3);
        kv.assign(std::vector<int64_t>{2, 1}, 2);
        auto o = as<MultiheadAttention>(m).forward(tape, x[0], x[1], x[2], padded_keys(2), false,
                                                   rng, AttentionPath::fused, &q, &kv);
        return o.y;
      }));
  reg.add(module_case(
      "multihead_attention", "self-attention, one packed product, S = 3", {{"x", {2, 3, 4}}},
      [](Rng& rng) { return std::make_unique<MultiheadAttention>(4, 2, 0.0, rng, DType::f64); },
      [](Tape& tape, Module& m, std::span<const Var> x) {
        Rng rng(1);
        auto o = as<MultiheadAttention>(m).self_attention(tape, x[0], padded_keys(3), true, rng);
        return flat({o.y, o.weights});
      }));
  for (NormPlace norm : {NormPlace::post, NormPlace::pre}) {
    for (Activation act : {Activation::relu, Activation::gelu}) {
      TransformerLayerConfig c;
      c.d_model = 4;
      c.heads = 2;
      c.ffn = 6;
      c.dropout = 0;
      c.norm = norm;
      c.activation = act;
      const std::string what = fmt::format("{}-norm, {}, d 4, 2 heads, ffn 6, padding",
                                           norm_place_name(norm), activation_name(act));
      reg.add(module_case(
          "transformer_encoder_layer", what, {{"x", {2, 3, 4}}},
          [c](Rng& rng) { return std::make_unique<TransformerEncoderLayer>(c, rng, DType::f64); },
          [](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            return as<TransformerEncoderLayer>(m).forward(tape, x[0], padded_keys(3), rng);
          }));
      reg.add(module_case(
          "transformer_decoder_layer", what + ", causal", {{"y", {2, 3, 4}}, {"memory", {2, 2, 4}}},
          [c](Rng& rng) { return std::make_unique<TransformerDecoderLayer>(c, rng, DType::f64); },
          [](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            return as<TransformerDecoderLayer>(m).forward(tape, x[0], x[1], padded_keys(3),
                                                          padded_keys(2), rng);
          }));
      if (act == Activation::gelu) continue;
      // Packed rows (what the training loss runs): padded_keys' lengths {3,2} and {2,1}.
      reg.add(module_case(
          "transformer_encoder", "2 layers, packed rows (N,d) = (5,4), " + what, {{"x", {5, 4}}},
          [c](Rng& rng) { return std::make_unique<TransformerEncoder>(c, 2, rng, DType::f64); },
          [](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            Packing p;
            p.assign(std::vector<int64_t>{3, 2}, 3);
            return as<TransformerEncoder>(m).forward(tape, x[0], padded_keys(3), rng, nullptr, &p);
          }));
      reg.add(module_case(
          "transformer_decoder", "2 layers, packed rows (5,4) and memory (3,4), " + what,
          {{"y", {5, 4}}, {"memory", {3, 4}}},
          [c](Rng& rng) { return std::make_unique<TransformerDecoder>(c, 2, rng, DType::f64); },
          [](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            Packing tgt, mem;
            tgt.assign(std::vector<int64_t>{3, 2}, 3);
            mem.assign(std::vector<int64_t>{2, 1}, 2);
            return as<TransformerDecoder>(m).forward(tape, x[0], x[1], padded_keys(3),
                                                     padded_keys(2), rng, nullptr, &tgt, &mem);
          }));
      reg.add(module_case(
          "transformer_encoder", "2 layers and the final norm, " + what, {{"x", {2, 3, 4}}},
          [c](Rng& rng) { return std::make_unique<TransformerEncoder>(c, 2, rng, DType::f64); },
          [](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            return as<TransformerEncoder>(m).forward(tape, x[0], padded_keys(3), rng);
          }));
      reg.add(module_case(
          "transformer_decoder", "2 layers and the final norm, " + what,
          {{"y", {2, 3, 4}}, {"memory", {2, 2, 4}}},
          [c](Rng& rng) { return std::make_unique<TransformerDecoder>(c, 2, rng, DType::f64); },
          [](Tape& tape, Module& m, std::span<const Var> x) {
            Rng rng(1);
            return as<TransformerDecoder>(m).forward(tape, x[0], x[1], padded_keys(3),
                                                     padded_keys(2), rng);
          }));
    }
  }
}

}  // namespace

void add_gradcheck_cases(GradcheckRegistry& reg) {
  for (const char* layer :
       {"linear", "embedding", "cell.rnn", "cell.gru", "cell.lstm", "rnn", "gru", "lstm"})
    reg.require_layer(layer);

  for (bool bias : {true, false}) {
    reg.add(module_case(
        "linear", bias ? "with bias, (N,in)" : "no bias, (N,in)", {{"x", {4, 3}}},
        [bias](Rng& rng) { return std::make_unique<Linear>(3, 5, bias, rng, DType::f64); },
        [](Tape& tape, Module& m, std::span<const Var> x) {
          return as<Linear>(m).forward(tape, x[0]);
        }));
  }
  reg.add(module_case(
      "linear", "with bias, (B,S,in)", {{"x", {2, 3, 4}}},
      [](Rng& rng) { return std::make_unique<Linear>(4, 2, true, rng, DType::f64); },
      [](Tape& tape, Module& m, std::span<const Var> x) {
        return as<Linear>(m).forward(tape, x[0]);
      }));

  // The padding row gets no gradient by design, so it must not appear among the ids here (a
  // separate test checks that it stays untouched when it does).
  reg.add(module_case(
      "embedding", "(B,S) ids with a repeated id", {},
      [](Rng& rng) { return std::make_unique<Embedding>(6, 3, rng, 0, DType::f64); },
      [](Tape& tape, Module& m, std::span<const Var>) {
        static const int32_t ids[] = {1, 4, 4, 2, 5, 1};
        return as<Embedding>(m).forward(tape, ids, Shape{2, 3});
      }));

  for (CellKind kind : {CellKind::rnn, CellKind::gru, CellKind::lstm})
    add_recurrent_cases(reg, kind);
  add_attention_cases(reg);
  add_transformer_cases(reg);
}

}  // namespace tapestry::nn
