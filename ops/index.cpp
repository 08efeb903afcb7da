// Indexing and selection ops; gather saves its indices as attributes, the masks are saved as given.
#include "tapestry/ops/index.h"

#include <algorithm>
#include <vector>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

using detail::for_each_broadcast;

namespace {

// True if a tensor of shape `from` broadcasts to exactly `to` (NumPy rules, `to` unchanged).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.ndim() > to.ndim()) return false;
  for (int i = 1; i <= from.ndim(); ++i) {
    const int64_t f = from[from.ndim() - i], t = to[to.ndim() - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// gather
// y[i, :] = table[idx[i], :];  dtable[idx[i], :] += dy[i, :]  (repeated indices accumulate)
void gather_backward(Tape& tape, const Node& n) {
  Tensor* dtable = tape.input_grad(n, 0);
  if (!dtable) return;
  std::span<const int64_t> idx = tape.attrs(n);
  const auto skip = static_cast<int64_t>(n.scalar[0]);
  const int64_t row = dtable->shape().inner(0);  // elements per table row
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    T* d = dtable->data<T>();
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] == skip) continue;
      T* dst = d + idx[i] * row;
      const T* src = dy + static_cast<int64_t>(i) * row;
      for (int64_t j = 0; j < row; ++j) dst[j] += src[j];
    }
  });
}
TAPESTRY_OP(kGather, "gather", gather_backward,
            "y[i] = table[idx[i]];  dtable[idx[i]] += dy[i]  (repeated indices accumulate)");

Var gather(const Var& table, std::span<const int32_t> indices, const Shape& index_shape,
           int32_t no_grad_index) {
  const Shape& ts = table.shape();  // (V, ...)
  auto fail = [&](const std::string& why) {
    return ShapeError(
        fmt::format("gather: table {} and indices {}: {}", ts.str(), index_shape.str(), why));
  };
  if (ts.ndim() == 0) throw fail("the table must have at least one dimension (V, ...)");
  if (static_cast<int64_t>(indices.size()) != index_shape.numel())
    throw fail(fmt::format("{} indices given for an index shape of {} elements", indices.size(),
                           index_shape.numel()));
  if (index_shape.ndim() + ts.ndim() - 1 > kMaxDims)
    throw fail(fmt::format("the result would have {} dimensions, at most {} are supported",
                           index_shape.ndim() + ts.ndim() - 1, kMaxDims));
  const int64_t vocab = ts[0];
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= vocab)
      throw IndexError(
          fmt::format("gather: index {} at position {} is out of range [0, {}) for table {}",
                      indices[i], i, vocab, ts.str()));
  }

  Shape out = index_shape;  // index_shape + (...)
  for (int k = 1; k < ts.ndim(); ++k) out.push_back(ts[k]);
  Tensor y = Tensor::empty(out, table.dtype());
  const int64_t row = ts.inner(0);
  dispatch(table.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pt = table.value().data<T>();
    T* py = y.data<T>();
    for (size_t i = 0; i < indices.size(); ++i)
      std::copy_n(pt + indices[i] * row, row, py + static_cast<int64_t>(i) * row);
  });

  Tape* tape = recording_tape({&table});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kGather, std::move(y), {&table});
  tape->save_attrs(id, indices);
  tape->set_scalars(id, no_grad_index);
  return tape->output(id);
}

Var gather(const Var& table, std::span<const int32_t> indices) {
  return gather(table, indices, Shape{static_cast<int64_t>(indices.size())});
}

// ---------------------------------------------------------------------------------------------
// masked_fill
// y = mask != 0 ? value : x;  dx += dy * (mask == 0)
void masked_fill_backward(Tape& tape, const Node& n) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  const Tensor& mask = tape.saved(n, 0);
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    const T* pm = mask.data<T>();
    T* d = dx->data<T>();
    for_each_broadcast(n.value.shape(), n.value.shape(), mask.shape(),
                       [&](int64_t i, int64_t, int64_t im) {
                         if (pm[im] == 0) d[i] += dy[i];
                       });
  });
}
// The fill value may be -infinity (a mask before a softmax): infinite by design.
TAPESTRY_OP(kMaskedFill, "masked_fill", masked_fill_backward,
            "y = mask != 0 ? value : x;  dx += dy * (mask == 0)", true);

Var masked_fill(const Var& x, const Tensor& mask, double value) {
  check_same_dtype("masked_fill", {&x.value(), &mask});
  if (!broadcasts_to(mask.shape(), x.shape()))
    throw ShapeError(
        fmt::format("masked_fill: x {} and mask {}: the mask does not broadcast to x's shape",
                    x.shape().str(), mask.shape().str()));
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.value().data<T>();
    const T* pm = mask.data<T>();
    T* py = y.data<T>();
    const T v = static_cast<T>(value);
    for_each_broadcast(x.shape(), x.shape(), mask.shape(),
                       [&](int64_t i, int64_t, int64_t im) { py[i] = pm[im] != 0 ? v : px[i]; });
  });

  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kMaskedFill, std::move(y), {&x});
  tape->save(id, mask);
  return tape->output(id);
}

// ---------------------------------------------------------------------------------------------
// where
// y = cond != 0 ? a : b;  da += dy * (cond != 0);  db += dy * (cond == 0)
void where_backward(Tape& tape, const Node& n) {
  const Tensor& cond = tape.saved(n, 0);
  Tensor* da = tape.input_grad(n, 0);
  Tensor* db = tape.input_grad(n, 1);
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    const T* pc = cond.data<T>();
    T* pda = da ? da->data<T>() : nullptr;
    T* pdb = db ? db->data<T>() : nullptr;
    for_each_broadcast(n.value.shape(), n.value.shape(), cond.shape(),
                       [&](int64_t i, int64_t, int64_t ic) {
                         if (pc[ic] != 0) {
                           if (pda) pda[i] += dy[i];
                         } else {
                           if (pdb) pdb[i] += dy[i];
                         }
                       });
  });
}
TAPESTRY_OP(kWhere, "where", where_backward,
            "y = cond != 0 ? a : b;  da += dy * (cond != 0);  db += dy * (cond == 0)");

Var where(const Tensor& cond, const Var& a, const Var& b) {
  check_same_dtype("where", {&cond, &a.value(), &b.value()});
  auto fail = [&](const char* why) {
    return ShapeError(fmt::format("where: cond {}, a {} and b {}: {}", cond.shape().str(),
                                  a.shape().str(), b.shape().str(), why));
  };
  if (a.shape() != b.shape()) throw fail("a and b must have the same shape");
  if (!broadcasts_to(cond.shape(), a.shape()))
    throw fail("cond does not broadcast to the shape of a and b");
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pc = cond.data<T>();
    const T* pa = a.value().data<T>();
    const T* pb = b.value().data<T>();
    T* py = y.data<T>();
    for_each_broadcast(a.shape(), a.shape(), cond.shape(), [&](int64_t i, int64_t, int64_t ic) {
      py[i] = pc[ic] != 0 ? pa[i] : pb[i];
    });
  });

  Tape* tape = recording_tape({&a, &b});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kWhere, std::move(y), {&a, &b});
  tape->save(id, cond);
  return tape->output(id);
}

}  // namespace tapestry::ops
