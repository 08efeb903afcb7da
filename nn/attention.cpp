// Attention variants composed from ops, so every gradient comes from the ops' checked backwards.
#include "tapestry/nn/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tapestry/nn/init.h"
#include "tapestry/ops/ops.h"

namespace tapestry::nn {

namespace {

struct KindName {
  AttentionKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {AttentionKind::none, "none"},       {AttentionKind::bahdanau, "bahdanau"},
    {AttentionKind::dot, "dot"},         {AttentionKind::general, "general"},
    {AttentionKind::concat, "concat"},   {AttentionKind::scaled_dot, "scaled-dot"},
    {AttentionKind::cosine, "cosine"},   {AttentionKind::local_m, "local-m"},
    {AttentionKind::local_p, "local-p"},
};

}  // namespace

const char* attention_name(AttentionKind kind) {
  for (const auto& kn : kKindNames)
    if (kn.kind == kind) return kn.name;
  return "?";
}

AttentionKind parse_attention(std::string_view name) {
  std::string valid;
  for (const auto& kn : kKindNames) {
    if (name == kn.name) return kn.kind;
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", kn.name);
  }
  throw ValueError(fmt::format("unknown attention '{}' (valid: {})", name, valid));
}

const std::vector<AttentionKind>& all_attention_kinds() {
  static const std::vector<AttentionKind> kinds = [] {
    std::vector<AttentionKind> v;
    for (const auto& kn : kKindNames) v.push_back(kn.kind);
    return v;
  }();
  return kinds;
}

bool weights_sum_to_one(AttentionKind kind) {
  return kind != AttentionKind::none && kind != AttentionKind::local_m &&
         kind != AttentionKind::local_p;
}

Parameter& Attention::param(const char* name, const Shape& shape, double bound, Rng& rng,
                            DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  init::uniform(t, -bound, bound, rng);
  return add_parameter(name, t);
}

namespace {

double inv_sqrt(int64_t n) {
  return 1.0 / std::sqrt(static_cast<double>(n));
}

// s . h_j for every j: (B,S,K) x (B,K) -> (B,S)
Var dot_scores(const Var& keys, const Var& q, bool fused) {
  if (fused) return ops::dot_scores(keys, q);
  const int64_t b = keys.dim(0), s = keys.dim(1), k = keys.dim(2);
  return ops::reshape(ops::matmul(keys, ops::reshape(q, Shape{b, k, 1})), Shape{b, s});
}

// c = sum_j a_j h_j: (B,S) x (B,S,K) -> (B,K)
Var weighted_sum(const Var& a, const Var& keys, bool fused) {
  if (fused) return ops::weighted_sum(a, keys);
  const int64_t b = keys.dim(0), s = keys.dim(1), k = keys.dim(2);
  return ops::reshape(ops::matmul(ops::reshape(a, Shape{b, 1, s}), keys), Shape{b, k});
}

// ---------------------------------------------------------------------------------------------
// none: the fixed-context baseline (the encoder's final state at every step)
class NoAttention : public Attention {
 public:
  explicit NoAttention(const AttentionConfig& c) : Attention(c) {}

 protected:
  Var weights(Tape&, const AttentionMemory&, const Var&, int64_t) override { return Var(); }
};

// ---------------------------------------------------------------------------------------------
// bahdanau: e_j = v . tanh(W s + b + U h_j);  concat: e_j = v . tanh(W [s; h_j])
class AdditiveAttention : public Attention {
 public:
  AdditiveAttention(const AttentionConfig& c, Rng& rng, DType dtype) : Attention(c) {
    const int64_t hq = c.query_size, k = c.key_size, a = c.attn_size;
    if (c.kind == AttentionKind::bahdanau) {
      w_ = &param("W", {a, hq}, inv_sqrt(hq), rng, dtype);
      b_ = &param("b", {a}, inv_sqrt(hq), rng, dtype);
      u_ = &param("U", {a, k}, inv_sqrt(k), rng, dtype);
    } else {  // Luong's concat: one W over [s; h_j], no bias
      w_ = &param("W", {a, hq + k}, inv_sqrt(hq + k), rng, dtype);
    }
    v_ = &param("v", {a}, inv_sqrt(a), rng, dtype);
  }

 protected:
  // U h_j for every j: (B,S,K) x (A,K)^T -> (B,S,A)
  Var precompute(Tape& tape, const Var& keys) override {
    return ops::matmul(keys, key_weight(tape), false, true, weight_packs(tape));
  }

  Var weights(Tape& tape, const AttentionMemory& m, const Var& query, int64_t) override {
    const int64_t b = m.keys.dim(0), s = m.keys.dim(1), a = config_.attn_size;
    Var e;
    {
      Region r(tape, "attention.scores");
      // W s + b: (B,Hq) x (A,Hq)^T -> (B,A); one affine op when fused, else the product and
      // the add.
      const Var bias = b_ ? b_->var(tape) : Var();
      Var wq;
      if (config_.fused) {
        wq = ops::affine(query, query_weight(tape), bias, weight_packs(tape));
      } else {
        wq = ops::matmul(query, query_weight(tape), false, true);
        if (b_) wq = ops::add(wq, bias);
      }
      if (config_.fused) {
        e = ops::additive_scores(m.precomputed, wq, v_->var(tape));
      } else {
        Var pre = ops::add(m.precomputed, ops::reshape(wq, Shape{b, 1, a}));  // (B,S,A)
        // (B,S,A) x (A,1) -> (B,S)
        e = ops::reshape(ops::matmul(ops::tanh(pre), ops::reshape(v_->var(tape), Shape{a, 1})),
                         Shape{b, s});
      }
    }
    Region r(tape, "attention.softmax");
    return ops::softmax(e, -1, m.valid);
  }

 private:
  // Packs for W and U, which are parameters; concat's blocks of W are copies, never packed.
  WeightPacks* weight_packs(Tape& tape) const { return u_ ? tape.weight_packs() : nullptr; }
  // The parts of W that multiply s and h_j (for concat, column blocks of the one W).
  Var query_weight(Tape& tape) {
    if (u_) return w_->var(tape);
    return ops::slice(w_->var(tape), 1, 0, config_.query_size);
  }
  Var key_weight(Tape& tape) {
    if (u_) return u_->var(tape);
    return ops::slice(w_->var(tape), 1, config_.query_size, config_.key_size);
  }

  Parameter* w_ = nullptr;
  Parameter* b_ = nullptr;
  Parameter* u_ = nullptr;
  Parameter* v_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// dot: e_j = s . h_j;  scaled-dot: e_j = s . h_j / sqrt(K);  general: e_j = s^T W h_j
class MultiplicativeAttention : public Attention {
 public:
  MultiplicativeAttention(const AttentionConfig& c, Rng& rng, DType dtype) : Attention(c) {
    if (c.kind == AttentionKind::general)
      w_ = &param("W", {c.query_size, c.key_size}, inv_sqrt(c.key_size), rng, dtype);
  }

 protected:
  Var weights(Tape& tape, const AttentionMemory& m, const Var& query, int64_t) override {
    Var e;
    {
      Region r(tape, "attention.scores");
      // s^T W h_j = (s W) . h_j: (B,Hq) x (Hq,K) -> (B,K)
      Var q = w_ ? ops::matmul(query, w_->var(tape)) : query;
      e = dot_scores(m.keys, q, config_.fused);
      if (config_.kind == AttentionKind::scaled_dot) e = ops::scale(e, inv_sqrt(config_.key_size));
    }
    Region r(tape, "attention.softmax");
    return ops::softmax(e, -1, m.valid);
  }

 private:
  Parameter* w_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// cosine: e_j = beta (s . h_j) / (|s| |h_j|)
// The norms are sqrt(sum x^2 + eps) so that zero vectors (padding) give finite scores.
class CosineAttention : public Attention {
 public:
  static constexpr double kEps = 1e-8;
  static constexpr double kInitialBeta = 5.0;  // cosines lie in [-1, 1]: start with some contrast

  CosineAttention(const AttentionConfig& c, DType dtype) : Attention(c) {
    beta_ = &add_parameter("beta", Tensor::full({1}, kInitialBeta, dtype));
  }

 protected:
  // |h_j|: (B,S,K) -> (B,S)
  Var precompute(Tape&, const Var& keys) override {
    return ops::sqrt(ops::add_scalar(ops::sum(ops::mul(keys, keys), {2}), kEps));
  }

  Var weights(Tape& tape, const AttentionMemory& m, const Var& query, int64_t) override {
    Var e;
    {
      Region r(tape, "attention.scores");
      Var qn = ops::sqrt(ops::add_scalar(ops::sum(ops::mul(query, query), {1}, true), kEps));
      Var cos =
          ops::div(dot_scores(m.keys, query, config_.fused), ops::mul(qn, m.precomputed));  // (B,S)
      e = ops::mul(cos, beta_->var(tape));
    }
    Region r(tape, "attention.softmax");
    return ops::softmax(e, -1, m.valid);
  }

 private:
  Parameter* beta_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// local-m and local-p: general scores in a window of half width D around p_t, the softmax over the
// window scaled by a Gaussian of standard deviation D/2 centred on p_t.
class LocalAttention : public Attention {
 public:
  LocalAttention(const AttentionConfig& c, Rng& rng, DType dtype) : Attention(c) {
    w_ = &param("W", {c.query_size, c.key_size}, inv_sqrt(c.key_size), rng, dtype);
    if (c.kind == AttentionKind::local_p) {
      wp_ = &param("W_p", {c.attn_size, c.query_size}, inv_sqrt(c.query_size), rng, dtype);
      vp_ = &param("v_p", {c.attn_size}, inv_sqrt(c.attn_size), rng, dtype);
    }
  }

 protected:
  Var weights(Tape& tape, const AttentionMemory& m, const Var& query, int64_t step) override {
    const int64_t b = m.keys.dim(0), s = m.keys.dim(1);
    const DType dtype = m.keys.dtype();
    Var e, p;
    {
      Region r(tape, "attention.scores");
      e = dot_scores(m.keys, ops::matmul(query, w_->var(tape)), config_.fused);
      // p_t (B,1): the window's centre, between 0 and S_b - 1.
      Tensor last = Tensor::empty({b, 1}, dtype);
      for (int64_t i = 0; i < b; ++i)
        last.set(i, static_cast<double>(std::max<int64_t>(m.lengths[i] - 1, 0)));
      if (wp_) {
        const int64_t a = config_.attn_size;
        Var hidden = ops::tanh(ops::matmul(query, wp_->var(tape), false, true));  // (B,A)
        Var z = ops::matmul(hidden, ops::reshape(vp_->var(tape), Shape{a, 1}));   // (B,1)
        p = ops::mul(ops::sigmoid(z), last);
      } else {
        Tensor centre = Tensor::empty({b, 1}, dtype);
        for (int64_t i = 0; i < b; ++i)
          centre.set(i, std::min(static_cast<double>(step), last.at(i)));
        p = centre;
      }
    }
    Region r(tape, "attention.softmax");
    // The window is a constant mask (which positions count is not differentiable); the Gaussian
    // carries the gradient into p_t.
    const double d = static_cast<double>(config_.window);
    Tensor window = m.valid.clone();
    Tensor positions = Tensor::empty({1, s}, dtype);
    for (int64_t j = 0; j < s; ++j) positions.set(j, static_cast<double>(j));
    for (int64_t i = 0; i < b; ++i) {
      const double centre = p.value().at(i);
      for (int64_t j = 0; j < s; ++j)
        if (std::abs(static_cast<double>(j) - centre) > d) window.set(i * s + j, 0.0);
    }
    const double sigma = d / 2;
    Var offset = ops::sub(positions, p);  // (1,S) - (B,1) -> (B,S)
    Var gauss = ops::exp(ops::scale(ops::mul(offset, offset), -1.0 / (2 * sigma * sigma)));
    return ops::mul(ops::softmax(e, -1, window), gauss);
  }

 private:
  Parameter* w_ = nullptr;
  Parameter* wp_ = nullptr;
  Parameter* vp_ = nullptr;
};

}  // namespace

std::unique_ptr<Attention> Attention::make(const AttentionConfig& config, Rng& rng, DType dtype) {
  AttentionConfig c = config;
  if (c.attn_size == 0) c.attn_size = c.query_size;
  const char* name = attention_name(c.kind);
  if (c.query_size < 1 || c.key_size < 1 || c.attn_size < 1)
    throw ValueError(
        fmt::format("attention {}: sizes must be positive (query {}, key {}, attention {})", name,
                    c.query_size, c.key_size, c.attn_size));
  const bool same_size = c.kind == AttentionKind::dot || c.kind == AttentionKind::scaled_dot ||
                         c.kind == AttentionKind::cosine;
  if (same_size && c.query_size != c.key_size)
    throw ValueError(fmt::format(
        "attention {}: the query size {} must equal the key size {} (use general or bahdanau for "
        "different sizes)",
        name, c.query_size, c.key_size));
  const bool local = c.kind == AttentionKind::local_m || c.kind == AttentionKind::local_p;
  if (local && c.window < 1)
    throw ValueError(fmt::format("attention {}: the window half width must be at least 1, got {}",
                                 name, c.window));
  switch (c.kind) {
    case AttentionKind::none:
      return std::unique_ptr<Attention>(new NoAttention(c));
    case AttentionKind::bahdanau:
    case AttentionKind::concat:
      return std::unique_ptr<Attention>(new AdditiveAttention(c, rng, dtype));
    case AttentionKind::dot:
    case AttentionKind::scaled_dot:
    case AttentionKind::general:
      return std::unique_ptr<Attention>(new MultiplicativeAttention(c, rng, dtype));
    case AttentionKind::cosine:
      return std::unique_ptr<Attention>(new CosineAttention(c, dtype));
    case AttentionKind::local_m:
    case AttentionKind::local_p:
      return std::unique_ptr<Attention>(new LocalAttention(c, rng, dtype));
  }
  throw ValueError("attention: unknown kind");
}

AttentionMemory Attention::prepare(Tape& tape, const Var& keys, std::span<const int64_t> lengths,
                                   const Var& summary) {
  const char* name = attention_name(config_.kind);
  if (keys.ndim() != 3 || keys.dim(2) != config_.key_size ||
      static_cast<int64_t>(lengths.size()) != keys.dim(0) || summary.ndim() != 2 ||
      summary.dim(0) != keys.dim(0) || summary.dim(1) != config_.key_size)
    throw ShapeError(fmt::format(
        "attention {}: keys {}, {} lengths and summary {} do not fit: expected (B,S,{}), B lengths "
        "and (B,{})",
        name, keys.shape().str(), lengths.size(), summary.shape().str(), config_.key_size,
        config_.key_size));
  const int64_t b = keys.dim(0), s = keys.dim(1);
  AttentionMemory m;
  m.keys = keys;
  m.summary = summary;
  m.lengths.assign(lengths.begin(), lengths.end());
  m.valid = Tensor::zeros({b, s}, keys.dtype());
  for (int64_t i = 0; i < b; ++i) {
    if (lengths[i] < 0 || lengths[i] > s)
      throw ValueError(fmt::format("attention {}: length {} of row {} is outside [0, {}]", name,
                                   lengths[i], i, s));
    for (int64_t j = 0; j < lengths[i]; ++j) m.valid.set(i * s + j, 1.0);
  }
  Region r(tape, "attention.keys");
  m.precomputed = precompute(tape, keys);
  return m;
}

AttentionMemory select_rows(const AttentionMemory& m, std::span<const int32_t> rows) {
  const int64_t b = m.keys.dim(0), s = m.keys.dim(1), n = static_cast<int64_t>(rows.size());
  AttentionMemory out;
  out.keys = ops::gather(m.keys, rows);
  out.summary = ops::gather(m.summary, rows);
  if (m.precomputed.value().defined()) out.precomputed = ops::gather(m.precomputed, rows);
  out.valid = Tensor::empty({n, s}, m.valid.dtype());
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = rows[i];
    if (r < 0 || r >= b)
      throw IndexError(fmt::format("attention memory: row {} outside [0, {})", r, b));
    out.valid.rows(i, 1).copy_from(m.valid.rows(r, 1));
    out.lengths.push_back(m.lengths[r]);
  }
  return out;
}

AttentionResult Attention::attend(Tape& tape, const AttentionMemory& m, const Var& query,
                                  int64_t step) {
  if (query.ndim() != 2 || query.dim(0) != m.keys.dim(0) || query.dim(1) != config_.query_size)
    throw ShapeError(fmt::format("attention {}: query {} does not fit keys {}: expected (B,{})",
                                 attention_name(config_.kind), query.shape().str(),
                                 m.keys.shape().str(), config_.query_size));
  if (config_.kind == AttentionKind::none) return {Var(), m.summary};
  Var a = weights(tape, m, query, step);
  Region r(tape, "attention.context");
  return {a, weighted_sum(a, m.keys, config_.fused)};
}

}  // namespace tapestry::nn
