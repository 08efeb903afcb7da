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

namespace tapestry::models {

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

struct Seq2SeqConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;  // including the 4 specials
  int64_t emb = 64;                      // E: embedding size (source and target)
  int64_t hidden = 128;                  // H: encoder and decoder hidden size
  int layers = 1;                        // encoder and decoder layers
  bool bidirectional = true;             // encoder directions (K = 2H when true)
  nn::CellKind cell = nn::CellKind::gru;
  nn::AttentionKind attention = nn::AttentionKind::bahdanau;
  DecoderKind decoder = DecoderKind::bahdanau;
  int64_t attn_size = 0;  // A: additive attention's hidden size (0: H)
  int64_t window = 2;     // D: local attention's half width
  double dropout = 0.0;   // on embeddings, between layers and before the output layer
  // Bahdanau decoder only: the output layer reads [s_t; c_t; E y_{t-1}] (true) or s_t alone (the
  // benchmark reference's simplified output layer).
  bool deep_output = true;
  uint64_t seed = 1;  // initialisation and dropout
  // How the attention runs, not what it computes (so not saved): fused kernels, or the elementary
  // ops that `tapestry explain` shows one by one (nn::AttentionConfig::fused).
  bool fused_attention = true;

  int64_t key_size() const { return hidden * (bidirectional ? 2 : 1); }
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
