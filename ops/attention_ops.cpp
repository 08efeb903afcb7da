// Fused attention kernels: loops over (B,S,K) that vectorise along the last axis.
#include "tapestry/ops/attention_ops.h"

#include <algorithm>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {
[[noreturn]] void misfit(const char* op, std::initializer_list<const Var*> xs, const char* want) {
  std::string shapes;
  for (const Var* x : xs) shapes += (shapes.empty() ? "" : " and ") + x->shape().str();
  throw ShapeError(fmt::format("{}: shapes {} do not fit: expected {}", op, shapes, want));
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// additive_scores
// e = sum_a v tanh(p + q);  t = tanh(p + q);  dpre = de v (1 - t^2);  dp += dpre;
// dq += sum_s dpre;  dv += sum_{b,s} de t.   Saved: p (B,S,A), q (B,A) and v, which stay alive
// anyway; t is recomputed a row at a time rather than kept (B,S,A) for every decoder step.
void additive_scores_backward(Tape& tape, const Node& n) {
  const Tensor& p = tape.saved(n, 0);
  const Tensor& q = tape.saved(n, 1);
  const Tensor& v = tape.saved(n, 2);
  Tensor *dp = tape.input_grad(n, 0), *dq = tape.input_grad(n, 1), *dv = tape.input_grad(n, 2);
  const int64_t b = p.dim(0), s = p.dim(1), a = p.dim(2);
  dispatch(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pp = p.data<T>();
    const T* pq = q.data<T>();
    const T* pv = v.data<T>();
    const T* de = n.grad.data<T>();
    T* pdp = dp ? dp->data<T>() : nullptr;
    T* pdq = dq ? dq->data<T>() : nullptr;
    T* pdv = dv ? dv->data<T>() : nullptr;
    T* row = detail::scratch<T, 0>(static_cast<size_t>(a));
    T* dpre = detail::scratch<T, 1>(static_cast<size_t>(a));
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        const T g = de[i * s + j];
        const T* pr = pp + (i * s + j) * a;
        const T* qr = pq + i * a;
        detail::tanh_of_sum(pr, qr, row, a);
        for (int64_t k = 0; k < a; ++k) dpre[k] = g * pv[k] * (T(1) - row[k] * row[k]);
        if (pdp) {
          T* d = pdp + (i * s + j) * a;
          for (int64_t k = 0; k < a; ++k) d[k] += dpre[k];
        }
        if (pdq)
          for (int64_t k = 0; k < a; ++k) pdq[i * a + k] += dpre[k];
        if (pdv)
          for (int64_t k = 0; k < a; ++k) pdv[k] += g * row[k];
      }
    }
  });
}
TAPESTRY_OP(kAdditiveScores, "additive_scores", additive_scores_backward,
            "e = sum_a v tanh(p + q);  dp += de v (1 - t^2);  dq += sum_s de v (1 - t^2);  "
            "dv += sum de t");

namespace forward {
// e[i,j] = v . tanh(p[i,j,:] + q[i,:]), each in one pass over its row (detail::tanh_dots).
template <class T>
void additive_scores(const T* pp, const T* pq, const T* pv, T* pe, int64_t b, int64_t s,
                     int64_t a) {
  for (int64_t i = 0; i < b; ++i)
    detail::tanh_dots(pp + i * s * a, pq + i * a, pv, a, s, pe + i * s);
}
template void additive_scores(const float*, const float*, const float*, float*, int64_t, int64_t,
                              int64_t);
template void additive_scores(const double*, const double*, const double*, double*, int64_t,
                              int64_t, int64_t);
}  // namespace forward

Var additive_scores(const Var& p, const Var& q, const Var& v) {
  check_same_dtype("additive_scores", {&p.value(), &q.value(), &v.value()});
  if (p.ndim() != 3 || q.ndim() != 2 || v.ndim() != 1 || q.dim(0) != p.dim(0) ||
      q.dim(1) != p.dim(2) || v.dim(0) != p.dim(2))
    misfit("additive_scores", {&p, &q, &v}, "(B,S,A), (B,A) and (A)");
  const int64_t b = p.dim(0), s = p.dim(1), a = p.dim(2);
  Tensor e = Tensor::empty({b, s}, p.dtype());
  dispatch(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward::additive_scores<T>(p.value().data<T>(), q.value().data<T>(), v.value().data<T>(),
                                e.data<T>(), b, s, a);
  });
  Tape* tape = recording_tape({&p, &q, &v});
  if (!tape) return Var(std::move(e));
  const int32_t id = tape->record(kAdditiveScores, std::move(e), {&p, &q, &v});
  tape->save(id, p.value());
  tape->save(id, q.value());
  tape->save(id, v.value());
  return tape->output(id);
}

// ---------------------------------------------------------------------------------------------
// dot_scores
// e[b,s] = keys[b,s,:] . q[b,:];  dkeys[b,s,:] += de[b,s] q[b,:];  dq[b,:] += sum_s de keys[b,s,:]
void dot_scores_backward(Tape& tape, const Node& n) {
  const Tensor& keys = tape.saved(n, 0);
  const Tensor& q = tape.saved(n, 1);
  Tensor *dkeys = tape.input_grad(n, 0), *dq = tape.input_grad(n, 1);
  const int64_t b = keys.dim(0), s = keys.dim(1), k = keys.dim(2);
  dispatch(keys.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pk = keys.data<T>();
    const T* pq = q.data<T>();
    const T* de = n.grad.data<T>();
    T* pdk = dkeys ? dkeys->data<T>() : nullptr;
    T* pdq = dq ? dq->data<T>() : nullptr;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const T g = de[i * s + j];
        if (pdk) {
          T* d = pdk + (i * s + j) * k;
          for (int64_t c = 0; c < k; ++c) d[c] += g * pq[i * k + c];
        }
        if (pdq) {
          const T* row = pk + (i * s + j) * k;
          for (int64_t c = 0; c < k; ++c) pdq[i * k + c] += g * row[c];
        }
      }
  });
}
TAPESTRY_OP(kDotScores, "dot_scores", dot_scores_backward,
            "e[b,s] = keys[b,s] . q[b];  dkeys[b,s] += de[b,s] q[b];  dq[b] += sum_s de keys[b,s]");

namespace forward {
template <class T>
void dot_scores(const T* pk, const T* pq, T* pe, int64_t b, int64_t s, int64_t k) {
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < s; ++j)
      pe[i * s + j] = detail::dot(pk + (i * s + j) * k, pq + i * k, k);
}
template void dot_scores(const float*, const float*, float*, int64_t, int64_t, int64_t);
template void dot_scores(const double*, const double*, double*, int64_t, int64_t, int64_t);
}  // namespace forward

Var dot_scores(const Var& keys, const Var& q) {
  check_same_dtype("dot_scores", {&keys.value(), &q.value()});
  if (keys.ndim() != 3 || q.ndim() != 2 || q.dim(0) != keys.dim(0) || q.dim(1) != keys.dim(2))
    misfit("dot_scores", {&keys, &q}, "(B,S,K) and (B,K)");
  const int64_t b = keys.dim(0), s = keys.dim(1), k = keys.dim(2);
  Tensor e = Tensor::empty({b, s}, keys.dtype());
  dispatch(keys.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward::dot_scores<T>(keys.value().data<T>(), q.value().data<T>(), e.data<T>(), b, s, k);
  });
  Tape* tape = recording_tape({&keys, &q});
  if (!tape) return Var(std::move(e));
  const int32_t id = tape->record(kDotScores, std::move(e), {&keys, &q});
  tape->save(id, keys.value());
  tape->save(id, q.value());
  return tape->output(id);
}

// ---------------------------------------------------------------------------------------------
// weighted_sum
// c[b,:] = sum_s a[b,s] values[b,s,:];  da[b,s] += dc[b,:] . values[b,s,:];
// dvalues[b,s,:] += a[b,s] dc[b,:]
void weighted_sum_backward(Tape& tape, const Node& n) {
  const Tensor& a = tape.saved(n, 0);
  const Tensor& values = tape.saved(n, 1);
  Tensor *da = tape.input_grad(n, 0), *dvalues = tape.input_grad(n, 1);
  const int64_t b = values.dim(0), s = values.dim(1), k = values.dim(2);
  dispatch(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pv = values.data<T>();
    const T* dc = n.grad.data<T>();
    T* pda = da ? da->data<T>() : nullptr;
    T* pdv = dvalues ? dvalues->data<T>() : nullptr;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const T* row = pv + (i * s + j) * k;
        const T* g = dc + i * k;
        if (pda) pda[i * s + j] += detail::dot(g, row, k);
        if (pdv) {
          const T w = pa[i * s + j];
          T* d = pdv + (i * s + j) * k;
          for (int64_t c = 0; c < k; ++c) d[c] += w * g[c];
        }
      }
  });
}
TAPESTRY_OP(kWeightedSum, "weighted_sum", weighted_sum_backward,
            "c[b] = sum_s a[b,s] values[b,s];  da[b,s] += dc[b] . values[b,s];  "
            "dvalues[b,s] += a[b,s] dc[b]");

namespace forward {
template <class T>
void weighted_sum(const T* pa, const T* pv, T* pc, int64_t b, int64_t s, int64_t k) {
  std::fill(pc, pc + b * k, T(0));
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < s; ++j) {
      const T w = pa[i * s + j];
      if (w == T(0)) continue;  // masked positions add nothing (and are often most of a row)
      const T* row = pv + (i * s + j) * k;
      for (int64_t col = 0; col < k; ++col) pc[i * k + col] += w * row[col];
    }
}
template void weighted_sum(const float*, const float*, float*, int64_t, int64_t, int64_t);
template void weighted_sum(const double*, const double*, double*, int64_t, int64_t, int64_t);
}  // namespace forward

Var weighted_sum(const Var& a, const Var& values) {
  check_same_dtype("weighted_sum", {&a.value(), &values.value()});
  if (values.ndim() != 3 || a.ndim() != 2 || a.dim(0) != values.dim(0) || a.dim(1) != values.dim(1))
    misfit("weighted_sum", {&a, &values}, "(B,S) and (B,S,K)");
  const int64_t b = values.dim(0), s = values.dim(1), k = values.dim(2);
  Tensor c = Tensor::empty({b, k}, values.dtype());
  dispatch(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward::weighted_sum<T>(a.value().data<T>(), values.value().data<T>(), c.data<T>(), b, s, k);
  });
  Tape* tape = recording_tape({&a, &values});
  if (!tape) return Var(std::move(c));
  const int32_t id = tape->record(kWeightedSum, std::move(c), {&a, &values});
  tape->save(id, a.value());
  tape->save(id, values.value());
  return tape->output(id);
}

}  // namespace tapestry::ops
