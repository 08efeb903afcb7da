// Inverted dropout: the forward draws and saves the scaled keep mask, the backward multiplies by
// it.
#include "tapestry/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

// ---------------------------------------------------------------------------------------------
// dropout
// y = x * m, m = (u >= p) / (1 - p);  dx += dy * m
// x (any shape) -> y (the same shape); the mask m is saved
void dropout_backward(Tape& tape, const Node& n) {
  bool first;
  Tensor* dx = tape.input_grad_to_write(n, 0, &first);
  if (!dx) return;
  const Tensor& m = tape.saved(n, 0);
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    const T* pm = m.data<T>();
    T* d = dx->data<T>();
    detail::first_or_added(first, [&](auto store) {
      for (int64_t i = 0, k = dx->numel(); i < k; ++i)
        d[i] = store ? dy[i] * pm[i] : d[i] + dy[i] * pm[i];
    });
  });
}
TAPESTRY_OP(kDropout, "dropout", dropout_backward,
            "y = x * m, m = (u >= p) / (1 - p);  dx += dy * m");

uint32_t dropout_cut(double p) {
  if (!(p >= 0 && p < 1)) throw ValueError(fmt::format("dropout: p = {} is outside [0, 1)", p));
  // u_i = h_i / 2^32 with h_i = counter_hash32(key, i); u_i >= p  <=>  h_i >= ceil(p * 2^32).
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(p * 0x1.0p32));
  return static_cast<uint32_t>(std::min<uint64_t>(threshold, 0xffffffffULL));
}

Var dropout(const Var& x, double p, Rng& rng, bool training) {
  const uint32_t cut = dropout_cut(p);
  if (!training || p == 0) return x;
  Tensor m = Tensor::empty(x.shape(), x.dtype());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const uint64_t key = rng.next_u64();
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    const T* px = x.value().data<T>();
    T* pm = m.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0, k = x.numel(); i < k; ++i) {
      pm[i] = counter_hash32(key, static_cast<uint64_t>(i)) >= cut ? keep : T(0);
      py[i] = px[i] * pm[i];
    }
  });

  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kDropout, std::move(y), {&x});
  tape->save(id, std::move(m));
  return tape->output(id);
}

}  // namespace tapestry::ops
