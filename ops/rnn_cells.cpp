// Fused GRU and LSTM gates: one pass forward, one pass backward, the gates saved in between.
#include "tapestry/ops/rnn_cells.h"

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {

// Checks gx and hw are (B,G*H), b_hh is (G*H) and s is (B,H).
void check_cell(const char* op, int gates, const Var& gx, const Var& hw, const Var& b,
                const Var& s) {
  check_same_dtype(op, {&gx.value(), &hw.value(), &b.value(), &s.value()});
  const bool ok = s.ndim() == 2 && gx.ndim() == 2 && hw.ndim() == 2 && b.ndim() == 1 &&
                  gx.dim(0) == s.dim(0) && hw.dim(0) == s.dim(0) && gx.dim(1) == gates * s.dim(1) &&
                  hw.dim(1) == gx.dim(1) && b.dim(0) == gx.dim(1);
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: gx {}, hw {}, b_hh {} and state {} do not fit: expected (B,{}H), (B,{}H), ({}H), "
        "(B,H)",
        op, gx.shape().str(), hw.shape().str(), b.shape().str(), s.shape().str(), gates, gates,
        gates));
}

// y += x over n elements.
template <class T>
void add_into(T* __restrict y, const T* __restrict x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += x[j];
}

// One row of gru_cell's backward: from dh' (H) and the row's gates [r, z, n] (3H), gh_n (H) and
// h (H), the gate gradients for gx, dpre (3H), and for hw, dpre_h (3H, the reset product folded
// in). A row at a time, so both stay in L1 while they are added to dgx, dhw and db.
template <class T>
void gru_gate_grads(const T* __restrict dy, const T* __restrict gates, const T* __restrict ghn,
                    const T* __restrict h, T* __restrict dpre, T* __restrict dpre_h, int64_t hs) {
  const T* r = gates;
  const T* z = r + hs;
  const T* n = z + hs;
  for (int64_t j = 0; j < hs; ++j) {
    const T dn = dy[j] * (T(1) - z[j]);
    const T dz = dy[j] * (h[j] - n[j]);
    const T dpre_n = dn * (T(1) - n[j] * n[j]);
    const T dr = dpre_n * ghn[j];
    const T dpre_r = dr * r[j] * (T(1) - r[j]);
    const T dpre_z = dz * z[j] * (T(1) - z[j]);
    dpre[j] = dpre_h[j] = dpre_r;
    dpre[hs + j] = dpre_h[hs + j] = dpre_z;
    dpre[2 * hs + j] = dpre_n;
    dpre_h[2 * hs + j] = dpre_n * r[j];
  }
}

// dh += dh' z over one row.
template <class T>
void gru_state_grad(T* __restrict dh, const T* __restrict dy, const T* __restrict z, int64_t hs) {
  for (int64_t j = 0; j < hs; ++j) dh[j] += dy[j] * z[j];
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// gru_cell
// h' = (1-z) n + z h;  dn = dh' (1-z);  dz = dh' (h-n);  dh += dh' z;  dpre_n = dn (1-n^2);
// dr = dpre_n gh_n;  dpre_r = dr r(1-r);  dpre_z = dz z(1-z);  dgx = [dpre_r, dpre_z, dpre_n];
// dhw = [dpre_r, dpre_z, dpre_n r];  db_hh += sum_rows(dhw)
// Saved: the gates [r, z, n] (B,3H), gh_n = hw_n + b_n (B,H), and h.
void gru_cell_backward(Tape& tape, const Node& nd) {
  const Tensor& gates = tape.saved(nd, 0);
  const Tensor& ghn = tape.saved(nd, 1);
  const Tensor& h = tape.saved(nd, 2);
  Tensor *dgx = tape.input_grad(nd, 0), *dhw = tape.input_grad(nd, 1), *db = tape.input_grad(nd, 2),
         *dh = tape.input_grad(nd, 3);
  const int64_t b = h.dim(0), hs = h.dim(1), g3 = 3 * hs;
  dispatch(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pg = gates.data<T>();
    const T* pghn = ghn.data<T>();
    const T* ph = h.data<T>();
    const T* dy = nd.grad.data<T>();
    T* pdh = dh ? dh->data<T>() : nullptr;
    T* pdgx = dgx ? dgx->data<T>() : nullptr;
    T* pdhw = dhw ? dhw->data<T>() : nullptr;
    T* pdb = db ? db->data<T>() : nullptr;
    // One row's gate gradients (3H) for gx, and for hw with the reset product folded in.
    T* dpre = detail::scratch<T, 0>(static_cast<size_t>(g3));
    T* dpre_h = detail::scratch<T, 1>(static_cast<size_t>(g3));
    for (int64_t i = 0; i < b; ++i) {
      const T* dyi = dy + i * hs;
      gru_gate_grads(dyi, pg + i * g3, pghn + i * hs, ph + i * hs, dpre, dpre_h, hs);
      if (pdh) gru_state_grad(pdh + i * hs, dyi, pg + i * g3 + hs, hs);
      if (pdgx) add_into(pdgx + i * g3, dpre, g3);
      if (pdhw) add_into(pdhw + i * g3, dpre_h, g3);
      if (pdb) add_into(pdb, dpre_h, g3);  // the bias gradient: the rows' sum, in row order
    }
  });
}
TAPESTRY_OP(kGruCell, "gru_cell", gru_cell_backward,
            "h' = (1-z) n + z h, r = s(gx_r+gh_r), z = s(gx_z+gh_z), n = tanh(gx_n + r gh_n);  "
            "dh += dh' z, dn = dh' (1-z), dz = dh' (h-n), through s and tanh to gx, gh");

Var gru_cell(const Var& gx, const Var& hw, const Var& b_hh, const Var& h) {
  check_cell("gru_cell", 3, gx, hw, b_hh, h);
  const int64_t b = h.dim(0), hs = h.dim(1), g3 = 3 * hs;
  Tensor y = Tensor::empty({b, hs}, h.dtype());
  Tensor gates = Tensor::empty({b, g3}, h.dtype());
  Tensor ghn = Tensor::empty({b, hs}, h.dtype());
  dispatch(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = gx.value().data<T>();
    const T* pw = hw.value().data<T>();
    const T* pb = b_hh.value().data<T>();
    const T* ph = h.value().data<T>();
    T* py = y.data<T>();
    T* pg = gates.data<T>();
    T* pn = ghn.data<T>();
    for (int64_t i = 0; i < b; ++i) {
      T* r = pg + i * g3;
      detail::gru_row(px + i * g3, pw + i * g3, pb, ph + i * hs, r, r + hs, r + 2 * hs, pn + i * hs,
                      py + i * hs, hs);
    }
  });
  Tape* tape = recording_tape({&gx, &hw, &b_hh, &h});
  if (!tape) return Var(std::move(y));
  const int32_t id = tape->record(kGruCell, std::move(y), {&gx, &hw, &b_hh, &h});
  tape->save(id, std::move(gates));
  tape->save(id, std::move(ghn));
  tape->save(id, h.value());
  return tape->output(id);
}

// ---------------------------------------------------------------------------------------------
// lstm_cell
// c' = f c + i u;  h' = o tanh(c');  dc'_total = dc' + dh' o (1 - tanh(c')^2);  do = dh' tanh(c')
// di = dc'_total u;  df = dc'_total c;  du = dc'_total i;  dc += dc'_total f;  through s and tanh
// to a = gx + hw + b_hh.  Saved: the gates [i, f, u, o] (B,4H), c, and the output [h'; c'].
void lstm_cell_backward(Tape& tape, const Node& nd) {
  const Tensor& gates = tape.saved(nd, 0);
  const Tensor& c = tape.saved(nd, 1);
  Tensor *dgx = tape.input_grad(nd, 0), *dhw = tape.input_grad(nd, 1), *db = tape.input_grad(nd, 2),
         *dc = tape.input_grad(nd, 3);
  const int64_t b = c.dim(0), hs = c.dim(1), g4 = 4 * hs;
  dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pg = gates.data<T>();
    const T* pc = c.data<T>();
    const T* c2 = nd.value.data<T>() + b * hs;  // c' is the second half of the output
    const T* dh2 = nd.grad.data<T>();
    const T* dc2 = dh2 + b * hs;
    T* pdc = dc ? dc->data<T>() : nullptr;
    T* pdgx = dgx ? dgx->data<T>() : nullptr;
    T* pdhw = dhw ? dhw->data<T>() : nullptr;
    T* pdb = db ? db->data<T>() : nullptr;
    // One row's gate gradients (4H), added to dgx, dhw and db while they are in L1.
    T* a = detail::scratch<T>(static_cast<size_t>(g4));
    for (int64_t i = 0; i < b; ++i) {
      const T* gi = pg + i * g4;
      const T* gf = gi + hs;
      const T* gu = gf + hs;
      const T* go = gu + hs;
      for (int64_t j = 0; j < hs; ++j) {
        const int64_t k = i * hs + j;
        const T tc = detail::tanh(c2[k]);
        const T dct = dc2[k] + dh2[k] * go[j] * (T(1) - tc * tc);
        a[j] = dct * gu[j] * gi[j] * (T(1) - gi[j]);
        a[hs + j] = dct * pc[k] * gf[j] * (T(1) - gf[j]);
        a[2 * hs + j] = dct * gi[j] * (T(1) - gu[j] * gu[j]);
        a[3 * hs + j] = dh2[k] * tc * go[j] * (T(1) - go[j]);
        if (pdc) pdc[k] += dct * gf[j];
      }
      if (pdgx) add_into(pdgx + i * g4, a, g4);
      if (pdhw) add_into(pdhw + i * g4, a, g4);
      if (pdb) add_into(pdb, a, g4);  // the bias gradient: the rows' sum, in row order
    }
  });
}
TAPESTRY_OP(kLstmCell, "lstm_cell", lstm_cell_backward,
            "[h'; c'] with c' = f c + i u, h' = o tanh(c');  dc_total = dc' + dh' o (1-tanh^2 c'), "
            "dc += dc_total f, through s and tanh to the gates a = gx + gh");

Var lstm_cell(const Var& gx, const Var& hw, const Var& b_hh, const Var& c) {
  check_cell("lstm_cell", 4, gx, hw, b_hh, c);
  const int64_t b = c.dim(0), hs = c.dim(1), g4 = 4 * hs;
  Tensor y = Tensor::empty({2, b, hs}, c.dtype());
  Tensor gates = Tensor::empty({b, g4}, c.dtype());
  dispatch(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = gx.value().data<T>();
    const T* pw = hw.value().data<T>();
    const T* pb = b_hh.value().data<T>();
    const T* pc = c.value().data<T>();
    T* h2 = y.data<T>();
    T* c2 = h2 + b * hs;
    T* pg = gates.data<T>();
    for (int64_t i = 0; i < b; ++i) {
      T* g = pg + i * g4;
      detail::lstm_row(px + i * g4, pw + i * g4, pb, pc + i * hs, g, c2 + i * hs, h2 + i * hs, hs);
    }
  });
  Tape* tape = recording_tape({&gx, &hw, &b_hh, &c});
  if (!tape) return Var(std::move(y));
  const int32_t id = tape->record(kLstmCell, std::move(y), {&gx, &hw, &b_hh, &c});
  tape->save(id, std::move(gates));
  tape->save(id, c.value());
  return tape->output(id);
}

}  // namespace tapestry::ops
