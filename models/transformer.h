// Transformer: the encoder-decoder of Vaswani et al. 2017 on Tapestry's layers, with the
// parameter names of torch_transformer.py's model (src_emb, tgt_emb, transformer.*, generator),
// teacher-forced training and decoding with a key/value cache.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "tapestry/core/random.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/config.h"
#include "tapestry/nn/embedding.h"
#include "tapestry/nn/transformer.h"

namespace tapestry::models {

class TransformerModel : public nn::Module {
 public:
  // Every matrix Xavier-uniform (as torch_transformer.py and bentrevett's notebook 6 initialise
  // theirs), vectors as their layers start them.
  TransformerModel(const Seq2SeqConfig& config, Rng& rng, DType dtype);

  struct Memory {
    Var states;    // (B,S,d): the encoder's output
    Tensor valid;  // (B,S): 1 at real source positions
  };
  // What the model attended to, for explain and report.
  struct Weights {
    std::vector<Var> encoder;                                   // per layer (B,h,S,S)
    std::vector<nn::TransformerDecoderLayer::Weights> decoder;  // per layer (B,h,T,T), (B,h,T,S)
  };

  // x = dropout(E[ids] sqrt(d) + P[start ..]) for ids (B,L) -> (B,L,d); with a packing of the
  // (B,L) batch, only its real positions -> (N,d).
  Var embed(Tape& tape, bool target, std::span<const int32_t> ids, int64_t b, int64_t l,
            int64_t start, Rng& rng, const nn::Packing* packing = nullptr);
  Memory encode(Tape& tape, const Batch& batch, Rng& rng, Weights* weights = nullptr);
  // The decoder's output over the whole teacher-forced target: (B,T,d).
  Var decode(Tape& tape, const Memory& memory, const Batch& batch, Rng& rng,
             Weights* weights = nullptr);
  // (N,d) -> (N,V) or (B,T,d) -> (B,T,V)
  Var logits(Tape& tape, const Var& features);
  // Mean cross-entropy over the batch's real target tokens (label-smoothed if eps > 0). Encoder
  // and decoder run on packed rows (nn::Packing): the same values as encode() and decode(), no
  // position-wise work at padded positions (the attention itself runs padded), and dropout draws
  // its masks over the packed rows. Throws ValueError for a target token past its row's length.
  Var loss(Tape& tape, const Batch& batch, Rng& rng, double label_smoothing = 0);

  // ---- decoding, one position at a time (under NoGrad, in eval mode)
  struct DecodeState {
    Memory memory;
    nn::TransformerDecoder::Caches caches;
    int64_t t = 0;  // the next position
  };
  // Encodes the batch, repeats its rows as `rows` says (beam search's k rows per sentence; empty:
  // each row once) and makes caches for `capacity` positions.
  DecodeState start(Tape& tape, const Batch& batch, std::span<const int32_t> rows,
                    int64_t capacity);
  // The same into `state`, reusing its caches' lists.
  void start(Tape& tape, const Batch& batch, std::span<const int32_t> rows, int64_t capacity,
             DecodeState& state);
  // Feeds y_prev (B ids) at the next position: the decoder's output (B,d). With `weights`, each
  // layer's self-attention (B,h,t+1) and cross-attention (B,h,S) weights of this position.
  Var step(Tape& tape, DecodeState& state, std::span<const int32_t> y_prev,
           std::vector<nn::TransformerDecoderLayer::Weights>* weights = nullptr);
  // Beam search: row i continues from row rows[i].
  void select_rows(DecodeState& state, std::span<const int32_t> rows);

  const Seq2SeqConfig& config() const { return config_; }
  nn::TransformerEncoder& encoder() { return encoder_; }
  nn::TransformerDecoder& decoder() { return decoder_; }
  nn::Embedding& src_emb() { return src_emb_; }
  nn::Embedding& tgt_emb() { return tgt_emb_; }

 private:
  // The `transformer` submodule of the PyTorch model: encoder and decoder stacks.
  class Stacks : public nn::Module {
   public:
    Stacks(nn::TransformerEncoder& e, nn::TransformerDecoder& d) {
      add_module("encoder", e);
      add_module("decoder", d);
    }
  };
  // The output layer: weight (V,d) (none when the target embedding is shared) and bias (V).
  class Generator : public nn::Module {
   public:
    Generator(int64_t d, int64_t v, bool own_weight, Rng& rng, DType dtype);
    nn::Parameter* weight = nullptr;
    nn::Parameter* bias = nullptr;
  };
  // Sinusoidal positions [0, kCachedPositions), computed once: every training step and every
  // decoding step reads its rows instead of computing sines and cosines (about 1,300 of them per
  // step of the tiny preset); later positions are computed when asked for.
  static constexpr int64_t kCachedPositions = 256;
  // The positions embed() adds: P[start + j] for each j of `offsets` -> (N,d), or for every
  // j = 0 .. L-1 when it is empty -> (L,d); sinusoidal or learned, as the config says.
  Var positions(Tape& tape, bool target, int64_t start, int64_t l,
                std::span<const int32_t> offsets);
  Seq2SeqConfig config_;
  DType dtype_;
  Tensor sinusoids_;  // (kCachedPositions, d), sinusoidal positions only
  nn::Embedding src_emb_, tgt_emb_;
  std::unique_ptr<nn::Embedding> src_pos_, tgt_pos_;  // learned positions only
  nn::TransformerEncoder encoder_;
  nn::TransformerDecoder decoder_;
  Stacks stacks_;
  Generator generator_;
};

}  // namespace tapestry::models
