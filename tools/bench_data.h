// The benchmark's workload, as the PyTorch reference (../shared/bench/torch_seq2seq.py) defines it:
// size presets, the synthetic batch pool, the model's config and the analytic GEMM FLOP count.
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
  int64_t vocab = 0, emb = 0, hidden = 0;       // V (source and target), E, H
  int64_t attn = 0;                             // A: the additive attention's hidden size
  int64_t batch = 0, src_len = 0, tgt_len = 0;  // B, S, T (T counts <eos>)
  int64_t warmup = 0, iters = 0, decode_iters = 0;
  bool bidir = false;
  double min_len_frac = 0.7;  // row lengths are uniform in [ceil(frac * L), L]
  int64_t pool = 8;           // distinct batches, cycled

  int64_t directions() const { return bidir ? 2 : 1; }
};

inline const std::vector<std::string>& bench_preset_names() {
  static const std::vector<std::string> names = {"tiny", "small", "medium"};
  return names;
}

// The reference's PRESETS, with A = H (its --attn-dim default). Throws ValueError for an unknown
// name, listing the valid ones.
inline BenchShape bench_preset(std::string_view name) {
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
// lengths (with <eos>), B*S source tokens and B*T target tokens, all uniform (tokens in [3, V-1]).
// Every batch is padded to the full S and T, as the reference's tensors are, so each step does
// the same work whatever the longest row. Throws ValueError for sizes the rules cannot fill.
inline std::vector<models::Batch> make_bench_batches(const BenchShape& s, Rng& rng) {
  using models::Vocab;
  if (s.vocab <= Vocab::kUnk || s.batch < 1 || s.src_len < 1 || s.tgt_len < 2 || s.pool < 1 ||
      !(s.min_len_frac >= 0 && s.min_len_frac <= 1))
    throw ValueError(fmt::format(
        "bench: cannot generate batches with V={} (needs > 3), B={}, S={}, T={} (needs >= 2), "
        "pool={}, min length fraction {} (needs [0, 1])",
        s.vocab, s.batch, s.src_len, s.tgt_len, s.pool, s.min_len_frac));
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
      const int64_t token = uniform(Vocab::kUnk, s.vocab - 1);
      batch.src[i] = i % S < batch.src_lengths[i / S] ? static_cast<int32_t>(token) : Vocab::kPad;
    }
    batch.tgt_out.resize(static_cast<size_t>(b * T));
    batch.tgt_in.resize(static_cast<size_t>(b * T));
    for (int64_t i = 0; i < b * T; ++i) {
      const int64_t token = uniform(Vocab::kUnk, s.vocab - 1), t = i % T,
                    n = batch.tgt_lengths[i / T];
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
// Bahdanau attention and decoder, an output layer reading s_t only, one layer, no dropout.
inline models::Seq2SeqConfig bench_model_config(const BenchShape& s, uint64_t seed) {
  models::Seq2SeqConfig c;
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

// The reference's train_gemm_flops: multiply-add FLOPs (x2) of the matrix products of one step,
// d directions, D = d*H, N_src real source tokens in the batch:
//   forward F = N_src*d*6H(E+H) + B*2DH + B*S*2DA + B*T*[2HA + 2SA + 2SD + 6H(E+D+H) + 2HV]
//   (encoder GRU, bridge, keys W_h h_j; per decoder position W_s s, v^T tanh(.), the context,
//   the decoder GRUCell and the output projection); training ~= 3F (backward: one product for
//   the input gradient and one for the weight gradient per forward product).
inline GemmFlops train_gemm_flops(const BenchShape& s, double n_src_tokens) {
  const double d = static_cast<double>(s.directions()), E = static_cast<double>(s.emb),
               H = static_cast<double>(s.hidden), A = static_cast<double>(s.attn),
               V = static_cast<double>(s.vocab), B = static_cast<double>(s.batch),
               S = static_cast<double>(s.src_len), T = static_cast<double>(s.tgt_len);
  const double D = d * H;
  const double fwd = n_src_tokens * d * 6 * H * (E + H) + B * 2 * D * H + B * S * 2 * D * A +
                     B * T * (2 * H * A + 2 * S * A + 2 * S * D + 6 * H * (E + D + H) + 2 * H * V);
  return {fwd, 3 * fwd};
}

}  // namespace tapestry::cli
