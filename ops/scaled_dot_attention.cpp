// Scaled dot-product attention over all heads in one op (see the header). Each head's products go
// through blas::gemm with the calls matmul makes for it, its softmax and dropout through the
// functions those ops use, so the op gives the composed attention's bits; the heads are read and
// written in place through their columns, where the composed path copies them apart and back.
#include "tapestry/ops/scaled_dot_attention.h"

#include <algorithm>
#include <cmath>

#include "tapestry/core/blas.h"
#include "tapestry/ops/dropout.h"
#include "tapestry/ops/kernels.h"
#include "tapestry/ops/softmax.h"

namespace tapestry::ops {

namespace {

// The geometry of one call, from the shapes and attributes.
struct Heads {
  int64_t b, t, s, heads, dk;
  int64_t ldq, ldk, ldv;  // row strides of q, k and v
  HeadColumns cols;
  int64_t width() const { return heads * dk; }
};

Heads geometry(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, int64_t dk,
               HeadColumns cols) {
  return {q.dim(0), q.dim(1), k.dim(1), heads, dk, q.dim(2), k.dim(2), v.dim(2), cols};
}

// With one column per head, a head's products are matrix-vector products, and blas::gemm picks
// their kernel by the stride of the vector; the composed path's heads are contiguous. So for dk = 1
// a head's operands are copied into contiguous columns first (and its results written back from
// them), which gives the composed path's bits; wider heads are read in place.
template <class T>
const T* contiguous(const T* x, int64_t rows, int64_t ld, int64_t dk, T* column) {
  if (dk != 1 || ld == 1) return x;
  for (int64_t r = 0; r < rows; ++r) column[r] = x[r * ld];
  return column;
}

// Saved tensors, in order. kMask only with dropout; without it kDropped is the weights again.
enum Saved { kQ, kK, kV, kScaledQ, kWeights, kDropped, kMask };

}  // namespace

// ---------------------------------------------------------------------------------------------
// scaled_dot_attention
// s = (c q) k^T;  a = softmax(s | mask);  y = (a * m) v   per row and head, c = 1/sqrt(dk)
//   d(a*m) = dy v^T;  dv += (a*m)^T dy;  da = d(a*m) * m;  ds = a * (da - sum(da * a));
//   dq += c ds k;  dk += ds^T (c q)
//   q (B,T,Dq), k (B,S,Dk), v (B,S,Dv) -> y (B,T,h*dk); saved: q, k, v, c q (B*h,T,dk), the weights
//   a (B,h,T,S), a * m and m (B*h,T,S)
void scaled_dot_attention_backward(Tape& tape, const Node& n) {
  const Tensor &q = tape.saved(n, kQ), &k = tape.saved(n, kK), &v = tape.saved(n, kV);
  const auto at = tape.attrs(n);
  const Heads g = geometry(q, k, v, at[0], at[1], {at[2], at[3], at[4]});
  const bool drop = n.scalar[0] != 0;
  Tensor *dq = tape.input_grad(n, 0), *dk = tape.input_grad(n, 1), *dv = tape.input_grad(n, 2);
  if (g.s == 0) return;  // no keys: y was zeros
  // One head's d(a*m), then da and ds in place (T,S), and d(c q) (T,dk); with dk = 1, columns for
  // dy, k, v and the gradients of k and v (see contiguous).
  Tensor dweights = Tensor::empty({g.t, g.s}, q.dtype());
  Tensor dscaled = Tensor::empty({g.t, g.dk}, q.dtype());
  Tensor columns = Tensor::empty({g.dk == 1 ? g.t + 4 * g.s : 0}, q.dtype());
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T c = static_cast<T>(1.0 / std::sqrt(static_cast<double>(g.dk)));
    const T* dy = n.grad.data<T>();
    T* dw = dweights.data<T>();
    T* dqs = dscaled.data<T>();
    T* col_dy = columns.data<T>();
    T *col_k = col_dy + g.t, *col_v = col_k + g.s, *col_dk = col_v + g.s, *col_dv = col_dk + g.s;
    const int64_t ld_dy = g.dk == 1 ? 1 : g.width();
    // d's column (S rows ld apart) += a staged column e
    const auto add_column = [&](T* d, int64_t ld, const T* e) {
      for (int64_t r = 0; r < g.s; ++r) d[r * ld] += e[r];
    };
    for (int64_t b = 0; b < g.b; ++b)
      for (int64_t j = 0; j < g.heads; ++j) {
        const int64_t bh = b * g.heads + j;
        const T* dyj = contiguous(dy + b * g.t * g.width() + j * g.dk, g.t, g.width(), g.dk,
                                  col_dy);  // (T,dk)
        const T* kj = contiguous(k.data<T>() + b * g.s * g.ldk + g.cols.k + j * g.dk, g.s, g.ldk,
                                 g.dk, col_k);  // (S,dk)
        const T* vj = contiguous(v.data<T>() + b * g.s * g.ldv + g.cols.v + j * g.dk, g.s, g.ldv,
                                 g.dk, col_v);  // (S,dk)
        const int64_t ldk = g.dk == 1 ? 1 : g.ldk, ldv = g.dk == 1 ? 1 : g.ldv;
        const T* qsj = tape.saved(n, kScaledQ).data<T>() + bh * g.t * g.dk;  // (T,dk)
        const T* aj = tape.saved(n, kWeights).data<T>() + bh * g.t * g.s;    // (T,S)
        const T* adj = tape.saved(n, kDropped).data<T>() + bh * g.t * g.s;   // (T,S)
        // dv (S,dk) += (a*m)^T dy;  d(a*m) (T,S) = dy (T,dk) v^T
        if (dv) {
          T* dvj = dv->data<T>() + b * g.s * g.ldv + g.cols.v + j * g.dk;
          if (g.dk == 1) std::fill(col_dv, col_dv + g.s, T(0));
          blas::gemm(true, false, g.s, g.dk, g.t, T(1), adj, g.s, dyj, ld_dy, T(1),
                     g.dk == 1 ? col_dv : dvj, ldv);
          if (g.dk == 1) add_column(dvj, g.ldv, col_dv);
        }
        if (!dq && !dk) continue;
        blas::gemm(false, true, g.t, g.s, g.dk, T(1), dyj, ld_dy, vj, ldv, T(0), dw, g.s);
        // da = d(a*m) * m;  ds = a * (da - sum(da * a)) along each row
        if (drop) {
          const T* mj = tape.saved(n, kMask).data<T>() + bh * g.t * g.s;
          for (int64_t i = 0; i < g.t * g.s; ++i) dw[i] = dw[i] * mj[i];
        }
        for (int64_t r = 0; r < g.t; ++r)
          backward::softmax_row<T>(aj + r * g.s, dw + r * g.s, dw + r * g.s, g.s, 1, true);
        // d(c q) (T,dk) = ds (T,S) k;  dq += c d(c q)
        if (dq) {
          blas::gemm(false, false, g.t, g.dk, g.s, T(1), dw, g.s, kj, ldk, T(0), dqs, g.dk);
          T* d = dq->data<T>() + b * g.t * g.ldq + g.cols.q + j * g.dk;
          for (int64_t r = 0; r < g.t; ++r)
            for (int64_t i = 0; i < g.dk; ++i) d[r * g.ldq + i] += c * dqs[r * g.dk + i];
        }
        // dk (S,dk) += ds^T (c q)
        if (dk) {
          T* dkj = dk->data<T>() + b * g.s * g.ldk + g.cols.k + j * g.dk;
          if (g.dk == 1) std::fill(col_dk, col_dk + g.s, T(0));
          blas::gemm(true, false, g.s, g.dk, g.t, T(1), dw, g.s, qsj, g.dk, T(1),
                     g.dk == 1 ? col_dk : dkj, ldk);
          if (g.dk == 1) add_column(dkj, g.ldk, col_dk);
        }
      }
  });
}
TAPESTRY_OP(kScaledDotAttention, "scaled_dot_attention", scaled_dot_attention_backward,
            "y_h = dropout(softmax((c q_h) k_h^T)) v_h;  dq_h += c ds k_h;  dk_h += ds^T c q_h;  "
            "dv_h += a^T dy_h");

Var scaled_dot_attention(const Var& q, const Var& k, const Var& v, int64_t heads, int64_t dk,
                         HeadColumns cols, const Tensor& valid, double dropout, Rng& rng,
                         bool training, Tensor* weights) {
  if (valid.defined())
    check_same_dtype("scaled_dot_attention", {&q.value(), &k.value(), &v.value(), &valid});
  else
    check_same_dtype("scaled_dot_attention", {&q.value(), &k.value(), &v.value()});
  if (!(dropout >= 0 && dropout < 1))
    throw ValueError(
        fmt::format("scaled_dot_attention: dropout p = {} is outside [0, 1)", dropout));
  const auto fail = [&](const char* why) {
    return ShapeError(fmt::format(
        "scaled_dot_attention: q {} (heads from column {}), k {} (from {}), v {} (from {}), "
        "mask {}, {} heads of {}: {}",
        q.shape().str(), cols.q, k.shape().str(), cols.k, v.shape().str(), cols.v,
        valid.defined() ? valid.shape().str() : "none", heads, dk, why));
  };
  if (q.ndim() != 3 || k.ndim() != 3 || v.ndim() != 3)
    throw fail("expected q (B,T,*), k (B,S,*) and v (B,S,*)");
  if (k.dim(0) != q.dim(0) || v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1))
    throw fail("B or S differ");
  if (heads < 1 || dk < 1) throw fail("expected at least one head of at least one column");
  // col0 + heads*dk <= D, without overflowing for huge heads, dk or col0.
  const auto inside = [&](const Var& x, int64_t col0) {
    return col0 >= 0 && col0 <= x.dim(2) && heads <= (x.dim(2) - col0) / dk;
  };
  if (!inside(q, cols.q) || !inside(k, cols.k) || !inside(v, cols.v))
    throw fail("the heads' columns run past an operand's last column");
  const Heads g = geometry(q.value(), k.value(), v.value(), heads, dk, cols);
  const int64_t mask_rows = valid.defined() && valid.ndim() == 4 ? valid.dim(2) : 0;
  if (valid.defined() && (valid.ndim() != 4 || valid.dim(0) != g.b || valid.dim(1) != 1 ||
                          (mask_rows != 1 && mask_rows != g.t) || valid.dim(3) != g.s))
    throw fail("expected a mask (B,1,1,S) or (B,1,T,S)");
  const uint32_t cut = dropout_cut(dropout);
  const bool drop = training && dropout > 0;

  Tensor y = Tensor::empty({g.b, g.t, g.width()}, q.dtype());
  Tensor a = Tensor::empty({g.b, heads, g.t, g.s}, q.dtype());
  Tensor scaled = Tensor::empty({g.b * heads, g.t, dk}, q.dtype());
  Tensor mask, dropped = a;
  if (drop) {
    mask = Tensor::empty({g.b * heads, g.t, g.s}, q.dtype());
    dropped = Tensor::empty({g.b * heads, g.t, g.s}, q.dtype());
  }
  const uint64_t key = drop ? rng.next_u64() : 0;
  Tensor columns = Tensor::empty({dk == 1 ? g.t + 2 * g.s : 0}, q.dtype());  // see contiguous
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T c = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dk)));
    const T keep = static_cast<T>(1.0 / (1.0 - dropout));
    T* py = y.data<T>();
    if (g.s == 0) {  // no keys: every weighted sum is empty
      for (int64_t i = 0; i < y.numel(); ++i) py[i] = T(0);
      return;
    }
    for (int64_t b = 0; b < g.b; ++b)
      for (int64_t j = 0; j < heads; ++j) {
        const int64_t bh = b * heads + j;
        const T* qj = q.value().data<T>() + b * g.t * g.ldq + cols.q + j * dk;  // (T,dk)
        T* col_y = columns.data<T>();
        const T* kj = contiguous(k.value().data<T>() + b * g.s * g.ldk + cols.k + j * dk, g.s,
                                 g.ldk, dk, col_y + g.t);  // (S,dk)
        const T* vj = contiguous(v.value().data<T>() + b * g.s * g.ldv + cols.v + j * dk, g.s,
                                 g.ldv, dk, col_y + g.t + g.s);  // (S,dk)
        const int64_t ldk = dk == 1 ? 1 : g.ldk, ldv = dk == 1 ? 1 : g.ldv;
        T* qsj = scaled.data<T>() + bh * g.t * dk;
        T* aj = a.data<T>() + bh * g.t * g.s;
        T* adj = dropped.data<T>() + bh * g.t * g.s;
        // c q (T,dk), then s (T,S) = (c q) k^T, in a's place
        for (int64_t r = 0; r < g.t; ++r)
          for (int64_t i = 0; i < dk; ++i) qsj[r * dk + i] = c * qj[r * g.ldq + i];
        blas::gemm(false, true, g.t, g.s, dk, T(1), qsj, dk, kj, ldk, T(0), aj, g.s);
        // a = softmax(s | mask) along each row, in place
        for (int64_t r = 0; r < g.t; ++r) {
          const T* pm = valid.defined()
                            ? valid.data<T>() + (b * mask_rows + (mask_rows == 1 ? 0 : r)) * g.s
                            : nullptr;
          forward::softmax_row<T>(aj + r * g.s, pm, aj + r * g.s, g.s, 1, false);
        }
        // a * m, m_i = (u_i >= p) / (1 - p) for i in the (B*h,T,S) order ops::dropout draws
        if (drop) {
          T* mj = mask.data<T>() + bh * g.t * g.s;
          for (int64_t i = 0; i < g.t * g.s; ++i) {
            const auto index = static_cast<uint64_t>(bh * g.t * g.s + i);
            mj[i] = counter_hash32(key, index) >= cut ? keep : T(0);
            adj[i] = aj[i] * mj[i];
          }
        }
        // y_j (T,dk) = (a * m) v, into columns [j*dk, (j+1)*dk) of y
        T* yj = py + b * g.t * g.width() + j * dk;
        blas::gemm(false, false, g.t, dk, g.s, T(1), adj, g.s, vj, ldv, T(0), dk == 1 ? col_y : yj,
                   dk == 1 ? 1 : g.width());
        if (dk == 1)
          for (int64_t r = 0; r < g.t; ++r) yj[r * g.width()] = col_y[r];
      }
  });
  if (weights) *weights = a;

  Tape* tape = recording_tape({&q, &k, &v});
  if (!tape) return Var(std::move(y));
  const int32_t id = tape->record(kScaledDotAttention, std::move(y), {&q, &k, &v});
  tape->save(id, q.value());
  tape->save(id, k.value());
  tape->save(id, v.value());
  tape->save(id, std::move(scaled));
  tape->save(id, std::move(a));
  tape->save(id, std::move(dropped));
  if (drop) tape->save(id, std::move(mask));
  const int64_t attrs[5] = {heads, dk, cols.q, cols.k, cols.v};
  tape->save_attrs(id, attrs);
  tape->set_scalars(id, drop);
  return tape->output(id);
}

}  // namespace tapestry::ops
