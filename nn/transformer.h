// Transformer encoder and decoder layers and stacks, post-norm (the 2017 paper,
// torch.nn.Transformer's default) or pre-norm, with PyTorch's parameter names and shapes.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "tapestry/nn/layer_norm.h"
#include "tapestry/nn/linear.h"
#include "tapestry/nn/multihead_attention.h"

namespace tapestry::nn {

enum class NormPlace { post, pre };
enum class Activation { relu, gelu };
const char* norm_place_name(NormPlace n);           // "post", "pre"
NormPlace parse_norm_place(std::string_view name);  // throws ValueError listing the valid names
const char* activation_name(Activation a);          // "relu", "gelu"
Activation parse_activation(std::string_view name);

struct TransformerLayerConfig {
  int64_t d_model = 256;
  int64_t heads = 8;
  int64_t ffn = 2048;    // dim_feedforward
  double dropout = 0.1;  // on sublayer outputs, inside the feed-forward block, on attention weights
  NormPlace norm = NormPlace::post;
  Activation activation = Activation::relu;
  double eps = 1e-5;  // LayerNorm's
};

// post: x = norm1(x + dropout(self_attn(x)));  x = norm2(x + dropout(ffn(x)))
// pre:  x = x + dropout(self_attn(norm1(x)));  x = x + dropout(ffn(norm2(x)))
// ffn(x) = linear2(dropout(act(linear1(x))))
// Parameters (torch.nn.TransformerEncoderLayer): self_attn.{in_proj_weight, in_proj_bias,
// out_proj.weight, out_proj.bias}, linear1.{weight,bias} (ffn,d), linear2 (d,ffn), norm1, norm2.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(const TransformerLayerConfig& c, Rng& rng, DType dtype = DType::f32);
  // x (B,S,d), valid (B,S) (1 real; undefined: all real) -> (B,S,d). With `weights`, the self-
  // attention's per-head weights (B,h,S,S) are stored there, recorded step by step so that they
  // carry gradients; without, the attention is one fused op (AttentionPath, the same bits).
  // With a packing (and no weights), x is (N,d), the batch's real positions, and so is the result;
  // the attention masks the packing's padding whatever `valid` says (it may be undefined).
  Var forward(Tape& tape, const Var& x, const Tensor& valid, Rng& rng, Var* weights = nullptr,
              const Packing* packing = nullptr);
  MultiheadAttention& self_attn() { return self_attn_; }

 private:
  TransformerLayerConfig c_;
  MultiheadAttention self_attn_;
  Linear linear1_, linear2_;
  LayerNorm norm1_, norm2_;
};

// The decoder layer adds cross-attention over the encoder's memory between the two:
// post: x = norm1(x + dropout(self_attn(x, causal)));  x = norm2(x + dropout(mha(x, memory)));
//       x = norm3(x + dropout(ffn(x)))        (pre-norm as in the encoder layer)
// Parameters (torch.nn.TransformerDecoderLayer): self_attn, multihead_attn, linear1, linear2,
// norm1, norm2, norm3.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(const TransformerLayerConfig& c, Rng& rng, DType dtype = DType::f32);
  struct Weights {
    Var self, cross;  // (B,h,T,T) and (B,h,T,S)
    // forward() only: both attentions' q, k, v, scores and context (tapestry explain)
    MultiheadAttention::Parts self_parts, cross_parts;
  };
  // x (B,T,d), memory (B,S,d), tgt_valid (B,T), mem_valid (B,S) -> (B,T,d); the self-attention is
  // causal (position t sees positions <= t). Attention recorded as in the encoder layer: step by
  // step with `weights`, fused without. With packings (and no weights), x is (Nt,d) and memory
  // (Ns,d), the real positions of the target and source batches, and the result is (Nt,d); the
  // attentions mask the packings' padding whatever the masks say (they may be undefined).
  Var forward(Tape& tape, const Var& x, const Var& memory, const Tensor& tgt_valid,
              const Tensor& mem_valid, Rng& rng, Weights* weights = nullptr,
              const Packing* tgt_packing = nullptr, const Packing* mem_packing = nullptr);
  // One new position x (B,d) against the caches (no gradient): equal to row t of forward() over
  // the prefix, in eval mode.
  Var step(Tape& tape, const Var& x, KVCache& self_cache, KVCache& cross_cache,
           Weights* weights = nullptr);
  MultiheadAttention& self_attn() { return self_attn_; }
  MultiheadAttention& cross_attn() { return cross_attn_; }

 private:
  Var ffn(Tape& tape, const Var& x, Rng& rng);
  TransformerLayerConfig c_;
  MultiheadAttention self_attn_, cross_attn_;
  Linear linear1_, linear2_;
  LayerNorm norm1_, norm2_, norm3_;
};

// The stacks: `layers` layers, then a final LayerNorm ("norm"), as torch.nn.Transformer builds
// them (for either norm place). Parameters: layers.<i>.*, norm.{weight,bias}.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerLayerConfig& c, int layers, Rng& rng,
                     DType dtype = DType::f32);
  // weights, if given, receives each layer's self-attention weights; packing as in the layer.
  Var forward(Tape& tape, const Var& x, const Tensor& valid, Rng& rng,
              std::vector<Var>* weights = nullptr, const Packing* packing = nullptr);
  TransformerEncoderLayer& layer(int i) { return *layers_[static_cast<size_t>(i)]; }
  int num_layers() const { return static_cast<int>(layers_.size()); }

 private:
  std::vector<std::unique_ptr<TransformerEncoderLayer>> layers_;
  LayerNorm norm_;
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerLayerConfig& c, int layers, Rng& rng,
                     DType dtype = DType::f32);
  Var forward(Tape& tape, const Var& x, const Var& memory, const Tensor& tgt_valid,
              const Tensor& mem_valid, Rng& rng,
              std::vector<TransformerDecoderLayer::Weights>* weights = nullptr,
              const Packing* tgt_packing = nullptr, const Packing* mem_packing = nullptr);
  // Caches for decoding b rows up to `capacity` positions against `memory` (B,S,d): per layer a
  // self-attention cache and the memory's projected keys and values.
  struct Caches {
    std::vector<KVCache> self, cross;
    void select_rows(std::span<const int32_t> rows);
  };
  Caches start(Tape& tape, const Var& memory, const Tensor& mem_valid, int64_t capacity);
  // The same into `caches`, whose lists keep their capacity (decoding many batches allocates
  // nothing here once the lists have grown).
  void start(Tape& tape, const Var& memory, const Tensor& mem_valid, int64_t capacity,
             Caches& caches);
  // The next position x (B,d) -> (B,d), after the final norm.
  Var step(Tape& tape, const Var& x, Caches& caches,
           std::vector<TransformerDecoderLayer::Weights>* weights = nullptr);
  TransformerDecoderLayer& layer(int i) { return *layers_[static_cast<size_t>(i)]; }
  int num_layers() const { return static_cast<int>(layers_.size()); }

 private:
  std::vector<std::unique_ptr<TransformerDecoderLayer>> layers_;
  LayerNorm norm_;
};

// The sinusoidal positions of Vaswani et al.: PE[p, 2i] = sin(p / 10000^(2i/d)),
// PE[p, 2i+1] = cos(p / 10000^(2i/d)), for positions [start, start + n): (n, d), d even.
Tensor sinusoidal_positions(int64_t start, int64_t n, int64_t d, DType dtype);

}  // namespace tapestry::nn
