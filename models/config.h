// Seq2SeqConfig: the shape of an encoder-attention-decoder model, checked, and stored as metadata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tapestry/core/shape.h"
#include "tapestry/nn/attention.h"
#include "tapestry/nn/rnn.h"
#include "tapestry/nn/transformer.h"

namespace tapestry::models {

// rnn: an RNN encoder, an attention network and an RNN decoder; transformer: the encoder-decoder
// of Vaswani et al. 2017, attention only.
enum class Arch { rnn, transformer };
const char* arch_name(Arch arch);
Arch parse_arch(std::string_view name);  // throws ValueError listing the valid names

// Where a Transformer's positions come from: fixed sinusoids, or a learned table of
// max_positions rows.
enum class Positions { sinusoidal, learned };
const char* positions_name(Positions p);
Positions parse_positions(std::string_view name);

enum class DecoderKind { bahdanau, luong };
const char* decoder_name(DecoderKind kind);
DecoderKind parse_decoder(std::string_view name);  // throws ValueError listing the valid names

// The sizes a configuration may take, the same as `tapestry train`'s flags allow: a checkpoint
// whose config lies outside them is refused before anything is built from it. Token ids are
// int32, hence the vocabulary's bound.
inline constexpr int64_t kMaxVocab = 2147483647;
inline constexpr int64_t kMaxWidth = 65536;  // emb, hidden and attn_size
inline constexpr int kMaxLayers = 8;
inline constexpr int64_t kMaxWindow = 1000;
inline constexpr int64_t kMaxHeads = 256;
inline constexpr int64_t kMaxPositions = 8192;

struct Seq2SeqConfig {
  Arch arch = Arch::rnn;
  int64_t src_vocab = 0, tgt_vocab = 0;  // including the 4 specials
  // ---- arch rnn
  int64_t emb = 64;           // E: embedding size (source and target)
  int64_t hidden = 128;       // H: encoder and decoder hidden size
  int layers = 1;             // encoder and decoder layers
  bool bidirectional = true;  // encoder directions (K = 2H when true)
  nn::CellKind cell = nn::CellKind::gru;
  nn::AttentionKind attention = nn::AttentionKind::bahdanau;
  DecoderKind decoder = DecoderKind::bahdanau;
  int64_t attn_size = 0;  // A: additive attention's hidden size (0: H)
  int64_t window = 2;     // D: local attention's half width
  // rnn: on embeddings, between layers and before the output layer; transformer: on the
  // embedded inputs, sublayer outputs, inside the feed-forward block and on attention weights.
  double dropout = 0.0;
  // Bahdanau decoder only: the output layer reads [s_t; c_t; E y_{t-1}] (true) or s_t alone (the
  // benchmark reference's simplified output layer).
  bool deep_output = true;
  // ---- arch transformer
  int64_t d_model = 256;  // d: embeddings and every layer's width
  int64_t heads = 8;      // h: attention heads, d / h each
  int64_t ffn = 512;      // the feed-forward block's inner width
  int enc_layers = 3, dec_layers = 3;
  nn::NormPlace norm = nn::NormPlace::post;
  nn::Activation activation = nn::Activation::relu;
  Positions positions = Positions::sinusoidal;
  int64_t max_positions = 256;  // learned positions: the table's rows (longest sentence + 1)
  // The target embedding is also the output layer's weight (Press and Wolf 2017).
  bool share_embeddings = false;

  uint64_t seed = 1;  // initialisation and dropout
  // How the attention runs, not what it computes (so not saved): fused kernels, or the elementary
  // ops that `tapestry explain` shows one by one (nn::AttentionConfig::fused).
  bool fused_attention = true;

  int64_t key_size() const { return hidden * (bidirectional ? 2 : 1); }
  bool transformer() const { return arch == Arch::transformer; }
  // The longest sequence (source, or target with <bos>) the model can take: max_positions for
  // learned positions, unbounded (INT64_MAX) otherwise.
  int64_t position_limit() const;
  nn::TransformerLayerConfig layer_config() const;
  // Throws ValueError naming the field and the rule (e.g. dot attention needs K = H).
  void validate() const;
  // As JSON (a checkpoint's "config" metadata), and back. from_json checks every key's JSON type
  // and range before using it, naming it ("config.layers: 4294967297 is out of range [1, 8]",
  // "config.hidden: \"abc\" is not an integer"), then validates.
  std::string to_json() const;
  static Seq2SeqConfig from_json(std::string_view json);
  // Every parameter of a Seq2Seq built from this (validated) config, by dotted name in the order
  // the model registers them, with its shape: computed, not allocated, so that a checkpoint's
  // tensors can be checked against its config before the model is built.
  std::vector<std::pair<std::string, Shape>> parameter_shapes() const;
  int64_t parameter_count() const;
  // One line for logs: "gru bi 1x128 emb 64, bahdanau attention, bahdanau decoder".
  std::string summary() const;
};

}  // namespace tapestry::models
