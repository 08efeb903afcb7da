// Transformer layers and stacks composed from MultiheadAttention, Linear, LayerNorm and dropout.
#include "tapestry/nn/transformer.h"

#include <fmt/format.h>

#include <cmath>

#include "tapestry/nn/init.h"
#include "tapestry/ops/arith.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/shape_ops.h"
#include "tapestry/ops/unary.h"

namespace tapestry::nn {

const char* norm_place_name(NormPlace n) {
  return n == NormPlace::post ? "post" : "pre";
}

NormPlace parse_norm_place(std::string_view name) {
  if (name == "post") return NormPlace::post;
  if (name == "pre") return NormPlace::pre;
  throw ValueError(fmt::format("unknown norm place '{}' (valid: post, pre)", name));
}

const char* activation_name(Activation a) {
  return a == Activation::relu ? "relu" : "gelu";
}

Activation parse_activation(std::string_view name) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  throw ValueError(fmt::format("unknown activation '{}' (valid: relu, gelu)", name));
}

namespace {

Var activate(Activation a, const Var& x) {
  return a == Activation::relu ? ops::relu(x) : ops::gelu(x);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// encoder layer

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerConfig& c, Rng& rng,
                                                 DType dtype)
    : c_(c),
      self_attn_(c.d_model, c.heads, c.dropout, rng, dtype),
      linear1_(c.d_model, c.ffn, true, rng, dtype),
      linear2_(c.ffn, c.d_model, true, rng, dtype),
      norm1_(c.d_model, c.eps, dtype),
      norm2_(c.d_model, c.eps, dtype) {
  add_module("self_attn", self_attn_);
  add_module("linear1", linear1_);
  add_module("linear2", linear2_);
  add_module("norm1", norm1_);
  add_module("norm2", norm2_);
}

Var TransformerEncoderLayer::forward(Tape& tape, const Var& x, const Tensor& valid, Rng& rng,
                                     Var* weights, const Packing* packing) {
  const bool train = training();
  // Asked for the weights: record each step of the attention, so that they carry gradients.
  const AttentionPath path = weights ? AttentionPath::steps : AttentionPath::fused;
  auto sa = [&](const Var& in) {
    MultiheadAttention::Output o =
        self_attn_.self_attention(tape, in, valid, false, rng, path, packing);
    if (weights) *weights = o.weights;
    return ops::dropout(o.y, c_.dropout, rng, train);
  };
  auto ff = [&](const Var& in) {
    const Var h =
        ops::dropout(activate(c_.activation, linear1_.forward(tape, in)), c_.dropout, rng, train);
    return ops::dropout(linear2_.forward(tape, h), c_.dropout, rng, train);
  };
  if (c_.norm == NormPlace::pre) {
    const Var y = x + sa(norm1_.forward(tape, x));
    return y + ff(norm2_.forward(tape, y));
  }
  const Var y = norm1_.forward(tape, x + sa(x));
  return norm2_.forward(tape, y + ff(y));
}

// ---------------------------------------------------------------------------------------------
// decoder layer

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerConfig& c, Rng& rng,
                                                 DType dtype)
    : c_(c),
      self_attn_(c.d_model, c.heads, c.dropout, rng, dtype),
      cross_attn_(c.d_model, c.heads, c.dropout, rng, dtype),
      linear1_(c.d_model, c.ffn, true, rng, dtype),
      linear2_(c.ffn, c.d_model, true, rng, dtype),
      norm1_(c.d_model, c.eps, dtype),
      norm2_(c.d_model, c.eps, dtype),
      norm3_(c.d_model, c.eps, dtype) {
  add_module("self_attn", self_attn_);
  add_module("multihead_attn", cross_attn_);
  add_module("linear1", linear1_);
  add_module("linear2", linear2_);
  add_module("norm1", norm1_);
  add_module("norm2", norm2_);
  add_module("norm3", norm3_);
}

Var TransformerDecoderLayer::ffn(Tape& tape, const Var& x, Rng& rng) {
  const bool train = training();
  const Var h =
      ops::dropout(activate(c_.activation, linear1_.forward(tape, x)), c_.dropout, rng, train);
  return ops::dropout(linear2_.forward(tape, h), c_.dropout, rng, train);
}

Var TransformerDecoderLayer::forward(Tape& tape, const Var& x, const Var& memory,
                                     const Tensor& tgt_valid, const Tensor& mem_valid, Rng& rng,
                                     Weights* weights, const Packing* tgt_packing,
                                     const Packing* mem_packing) {
  const bool train = training();
  const AttentionPath path = weights ? AttentionPath::steps : AttentionPath::fused;
  auto sa = [&](const Var& in) {
    MultiheadAttention::Output o =
        self_attn_.self_attention(tape, in, tgt_valid, true, rng, path, tgt_packing);
    if (weights) {
      weights->self = o.weights;
      weights->self_parts = o.parts;
    }
    return ops::dropout(o.y, c_.dropout, rng, train);
  };
  auto ca = [&](const Var& in) {
    MultiheadAttention::Output o = cross_attn_.forward(tape, in, memory, memory, mem_valid, false,
                                                       rng, path, tgt_packing, mem_packing);
    if (weights) {
      weights->cross = o.weights;
      weights->cross_parts = o.parts;
    }
    return ops::dropout(o.y, c_.dropout, rng, train);
  };
  if (c_.norm == NormPlace::pre) {
    const Var y = x + sa(norm1_.forward(tape, x));
    const Var z = y + ca(norm2_.forward(tape, y));
    return z + ffn(tape, norm3_.forward(tape, z), rng);
  }
  const Var y = norm1_.forward(tape, x + sa(x));
  const Var z = norm2_.forward(tape, y + ca(y));
  return norm3_.forward(tape, z + ffn(tape, z, rng));
}

Var TransformerDecoderLayer::step(Tape& tape, const Var& x, KVCache& self_cache,
                                  KVCache& cross_cache, Weights* weights) {
  Rng unused(0);  // eval mode: no dropout draws
  auto sa = [&](const Var& in) {
    MultiheadAttention::Output o = self_attn_.step(tape, in, self_cache, true);
    if (weights) weights->self = o.weights;
    return o.y;
  };
  auto ca = [&](const Var& in) {
    MultiheadAttention::Output o = cross_attn_.step(tape, in, cross_cache, false);
    if (weights) weights->cross = o.weights;
    return o.y;
  };
  if (c_.norm == NormPlace::pre) {
    const Var y = x + sa(norm1_.forward(tape, x));
    const Var z = y + ca(norm2_.forward(tape, y));
    return z + ffn(tape, norm3_.forward(tape, z), unused);
  }
  const Var y = norm1_.forward(tape, x + sa(x));
  const Var z = norm2_.forward(tape, y + ca(y));
  return norm3_.forward(tape, z + ffn(tape, z, unused));
}

// ---------------------------------------------------------------------------------------------
// stacks

TransformerEncoder::TransformerEncoder(const TransformerLayerConfig& c, int layers, Rng& rng,
                                       DType dtype)
    : norm_(c.d_model, c.eps, dtype) {
  for (int i = 0; i < layers; ++i) {
    layers_.push_back(std::make_unique<TransformerEncoderLayer>(c, rng, dtype));
    add_module(fmt::format("layers.{}", i), *layers_.back());
  }
  add_module("norm", norm_);
}

Var TransformerEncoder::forward(Tape& tape, const Var& x, const Tensor& valid, Rng& rng,
                                std::vector<Var>* weights, const Packing* packing) {
  Var y = x;
  for (auto& layer : layers_) {
    Var w;
    y = layer->forward(tape, y, valid, rng, weights ? &w : nullptr, packing);
    if (weights) weights->push_back(w);
  }
  return norm_.forward(tape, y);
}

TransformerDecoder::TransformerDecoder(const TransformerLayerConfig& c, int layers, Rng& rng,
                                       DType dtype)
    : norm_(c.d_model, c.eps, dtype) {
  for (int i = 0; i < layers; ++i) {
    layers_.push_back(std::make_unique<TransformerDecoderLayer>(c, rng, dtype));
    add_module(fmt::format("layers.{}", i), *layers_.back());
  }
  add_module("norm", norm_);
}

Var TransformerDecoder::forward(Tape& tape, const Var& x, const Var& memory,
                                const Tensor& tgt_valid, const Tensor& mem_valid, Rng& rng,
                                std::vector<TransformerDecoderLayer::Weights>* weights,
                                const Packing* tgt_packing, const Packing* mem_packing) {
  Var y = x;
  for (auto& layer : layers_) {
    TransformerDecoderLayer::Weights w;
    y = layer->forward(tape, y, memory, tgt_valid, mem_valid, rng, weights ? &w : nullptr,
                       tgt_packing, mem_packing);
    if (weights) weights->push_back(w);
  }
  return norm_.forward(tape, y);
}

void TransformerDecoder::Caches::select_rows(std::span<const int32_t> rows) {
  for (auto& c : self) c.select_rows(rows);
  for (auto& c : cross) c.select_rows(rows);
}

TransformerDecoder::Caches TransformerDecoder::start(Tape& tape, const Var& memory,
                                                     const Tensor& mem_valid, int64_t capacity) {
  Caches c;
  start(tape, memory, mem_valid, capacity, c);
  return c;
}

void TransformerDecoder::start(Tape& tape, const Var& memory, const Tensor& mem_valid,
                               int64_t capacity, Caches& caches) {
  caches.self.clear();
  caches.cross.clear();
  for (auto& layer : layers_) {
    caches.self.push_back(layer->self_attn().empty_cache(memory.dim(0), capacity));
    caches.cross.push_back(layer->cross_attn().memory_cache(tape, memory, mem_valid));
  }
}

Var TransformerDecoder::step(Tape& tape, const Var& x, Caches& caches,
                             std::vector<TransformerDecoderLayer::Weights>* weights) {
  Var y = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    TransformerDecoderLayer::Weights w;
    y = layers_[i]->step(tape, y, caches.self[i], caches.cross[i], weights ? &w : nullptr);
    if (weights) weights->push_back(w);
  }
  return norm_.forward(tape, y);
}

Tensor sinusoidal_positions(int64_t start, int64_t n, int64_t d, DType dtype) {
  if (d < 2 || d % 2 != 0)
    throw ValueError(fmt::format("sinusoidal positions: d = {} must be even", d));
  Tensor pe = Tensor::empty({n, d}, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = pe.data<T>();
    for (int64_t i = 0; i < d / 2; ++i) {
      const double freq =
          std::exp(-static_cast<double>(2 * i) * std::log(10000.0) / static_cast<double>(d));
      for (int64_t r = 0; r < n; ++r) {
        const double angle = static_cast<double>(start + r) * freq;
        p[r * d + 2 * i] = static_cast<T>(std::sin(angle));
        p[r * d + 2 * i + 1] = static_cast<T>(std::cos(angle));
      }
    }
  });
  return pe;
}

}  // namespace tapestry::nn
