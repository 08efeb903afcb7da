// MultiheadAttention composed from Tapestry's ops (affine, reshape, permute, matmul, masked
// softmax, dropout); the decoding step reads its key/value cache with a plain loop.
#include "tapestry/nn/multihead_attention.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "tapestry/nn/init.h"
#include "tapestry/ops/arith.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/matmul.h"
#include "tapestry/ops/shape_ops.h"
#include "tapestry/ops/softmax.h"

namespace tapestry::nn {

namespace {

int64_t checked_head_size(int64_t d, int64_t heads) {
  if (d < 1 || heads < 1 || d % heads != 0)
    throw ValueError(fmt::format(
        "multihead_attention: embed_dim {} must be a positive multiple of the {} heads", d, heads));
  return d / heads;
}

Tensor xavier(int64_t rows, int64_t cols, Rng& rng, DType dtype) {
  Tensor w = Tensor::empty({rows, cols}, dtype);
  init::xavier_uniform(w, rng);
  return w;
}

// key_valid (B,S) (undefined: all real) and the packing's real positions: 1 where both say real.
Tensor packed_key_valid(const Packing& p, const Tensor& key_valid, DType dtype) {
  if (key_valid.defined() &&
      (key_valid.ndim() != 2 || key_valid.dim(0) != p.b || key_valid.dim(1) != p.l))
    throw ShapeError(
        fmt::format("attention mask: key_valid {} does not fit the packing's (B,S) = ({},{})",
                    key_valid.shape().str(), p.b, p.l));
  Tensor valid = p.valid(dtype);
  if (key_valid.defined())
    dispatch(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* out = valid.data<T>();
      for (int32_t r : p.rows)
        if (key_valid.at(r) == 0) out[r] = T(0);
    });
  return valid;
}

}  // namespace

Tensor attention_valid(const Tensor& key_valid, int64_t b, int64_t t, int64_t s, bool causal,
                       DType dtype) {
  if (!key_valid.defined() && !causal) return Tensor();
  if (key_valid.defined() &&
      (key_valid.ndim() != 2 || key_valid.dim(0) != b || key_valid.dim(1) != s))
    throw ShapeError(fmt::format("attention mask: key_valid {} does not fit (B,S) = ({},{})",
                                 key_valid.shape().str(), b, s));
  const int64_t rows = causal ? t : 1;
  Tensor valid = Tensor::empty({b, 1, rows, s}, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = valid.data<T>();
    for (int64_t r = 0; r < b; ++r)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < s; ++j) {
          const bool key = !key_valid.defined() || key_valid.at(r * s + j) != 0;
          out[(r * rows + i) * s + j] = key && (!causal || j <= i) ? T(1) : T(0);
        }
  });
  return valid;
}

void KVCache::select_rows(std::span<const int32_t> rows) {
  const int64_t b = k.dim(0) / heads;
  for (int32_t r : rows)
    if (r < 0 || r >= b) throw IndexError(fmt::format("kv cache: row {} outside [0, {})", r, b));
  // Row r of t is `parts` blocks of `stride` elements, each filled in its first `used`; only
  // those are copied (a self-attention cache holds `length` of its capacity's positions).
  auto pick = [&](Tensor& t, int64_t parts, int64_t stride, int64_t used) {
    std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
    dims[0] = static_cast<int64_t>(rows.size()) * (t.dim(0) / b);
    Tensor out = Tensor::zeros(Shape(dims), t.dtype());
    dispatch(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = t.data<T>();
      T* dst = out.data<T>();
      for (size_t i = 0; i < rows.size(); ++i)
        for (int64_t p = 0; p < parts; ++p)
          std::copy_n(src + (rows[i] * parts + p) * stride, used,
                      dst + (static_cast<int64_t>(i) * parts + p) * stride);
    });
    t = std::move(out);
  };
  const int64_t stride = k.dim(1) * k.dim(2), used = length * k.dim(2);
  pick(k, heads, stride, used);
  pick(v, heads, stride, used);
  if (valid.defined()) pick(valid, 1, valid.dim(1), valid.dim(1));
}

MultiheadAttention::MultiheadAttention(int64_t d, int64_t heads, double dropout, Rng& rng,
                                       DType dtype, bool packed)
    : d_(d),
      heads_(heads),
      dk_(checked_head_size(d, heads)),
      dropout_(dropout),
      packed_(packed),
      out_proj_(d, d, true, rng, dtype) {
  if (!(dropout >= 0 && dropout < 1))
    throw ValueError(
        fmt::format("multihead_attention: dropout must be in [0, 1), got {}", dropout));
  if (packed) {
    in_proj_weight_ = &add_parameter("in_proj_weight", xavier(3 * d, d, rng, dtype));
  } else {
    q_proj_weight_ = &add_parameter("q_proj_weight", xavier(d, d, rng, dtype));
    k_proj_weight_ = &add_parameter("k_proj_weight", xavier(d, d, rng, dtype));
    v_proj_weight_ = &add_parameter("v_proj_weight", xavier(d, d, rng, dtype));
  }
  in_proj_bias_ = &add_parameter("in_proj_bias", Tensor::zeros({3 * d}, dtype));
  out_proj_.bias()->value.zero();
  add_module("out_proj", out_proj_);
}

Var MultiheadAttention::weight(Tape& tape, int part, int parts) {
  if (packed_) {
    Var w = in_proj_weight_->var(tape);
    return parts == 3 ? w : ops::slice(w, 0, part * d_, parts * d_);
  }
  Parameter* ws[3] = {q_proj_weight_, k_proj_weight_, v_proj_weight_};
  if (parts == 1) return ws[part]->var(tape);
  std::vector<Var> pieces;
  for (int i = part; i < part + parts; ++i) pieces.push_back(ws[i]->var(tape));
  return ops::concat(pieces, 0);
}

Var MultiheadAttention::project(Tape& tape, const Var& x, int part, int parts) {
  const Var w = weight(tape, part, parts), b = bias(tape, part, parts);
  if (!packed_) return ops::affine(x, w, b);
  return ops::affine(x, w, b, tape.weight_packs(), {&in_proj_weight_->value, 0, part * d_});
}

Var MultiheadAttention::bias(Tape& tape, int part, int parts) {
  Var b = in_proj_bias_->var(tape);
  return parts == 3 ? b : ops::slice(b, 0, part * d_, parts * d_);
}

std::array<Var, 3> MultiheadAttention::split_heads(const Var& x, int n) const {
  const int64_t b = x.dim(0), l = x.dim(1);
  // (B,L,n*d) -> (B,L,n,h,dk) -> (n,B,h,L,dk): one copy; each part is then a view.
  Var y = ops::permute(ops::reshape(x, {b, l, n, heads_, dk_}), {2, 0, 3, 1, 4});
  std::array<Var, 3> parts;
  for (int i = 0; i < n; ++i) parts[i] = ops::reshape(ops::slice(y, 0, i, 1), {b * heads_, l, dk_});
  return parts;
}

// ---------------------------------------------------------------------------------------------
// scaled dot-product attention over the heads
// s = (q / sqrt(dk)) k^T;  a = softmax(s | mask);  ctx = dropout(a) v;  y = merge(ctx) W_o^T + b_o
//   q (B*h,T,dk), k and v (B*h,S,dk) -> scores (B*h,T,S) -> ctx (B*h,T,dk) -> y (B,T,d)
MultiheadAttention::Output MultiheadAttention::attend(Tape& tape, const Var& q, const Var& k,
                                                      const Var& v, int64_t b, int64_t t, int64_t s,
                                                      const Tensor& key_valid, bool causal,
                                                      Rng& rng) {
  const Var scores =
      ops::matmul(ops::scale(q, 1.0 / std::sqrt(static_cast<double>(dk_))), k, false, true);
  const Tensor valid = attention_valid(key_valid, b, t, s, causal, q.dtype());
  Output out;
  out.weights = ops::softmax(ops::reshape(scores, {b, heads_, t, s}), -1, valid);
  const Var a =
      ops::dropout(ops::reshape(out.weights, {b * heads_, t, s}), dropout_, rng, training());
  const Var ctx = ops::matmul(a, v);  // (B*h,T,dk)
  out.parts = {q, k, v, scores, ctx};
  const Var merged =
      ops::reshape(ops::permute(ops::reshape(ctx, {b, heads_, t, dk_}), {0, 2, 1, 3}), {b, t, d_});
  out.y = out_proj_.forward(tape, merged);
  return out;
}

// The same in one op: y = scaled_dot_attention(q, k, v) W_o^T + b_o
//   q (B,T,*), k and v (B,S,*), heads from columns `cols` -> y (B,T,d)
MultiheadAttention::Output MultiheadAttention::attend_fused(Tape& tape, const Var& q, const Var& k,
                                                            const Var& v, ops::HeadColumns cols,
                                                            const Tensor& key_valid, bool causal,
                                                            Rng& rng, const Packing* q_packing) {
  const int64_t b = q.dim(0), t = q.dim(1), s = k.dim(1);
  const Tensor valid = attention_valid(key_valid, b, t, s, causal, q.dtype());
  Tensor weights;
  const Var merged = ops::scaled_dot_attention(q, k, v, heads_, dk_, cols, valid, dropout_, rng,
                                               training(), &weights);
  Output out;
  out.weights = Var(std::move(weights));
  out.y = out_proj_.forward(tape, q_packing ? pack(merged, *q_packing) : merged);
  return out;
}

MultiheadAttention::Output MultiheadAttention::forward(Tape& tape, const Var& query, const Var& key,
                                                       const Var& value, const Tensor& key_valid,
                                                       bool causal, Rng& rng, AttentionPath path,
                                                       const Packing* q_packing,
                                                       const Packing* kv_packing) {
  if (q_packing || kv_packing)
    return forward_packed(tape, query, key, value, key_valid, causal, rng, path, q_packing,
                          kv_packing, false);
  const bool fit = query.ndim() == 3 && key.ndim() == 3 && value.ndim() == 3 &&
                   query.dim(2) == d_ && key.dim(2) == d_ && value.dim(2) == d_ &&
                   key.dim(0) == query.dim(0) && value.dim(0) == query.dim(0) &&
                   key.dim(1) == value.dim(1) && (!causal || key.dim(1) == query.dim(1));
  if (!fit)
    throw ShapeError(fmt::format(
        "multihead_attention: query {}, key {}, value {} do not fit: expected (B,T,{}), (B,S,{}), "
        "(B,S,{}){}",
        query.shape().str(), key.shape().str(), value.shape().str(), d_, d_, d_,
        causal ? " with S = T for a causal mask" : ""));
  const int64_t b = query.dim(0), t = query.dim(1), s = key.dim(1);
  // One tensor as keys and values: the same node, or for constants (node -1) the same elements
  // (shares_storage alone would take two views of one buffer for one).
  const bool one_kv = key.node() == value.node() && key.value().shares_storage(value.value()) &&
                      key.shape() == value.shape() &&
                      (key.node() >= 0 || dispatch(key.dtype(), [&](auto tag) {
                         using T = decltype(tag);
                         return key.value().data<T>() == value.value().data<T>();
                       }));
  if (path == AttentionPath::fused) {
    const Var q = project(tape, query, 0);
    if (one_kv) {
      const Var kv = project(tape, key, 1, 2);  // (B,S,2d): k's heads, then v's
      return attend_fused(tape, q, kv, kv, {0, 0, d_}, key_valid, causal, rng);
    }
    return attend_fused(tape, q, project(tape, key, 1), project(tape, value, 2), {}, key_valid,
                        causal, rng);
  }
  // (B,T,d) x (d,d)^T: q, k and v, each split into heads (B*h,L,dk)
  Var q = split_heads(project(tape, query, 0), 1)[0];
  Var k, v;
  if (one_kv) {
    std::array<Var, 3> kv = split_heads(project(tape, key, 1, 2), 2);
    k = kv[0];
    v = kv[1];
  } else {
    k = split_heads(project(tape, key, 1), 1)[0];
    v = split_heads(project(tape, value, 2), 1)[0];
  }
  return attend(tape, q, k, v, b, t, s, key_valid, causal, rng);
}

MultiheadAttention::Output MultiheadAttention::self_attention(Tape& tape, const Var& x,
                                                              const Tensor& valid, bool causal,
                                                              Rng& rng, AttentionPath path,
                                                              const Packing* packing) {
  if (packing)
    return forward_packed(tape, x, x, x, valid, causal, rng, path, packing, packing, true);
  if (x.ndim() != 3 || x.dim(2) != d_)
    throw ShapeError(
        fmt::format("multihead_attention: input {} does not fit (B,T,{})", x.shape().str(), d_));
  const int64_t b = x.dim(0), t = x.dim(1);
  // (B,T,d) x (3d,d)^T -> (B,T,3d): q, k and v in one product
  if (path == AttentionPath::fused) {
    const Var qkv = project(tape, x, 0, 3);
    return attend_fused(tape, qkv, qkv, qkv, {0, d_, 2 * d_}, valid, causal, rng);
  }
  std::array<Var, 3> qkv = split_heads(project(tape, x, 0, 3), 3);
  return attend(tape, qkv[0], qkv[1], qkv[2], b, t, t, valid, causal, rng);
}

// The fused path over packed rows: the projections run on the real positions only, then are
// unpacked to (B,L,*) for the attention (padding a copy of a real row: masked as a key, and
// dropped again by pack as a query), whose merged heads are packed again before out_proj.
//   query (Nq,d), key and value (Nk,d) -> q (B,T,d), k and v (B,S,d) -> y (Nq,d)
MultiheadAttention::Output MultiheadAttention::forward_packed(
    Tape& tape, const Var& query, const Var& key, const Var& value, const Tensor& key_valid,
    bool causal, Rng& rng, AttentionPath path, const Packing* q_packing, const Packing* kv_packing,
    bool self) {
  if (path != AttentionPath::fused)
    throw ValueError(
        "multihead_attention: packed rows take the fused path (ask for weights with padded input)");
  if (!q_packing || !kv_packing)
    throw ValueError(
        "multihead_attention: packed rows need both packings, the query's and the "
        "keys' and values'");
  const bool fit = query.ndim() == 2 && key.ndim() == 2 && value.ndim() == 2 &&
                   query.dim(1) == d_ && key.dim(1) == d_ && value.dim(1) == d_ &&
                   query.dim(0) == q_packing->n() && key.dim(0) == kv_packing->n() &&
                   value.dim(0) == kv_packing->n() && q_packing->b == kv_packing->b &&
                   (!causal || q_packing->l == kv_packing->l);
  if (!fit)
    throw ShapeError(fmt::format(
        "multihead_attention: packed query {}, key {}, value {} do not fit: expected (Nq,{}) and "
        "(Nk,{}) with packings of Nq = {} and Nk = {} rows of one batch ({} and {}){}",
        query.shape().str(), key.shape().str(), value.shape().str(), d_, d_, q_packing->n(),
        kv_packing->n(), q_packing->b, kv_packing->b, causal ? ", S = T for a causal mask" : ""));
  // The keys' padding holds copies of real rows: the mask must hide it whatever key_valid says.
  const Tensor keys = packed_key_valid(*kv_packing, key_valid, query.dtype());  // (B,S)
  if (self) {
    const Var qkv = unpack(project(tape, query, 0, 3), *q_packing);  // (B,T,3d)
    return attend_fused(tape, qkv, qkv, qkv, {0, d_, 2 * d_}, keys, causal, rng, q_packing);
  }
  const Var q = unpack(project(tape, query, 0), *q_packing);  // (B,T,d)
  if (key.node() == value.node() && key.node() >= 0) {
    const Var kv = unpack(project(tape, key, 1, 2), *kv_packing);  // (B,S,2d): k's heads, then v's
    return attend_fused(tape, q, kv, kv, {0, 0, d_}, keys, causal, rng, q_packing);
  }
  return attend_fused(tape, q, unpack(project(tape, key, 1), *kv_packing),
                      unpack(project(tape, value, 2), *kv_packing), {}, keys, causal, rng,
                      q_packing);
}

// ---------------------------------------------------------------------------------------------
// decoding with a cache

KVCache MultiheadAttention::empty_cache(int64_t b, int64_t capacity) const {
  KVCache c;
  const DType dtype = in_proj_bias_->value.dtype();
  c.k = Tensor::zeros({b * heads_, capacity, dk_}, dtype);
  c.v = Tensor::zeros({b * heads_, capacity, dk_}, dtype);
  c.heads = heads_;
  return c;
}

KVCache MultiheadAttention::memory_cache(Tape& tape, const Var& memory, const Tensor& valid) {
  std::array<Var, 3> kv = split_heads(project(tape, memory, 1, 2), 2);
  KVCache c;
  // Views of one permuted copy: a memory cache is only read, and select_rows replaces its tensors
  // rather than writing into them.
  c.k = kv[0].value();
  c.v = kv[1].value();
  c.valid = valid;
  c.length = memory.dim(1);
  c.heads = heads_;
  return c;
}

// One query position against L cached ones, per row and head:
// s_j = q . k_j / sqrt(dk) (masked);  a = softmax(s);  ctx = sum_j a_j v_j
MultiheadAttention::Output MultiheadAttention::step(Tape& tape, const Var& x, KVCache& cache,
                                                    bool self) {
  if (x.ndim() != 2 || x.dim(1) != d_)
    throw ShapeError(
        fmt::format("multihead_attention step: input {} does not fit (B,{})", x.shape().str(), d_));
  const int64_t b = x.dim(0);
  if (cache.k.dim(0) != b * heads_)
    throw ShapeError(fmt::format("multihead_attention step: input {} and cache {} differ in B",
                                 x.shape().str(), cache.k.shape().str()));
  Var q;
  if (self) {
    if (cache.length >= cache.k.dim(1))
      throw ValueError(
          fmt::format("multihead_attention step: the cache holds {} positions", cache.k.dim(1)));
    // (B,d) x (3d,d)^T -> (B,3d): the new position's q, k and v
    const Var qkv = project(tape, x, 0, 3);
    const int64_t cap = cache.k.dim(1), pos = cache.length;
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = qkv.value().data<T>();
      T* kc = cache.k.data<T>();
      T* vc = cache.v.data<T>();
      for (int64_t r = 0; r < b; ++r)
        for (int64_t h = 0; h < heads_; ++h) {
          const T* row = p + r * 3 * d_ + h * dk_;
          std::copy_n(row + d_, dk_, kc + ((r * heads_ + h) * cap + pos) * dk_);
          std::copy_n(row + 2 * d_, dk_, vc + ((r * heads_ + h) * cap + pos) * dk_);
        }
    });
    ++cache.length;
    q = ops::slice(qkv, 1, 0, d_);
  } else {
    q = project(tape, x, 0);
  }
  const int64_t len = cache.length, cap = cache.k.dim(1);
  Tensor ctx = Tensor::empty({b, d_}, x.dtype());
  Tensor weights = Tensor::zeros({b, heads_, len}, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(1) / std::sqrt(static_cast<T>(dk_));
    const T* pq = q.value().data<T>();
    const T* kc = cache.k.data<T>();
    const T* vc = cache.v.data<T>();
    T* pc = ctx.data<T>();
    T* pw = weights.data<T>();
    const T* pv = cache.valid.defined() ? cache.valid.template data<T>() : nullptr;
    const int64_t vcols = pv ? cache.valid.dim(1) : 0;
    for (int64_t r = 0; r < b; ++r)
      for (int64_t h = 0; h < heads_; ++h) {
        const T* qh = pq + r * d_ + h * dk_;
        const T* kh = kc + (r * heads_ + h) * cap * dk_;
        const T* vh = vc + (r * heads_ + h) * cap * dk_;
        T* a = pw + (r * heads_ + h) * len;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < len; ++j) {
          if (pv && pv[r * vcols + j] == T(0)) continue;
          T e = 0;
          for (int64_t i = 0; i < dk_; ++i) e += (qh[i] * scale) * kh[j * dk_ + i];
          a[j] = e;
          m = std::max(m, e);
        }
        T sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          const bool real = !pv || pv[r * vcols + j] != T(0);
          a[j] = real ? std::exp(a[j] - m) : T(0);
          sum += a[j];
        }
        T* c = pc + r * d_ + h * dk_;
        std::fill_n(c, dk_, T(0));
        if (sum == 0) continue;
        for (int64_t j = 0; j < len; ++j) {
          a[j] /= sum;
          for (int64_t i = 0; i < dk_; ++i) c[i] += a[j] * vh[j * dk_ + i];
        }
      }
  });
  Output out;
  out.weights = Var(std::move(weights));
  out.y = out_proj_.forward(tape, Var(std::move(ctx)));
  return out;
}

}  // namespace tapestry::nn
