// The benchmark's workload, as the PyTorch references (../shared/bench/torch_seq2seq.py and
// torch_transformer.py) define it: size presets, the synthetic batch pool, the model's config and
// the analytic GEMM FLOP counts.
// Header-only: the tests link the libraries, not the tool's sources.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/core/random.h"
#include "tapestry/models/batch.h"
#include "tapestry/models/config.h"
#include "tapestry/models/vocab.h"

namespace tapestry::cli {

// One benchmark size: the model, the batches and how long to time.
struct BenchShape {
  models::Arch arch = models::Arch::rnn;
  int64_t vocab = 0;                     // V: source and target, unless set apart below
  int64_t src_vocab = 0, tgt_vocab = 0;  // 0: vocab (the Transformer's may differ)
  // ---- rnn
  int64_t emb = 0, hidden = 0;  // E, H
  int64_t attn = 0;             // A: the additive attention's hidden size
  // ---- transformer: d, h, f, layers, dropout (the RNN reference has none)
  int64_t d_model = 0, heads = 0, ffn = 0, enc_layers = 0, dec_layers = 0;
  double dropout = 0;
  int64_t batch = 0, src_len = 0, tgt_len = 0;  // B, S, T (T counts <eos>)
  int64_t warmup = 0, iters = 0, decode_iters = 0;
  bool bidir = false;
  double min_len_frac = 0.7;  // row lengths are uniform in [ceil(frac * L), L]
  int64_t pool = 8;           // distinct batches, cycled

  int64_t directions() const { return bidir ? 2 : 1; }
  int64_t source_vocab() const { return src_vocab > 0 ? src_vocab : vocab; }
  int64_t target_vocab() const { return tgt_vocab > 0 ? tgt_vocab : vocab; }
};

inline const std::vector<std::string>& bench_preset_names() {
  static const std::vector<std::string> names = {"tiny", "small", "medium"};
  return names;
}

// The Transformer reference's PRESETS (torch_transformer.py): V, d, layers (encoder = decoder), h,
// f, B, S = T, warm-up, iterations (training = decoding); dropout 0.1.
inline BenchShape transformer_bench_preset(std::string_view name) {
  BenchShape s;
  s.arch = models::Arch::transformer;
  s.dropout = 0.1;
  auto set = [&s](int64_t v, int64_t d, int64_t layers, int64_t heads, int64_t f, int64_t b,
                  int64_t len, int64_t warmup, int64_t iters) {
    s.vocab = v, s.d_model = d, s.enc_layers = s.dec_layers = layers, s.heads = heads, s.ffn = f;
    s.batch = b, s.src_len = s.tgt_len = len;
    s.warmup = warmup, s.iters = s.decode_iters = iters;
  };
  if (name == "tiny")
    set(32, 64, 2, 4, 128, 1, 10, 20, 200);
  else if (name == "small")
    set(1000, 128, 2, 4, 256, 32, 15, 5, 40);
  else if (name == "medium")  // the size of bentrevett's notebook 6 on Multi30k
    set(8000, 256, 3, 8, 512, 64, 20, 2, 8);
  else
    throw ValueError(
        fmt::format("bench: unknown preset '{}' (valid: tiny, small, medium)", std::string(name)));
  return s;
}

// The reference's PRESETS, with A = H (its --attn-dim default); the Transformer's for --arch
// transformer. Throws ValueError for an unknown name, listing the valid ones.
inline BenchShape bench_preset(std::string_view name, models::Arch arch = models::Arch::rnn) {
  if (arch == models::Arch::transformer) return transformer_bench_preset(name);
  BenchShape s;
  auto set = [&s](int64_t v, int64_t e, int64_t h, int64_t b, int64_t len, int64_t warmup,
                  int64_t iters) {
    s.vocab = v, s.emb = e, s.hidden = h, s.attn = h, s.batch = b;
    s.src_len = s.tgt_len = len;
    s.warmup = warmup, s.iters = s.decode_iters = iters;
  };
  if (name == "tiny")  // per-op overhead dominated, like a learner's toy
    set(32, 32, 64, 1, 10, 20, 200);
  else if (name == "small")
    set(1000, 64, 128, 32, 15, 5, 40);
  else if (name == "medium")  // Multi30k-like
    set(8000, 256, 512, 64, 20, 2, 8);
  else
    throw ValueError(
        fmt::format("bench: unknown preset '{}' (valid: tiny, small, medium)", std::string(name)));
  return s;
}

// The shortest row: the reference's max(floor_len, ceil(frac * L)) (source floor 1, target 2,
// since a target holds at least one token and <eos>).
inline int64_t bench_min_len(double frac, int64_t len, int64_t floor_len) {
  return std::max<int64_t>(floor_len,
                           static_cast<int64_t>(std::ceil(frac * static_cast<double>(len))));
}

// The reference's make_batches with Tapestry's generator: per batch, B source lengths, B target
// lengths (with <eos>), B*S source tokens and B*T target tokens, all uniform (tokens in [3, V-1],
// V the source's or the target's vocabulary; both references draw the same batches).
// Every batch is padded to the full S and T, as the reference's tensors are, so each step does
// the same work whatever the longest row. Throws ValueError for sizes the rules cannot fill.
inline std::vector<models::Batch> make_bench_batches(const BenchShape& s, Rng& rng) {
  using models::Vocab;
  const int64_t vs = s.source_vocab(), vt = s.target_vocab();
  if (std::min(vs, vt) <= Vocab::kUnk || s.batch < 1 || s.src_len < 1 || s.tgt_len < 2 ||
      s.pool < 1 || !(s.min_len_frac >= 0 && s.min_len_frac <= 1))
    throw ValueError(fmt::format(
        "bench: cannot generate batches with V={} (needs > 3), B={}, S={}, T={} (needs >= 2), "
        "pool={}, min length fraction {} (needs [0, 1])",
        std::min(vs, vt), s.batch, s.src_len, s.tgt_len, s.pool, s.min_len_frac));
  const int64_t b = s.batch, S = s.src_len, T = s.tgt_len;
  const int64_t lo_s = bench_min_len(s.min_len_frac, S, 1);
  const int64_t lo_t = bench_min_len(s.min_len_frac, T, 2);
  auto uniform = [&rng](int64_t lo, int64_t hi) { return lo + rng.randint(hi - lo + 1); };
  std::vector<models::Batch> pool;
  for (int64_t k = 0; k < s.pool; ++k) {
    models::Batch batch;
    batch.size = b, batch.src_len = S, batch.tgt_len = T;
    for (int64_t r = 0; r < b; ++r) batch.src_lengths.push_back(uniform(lo_s, S));
    for (int64_t r = 0; r < b; ++r) batch.tgt_lengths.push_back(uniform(lo_t, T));
    batch.src.resize(static_cast<size_t>(b * S));
    for (int64_t i = 0; i < b * S; ++i) {
      const int64_t token = uniform(Vocab::kUnk, vs - 1);
      batch.src[i] = i % S < batch.src_lengths[i / S] ? static_cast<int32_t>(token) : Vocab::kPad;
    }
    batch.tgt_out.resize(static_cast<size_t>(b * T));
    batch.tgt_in.resize(static_cast<size_t>(b * T));
    for (int64_t i = 0; i < b * T; ++i) {
      const int64_t token = uniform(Vocab::kUnk, vt - 1), t = i % T, n = batch.tgt_lengths[i / T];
      batch.tgt_out[i] = t < n - 1    ? static_cast<int32_t>(token)
                         : t == n - 1 ? Vocab::kEos
                                      : Vocab::kPad;
    }
    // tgt_in: <bos>, then tgt_out shifted right by one, <pad> from each row's length on.
    for (int64_t r = 0; r < b; ++r)
      for (int64_t t = 0; t < T; ++t)
        batch.tgt_in[r * T + t] = t >= batch.tgt_lengths[r] ? Vocab::kPad
                                  : t == 0                  ? Vocab::kBos
                                                            : batch.tgt_out[r * T + t - 1];
    for (int64_t r = 0; r < b; ++r) batch.index.push_back(k * b + r);
    pool.push_back(std::move(batch));
  }
  return pool;
}

// The reference's model: GRU encoder (bidirectional per the shape), s_0 = tanh(W_b h_last),
// Bahdanau attention and decoder, an output layer reading s_t only, one layer, no dropout. For
// --arch transformer, torch_transformer.py's: nn.Transformer's post-norm layers with ReLU,
// sinusoidal positions, separate embeddings and output layer.
inline models::Seq2SeqConfig bench_model_config(const BenchShape& s, uint64_t seed) {
  models::Seq2SeqConfig c;
  if (s.arch == models::Arch::transformer) {
    c.arch = models::Arch::transformer;
    c.src_vocab = s.source_vocab(), c.tgt_vocab = s.target_vocab();
    c.d_model = s.d_model, c.heads = s.heads, c.ffn = s.ffn;
    c.enc_layers = static_cast<int>(s.enc_layers), c.dec_layers = static_cast<int>(s.dec_layers);
    c.norm = nn::NormPlace::post;
    c.activation = nn::Activation::relu;
    c.positions = models::Positions::sinusoidal;
    c.share_embeddings = false;
    c.dropout = s.dropout;
    c.seed = seed;
    return c;
  }
  c.src_vocab = c.tgt_vocab = s.vocab;
  c.emb = s.emb;
  c.hidden = s.hidden;
  c.attn_size = s.attn;
  c.layers = 1;
  c.bidirectional = s.bidir;
  c.cell = nn::CellKind::gru;
  c.attention = nn::AttentionKind::bahdanau;
  c.decoder = models::DecoderKind::bahdanau;
  c.deep_output = false;
  c.dropout = 0.0;
  c.seed = seed;
  return c;
}

struct GemmFlops {
  double forward = 0, training = 0;
};

inline GemmFlops transformer_train_gemm_flops(const BenchShape& s);

// The reference's train_gemm_flops: multiply-add FLOPs (x2) of the matrix products of one step,
// d directions, D = d*H, N_src real source tokens in the batch:
//   forward F = N_src*d*6H(E+H) + B*2DH + B*S*2DA + B*T*[2HA + 2SA + 2SD + 6H(E+D+H) + 2HV]
//   (encoder GRU, bridge, keys W_h h_j; per decoder position W_s s, v^T tanh(.), the context,
//   the decoder GRUCell and the output projection); training ~= 3F (backward: one product for
//   the input gradient and one for the weight gradient per forward product). The Transformer's
//   count is transformer_train_gemm_flops, below.

inline GemmFlops train_gemm_flops(const BenchShape& s, double n_src_tokens) {
  if (s.arch == models::Arch::transformer) return transformer_train_gemm_flops(s);
  const double d = static_cast<double>(s.directions()), E = static_cast<double>(s.emb),
               H = static_cast<double>(s.hidden), A = static_cast<double>(s.attn),
               V = static_cast<double>(s.vocab), B = static_cast<double>(s.batch),
               S = static_cast<double>(s.src_len), T = static_cast<double>(s.tgt_len);
  const double D = d * H;
  const double fwd = n_src_tokens * d * 6 * H * (E + H) + B * 2 * D * H + B * S * 2 * D * A +
                     B * T * (2 * H * A + 2 * S * A + 2 * S * D + 6 * H * (E + D + H) + 2 * H * V);
  return {fwd, 3 * fwd};
}

// torch_transformer.py's counts, on padded shapes (every position is computed, and the full T x T
// scores under the causal mask), 2 FLOP per multiply-add, d = d_model, f = ffn. Each layer is its
// position-wise products, over the n positions that run through them (B*S, or B*T for the
// decoder's n_t, when padded), and its attention products, always over the padded (B,T,S):
//   an encoder layer 2n(4d^2 + 2df) + 4BS^2 d (Q, K, V and output projections, the feed-forward
//   block, then Q.K^T and A.V over all heads);
//   a decoder layer 2n_t(6d^2 + 2df) + 4n_s d^2 + 4BT^2 d + 4BTSd (self- and cross-attention
//   projections but the memory's K and V, the FFN; those K and V over the n_s memory positions;
//   the products).
inline double transformer_encoder_layer_flops(double n, double B, double S, double d, double f) {
  return 2 * n * (4 * d * d + 2 * d * f) + 4 * B * S * S * d;
}
inline double transformer_decoder_layer_flops(double n_t, double n_s, double B, double T, double S,
                                              double d, double f) {
  return 2 * n_t * (6 * d * d + 2 * d * f) + 4 * n_s * d * d + 4 * B * T * T * d +
         4 * B * T * S * d;
}

// A training step over n_src source and n_tgt target positions: forward F = L_enc enc + L_dec dec
// + 2 n_tgt dV_tgt, training 3F. The reference counts every padded position (B*S and B*T);
// Tapestry's loss packs the real ones (nn::Packing), so its projections, feed-forward blocks and
// output layer run on the n_src and n_tgt real positions, and its attention products stay padded.
inline GemmFlops transformer_train_flops(const BenchShape& s, double n_src, double n_tgt) {
  const double B = static_cast<double>(s.batch), S = static_cast<double>(s.src_len),
               T = static_cast<double>(s.tgt_len), d = static_cast<double>(s.d_model),
               f = static_cast<double>(s.ffn), V = static_cast<double>(s.target_vocab());
  const double fwd =
      static_cast<double>(s.enc_layers) * transformer_encoder_layer_flops(n_src, B, S, d, f) +
      static_cast<double>(s.dec_layers) *
          transformer_decoder_layer_flops(n_tgt, n_src, B, T, S, d, f) +
      2 * n_tgt * d * V;
  return {fwd, 3 * fwd};
}

inline GemmFlops transformer_train_gemm_flops(const BenchShape& s) {
  const double B = static_cast<double>(s.batch);
  return transformer_train_flops(s, B * static_cast<double>(s.src_len),
                                 B * static_cast<double>(s.tgt_len));
}

// The reference's greedy decoding of a batch (decode_gemm_flops): the encoder once, then at step
// p = 1..T the decoder over the whole prefix of p positions and the output layer of the last one.
// Tapestry's decoder caches keys and values and computes only the new position, so this counts
// the reference's work, not Tapestry's: decode_gflops compares the two on the same scale.
inline double transformer_decode_gemm_flops(const BenchShape& s) {
  const double B = static_cast<double>(s.batch), S = static_cast<double>(s.src_len),
               d = static_cast<double>(s.d_model), f = static_cast<double>(s.ffn),
               V = static_cast<double>(s.target_vocab());
  double fl =
      static_cast<double>(s.enc_layers) * transformer_encoder_layer_flops(B * S, B, S, d, f);
  for (int64_t p = 1; p <= s.tgt_len; ++p) {
    const auto P = static_cast<double>(p);
    fl += static_cast<double>(s.dec_layers) *
              transformer_decoder_layer_flops(B * P, B * S, B, P, S, d, f) +
          2 * B * d * V;
  }
  return fl;
}

}  // namespace tapestry::cli
