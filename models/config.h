// Seq2SeqConfig: the shape of an encoder-attention-decoder model, checked, and stored as metadata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tapestry/nn/attention.h"
#include "tapestry/nn/rnn.h"

namespace tapestry::models {

enum class DecoderKind { bahdanau, luong };
const char* decoder_name(DecoderKind kind);
DecoderKind parse_decoder(std::string_view name);  // throws ValueError listing the valid names

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
  // As JSON (a checkpoint's "config" metadata), and back; from_json validates.
  std::string to_json() const;
  static Seq2SeqConfig from_json(std::string_view json);
  // One line for logs: "gru bi 1x128 emb 64, bahdanau attention, bahdanau decoder".
  std::string summary() const;
};

}  // namespace tapestry::models
