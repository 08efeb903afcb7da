// Shape ops: reshape is a view; permute walks the output; concat, stack and slice copy in blocks.
#include "tapestry/ops/shape_ops.h"

#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "tapestry/ops/kernels.h"

namespace tapestry::ops {

namespace {

// Every input shape for an error message: "(2,3)", "(2,3) and (2,4)", "(2,3), (1,3) and (2,4)".
std::string shape_list(std::span<const Var> xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) s += i + 1 == xs.size() ? " and " : ", ";
    s += xs[i].shape().str();
  }
  return s;
}

// Throws DTypeError naming `op` unless every input has the dtype of the first.
void check_dtypes(const char* op, std::span<const Var> xs) {
  for (const Var& x : xs) {
    if (x.dtype() == xs[0].dtype()) continue;
    std::string list;
    for (const Var& u : xs)
      list +=
          fmt::format("{}{} {}", list.empty() ? "" : ", ", u.shape().str(), dtype_name(u.dtype()));
    throw DTypeError(fmt::format("{}: operands have different dtypes: {}", op, list));
  }
}

// dst[r * dst_stride + j] = src[r * src_stride + j] for r < rows, j < width.
template <class T>
void copy_blocks(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t rows,
                 int64_t width) {
  if (width == 0) return;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_stride, src + r * src_stride, width * sizeof(T));
}

// dst[r * dst_stride + j] += src[r * src_stride + j] for r < rows, j < width.
template <class T>
void add_blocks(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t rows,
                int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    T* d = dst + r * dst_stride;
    const T* s = src + r * src_stride;
    for (int64_t j = 0; j < width; ++j) d[j] += s[j];
  }
}

// The inputs side by side: y viewed as (R, W) with W = sum_k W_k, input k as (R, W_k) placed at
// column sum_{j<k} W_j. Concat and stack are both this, with W_k = (size along the axis) * inner.
Tensor join(std::span<const Var> xs, const Shape& out, int64_t rows,
            std::span<const int64_t> widths) {
  Tensor y = Tensor::empty(out, xs[0].dtype());
  const int64_t row = std::accumulate(widths.begin(), widths.end(), int64_t{0});
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    int64_t col = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
      copy_blocks(py + col, row, xs[k].value().data<T>(), widths[k], rows, widths[k]);
      col += widths[k];
    }
  });
  return y;
}

// The backward of join: dx_k (R, W_k) += the columns of dy (R, W) that input k filled.
void join_backward(Tape& tape, const Node& n, int64_t rows, std::span<const int64_t> widths) {
  const int64_t row = std::accumulate(widths.begin(), widths.end(), int64_t{0});
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    int64_t col = 0;
    for (size_t k = 0; k < widths.size(); ++k) {
      if (Tensor* dx = tape.input_grad(n, static_cast<int>(k)))
        add_blocks(dx->data<T>(), widths[k], dy + col, row, rows, widths[k]);
      col += widths[k];
    }
  });
}

// Calls f(iy, ix) for every flat index iy of y = permute(x, perm), with ix the flat index of the
// element of x it holds. The odometer runs over y's axes, so y is written in order.
template <class F>
void for_each_permuted(const Shape& x, std::span<const int64_t> perm, F&& f) {
  const int nd = x.ndim();
  const int64_t n = x.numel();
  if (n == 0) return;
  if (nd == 0) {
    f(0, 0);
    return;
  }
  int64_t x_stride[kMaxDims] = {}, dims[kMaxDims] = {}, stride[kMaxDims] = {};
  int64_t s = 1;
  for (int k = nd - 1; k >= 0; --k) {
    x_stride[k] = s;
    s *= x[k];
  }
  for (int i = 0; i < nd; ++i) {
    dims[i] = x[static_cast<int>(perm[i])];
    stride[i] = x_stride[perm[i]];
  }
  const int64_t inner = dims[nd - 1], step = stride[nd - 1];
  int64_t idx[kMaxDims] = {};
  int64_t ix = 0;
  for (int64_t iy = 0; iy < n; iy += inner) {
    for (int64_t j = 0; j < inner; ++j) f(iy + j, ix + j * step);
    for (int k = nd - 2; k >= 0; --k) {  // odometer over the outer axes of y
      ix += stride[k];
      if (++idx[k] < dims[k]) break;
      ix -= stride[k] * dims[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// reshape
// y = reshape(x);  dx += dy  (same elements in the same order)
void reshape_backward(Tape& tape, const Node& n) {
  bool first;
  if (Tensor* dx = tape.input_grad_to_write(n, 0, &first)) detail::accumulate(*dx, n.grad, first);
}
TAPESTRY_OP(kReshape, "reshape", reshape_backward, "y = reshape(x);  dx += reshape(dy)");

Var reshape(const Var& x, const Shape& shape) {
  if (shape.numel() != x.numel())
    throw ShapeError(fmt::format("reshape: cannot view shape {} ({} elements) as {} ({} elements)",
                                 x.shape().str(), x.numel(), shape.str(), shape.numel()));
  Tensor y = x.value().reshape(shape);
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kReshape, std::move(y), {&x});
  return tape->output(id);
}

Var reshape(const Var& x, std::span<const int64_t> dims) {
  auto fail = [&](const char* why) {
    return ShapeError(fmt::format("reshape: cannot view shape {} ({} elements) as ({}): {}",
                                  x.shape().str(), x.numel(), fmt::join(dims, ","), why));
  };
  if (dims.size() > static_cast<size_t>(kMaxDims)) throw fail("too many dimensions");
  std::vector<int64_t>& d = scratch_list<int64_t, struct ShapeOpsA>();
  d.assign(dims.begin(), dims.end());
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1) {
      if (inferred >= 0) throw fail("more than one -1");
      inferred = static_cast<int>(i);
    } else if (d[i] < 0) {
      throw fail("negative dimension");
    } else {
      known *= d[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0) throw fail("the -1 cannot be inferred");
    d[inferred] = x.numel() / known;
  }
  return reshape(x, Shape(std::span<const int64_t>(d)));
}

Var reshape(const Var& x, std::initializer_list<int64_t> dims) {
  return reshape(x, std::span<const int64_t>(dims.begin(), dims.size()));
}

// ---------------------------------------------------------------------------------------------
// permute
// y[i_p0, ..., i_pn] = x[i_0, ..., i_n];  dx += permute(dy, inverse(p))
void permute_backward(Tape& tape, const Node& n) {
  bool first;
  Tensor* dx = tape.input_grad_to_write(n, 0, &first);
  if (!dx) return;
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = n.grad.data<T>();
    T* d = dx->data<T>();
    detail::first_or_added(first, [&](auto store) {
      for_each_permuted(dx->shape(), tape.attrs(n),
                        [&](int64_t iy, int64_t ix) { d[ix] = store ? dy[iy] : d[ix] + dy[iy]; });
    });
  });
}
TAPESTRY_OP(kPermute, "permute", permute_backward,
            "y = permute(x, p);  dx += permute(dy, inverse(p))");

Var permute(const Var& x, std::span<const int> perm) {
  const Shape& s = x.shape();
  if (perm.size() != static_cast<size_t>(s.ndim()))
    throw ShapeError(fmt::format("permute: permutation ({}) has {} axes but shape {} has {}",
                                 fmt::join(perm, ","), perm.size(), s.str(), s.ndim()));
  std::vector<int64_t>& p = scratch_list<int64_t, struct ShapeOpsA>();
  bool seen[kMaxDims] = {};
  Shape out;
  for (int axis : perm) {
    const int a = s.axis(axis, "permute");
    if (seen[a])
      throw IndexError(fmt::format("permute: permutation ({}) names axis {} twice (shape {})",
                                   fmt::join(perm, ","), a, s.str()));
    seen[a] = true;
    p.push_back(a);
    out.push_back(s[a]);
  }
  Tensor y = Tensor::empty(out, x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.value().data<T>();
    T* py = y.data<T>();
    for_each_permuted(s, p, [&](int64_t iy, int64_t ix) { py[iy] = px[ix]; });
  });
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kPermute, std::move(y), {&x});
  tape->save_attrs(id, p);
  return tape->output(id);
}

Var permute(const Var& x, std::initializer_list<int> perm) {
  return permute(x, std::span<const int>(perm.begin(), perm.size()));
}

Var transpose(const Var& x, int a, int b) {
  const int ia = x.shape().axis(a, "transpose"), ib = x.shape().axis(b, "transpose");
  int perm[kMaxDims];
  std::iota(perm, perm + x.ndim(), 0);
  std::swap(perm[ia], perm[ib]);
  return permute(x, std::span<const int>(perm, static_cast<size_t>(x.ndim())));
}

// ---------------------------------------------------------------------------------------------
// concat
// y = [x_0 | x_1 | ...] along axis;  dx_k += the block of dy that x_k filled
void concat_backward(Tape& tape, const Node& n) {
  const int axis = static_cast<int>(n.scalar[0]);
  const int64_t inner = n.value.shape().inner(axis);
  std::vector<int64_t>& widths = scratch_list<int64_t, struct ShapeOpsA>();
  for (int64_t size : tape.attrs(n)) widths.push_back(size * inner);
  join_backward(tape, n, n.value.shape().outer(axis), widths);
}
TAPESTRY_OP(kConcat, "concat", concat_backward,
            "y = [x_0 | x_1 | ...] along axis;  dx_k += dy[block of x_k]");

Var concat(std::span<const Var> xs, int axis) {
  if (xs.empty()) throw ValueError("concat: no inputs");
  check_dtypes("concat", xs);
  const Shape& s0 = xs[0].shape();
  const int a = s0.axis(axis, "concat");
  Shape out = s0.with(a, 0);
  std::vector<int64_t>& sizes = scratch_list<int64_t, struct ShapeOpsA>();
  for (const Var& x : xs) {
    if (x.ndim() != s0.ndim())
      throw ShapeError(
          fmt::format("concat: shapes {} have different numbers of dimensions", shape_list(xs)));
    if (x.shape().with(a, 0) != s0.with(a, 0))
      throw ShapeError(fmt::format("concat: shapes {} differ outside axis {}", shape_list(xs), a));
    sizes.push_back(x.dim(a));
    out[a] += x.dim(a);
  }
  const int64_t inner = s0.inner(a);
  std::vector<int64_t>& widths = scratch_list<int64_t, struct ShapeOpsB>();
  for (int64_t size : sizes) widths.push_back(size * inner);
  Tensor y = join(xs, out, out.outer(a), widths);
  Tape* tape = recording_tape(xs);
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kConcat, std::move(y), xs);
  tape->save_attrs(id, sizes);
  tape->set_scalars(id, a);
  return tape->output(id);
}

Var concat(std::initializer_list<Var> xs, int axis) {
  return concat(std::span<const Var>(xs.begin(), xs.size()), axis);
}

// ---------------------------------------------------------------------------------------------
// stack
// y[..., k, ...] = x_k along a new axis;  dx_k += dy[..., k, ...]
void stack_backward(Tape& tape, const Node& n) {
  const int axis = static_cast<int>(n.scalar[0]);
  std::vector<int64_t>& widths = scratch_list<int64_t, struct ShapeOpsA>();
  widths.assign(static_cast<size_t>(n.in_count), n.value.shape().inner(axis));
  join_backward(tape, n, n.value.shape().outer(axis), widths);
}
TAPESTRY_OP(kStack, "stack", stack_backward,
            "y[..., k, ...] = x_k (new axis);  dx_k += dy[..., k, ...]");

Var stack(std::span<const Var> xs, int axis) {
  if (xs.empty()) throw ValueError("stack: no inputs");
  check_dtypes("stack", xs);
  const Shape& s0 = xs[0].shape();
  for (const Var& x : xs)
    if (x.shape() != s0) throw ShapeError(fmt::format("stack: shapes {} differ", shape_list(xs)));
  const int nd = s0.ndim();
  const int a = axis < 0 ? axis + nd + 1 : axis;
  if (a < 0 || a > nd)
    throw IndexError(
        fmt::format("stack: axis {} is out of range for a new axis of shape {} (valid: {} to {})",
                    axis, s0.str(), -nd - 1, nd));
  if (nd == kMaxDims)
    throw ShapeError(
        fmt::format("stack: inputs of shape {} already have the most dimensions supported ({})",
                    s0.str(), kMaxDims));
  Shape out;
  for (int d = 0; d <= nd; ++d) {
    if (d == a) out.push_back(static_cast<int64_t>(xs.size()));
    if (d < nd) out.push_back(s0[d]);
  }
  std::vector<int64_t>& widths = scratch_list<int64_t, struct ShapeOpsA>();
  widths.assign(xs.size(), out.inner(a));
  Tensor y = join(xs, out, out.outer(a), widths);
  Tape* tape = recording_tape(xs);
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kStack, std::move(y), xs);
  tape->set_scalars(id, a);
  return tape->output(id);
}

Var stack(std::initializer_list<Var> xs, int axis) {
  return stack(std::span<const Var>(xs.begin(), xs.size()), axis);
}

// ---------------------------------------------------------------------------------------------
// slice
// y = x[..., start : start + length, ...];  dx[..., start : start + length, ...] += dy
void slice_backward(Tape& tape, const Node& n) {
  Tensor* dx = tape.input_grad(n, 0);
  if (!dx) return;
  const int axis = static_cast<int>(n.scalar[0]);
  const int64_t start = static_cast<int64_t>(n.scalar[1]);
  const Shape& s = dx->shape();
  const int64_t inner = s.inner(axis), width = n.value.dim(axis) * inner;
  dispatch(n.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    add_blocks(dx->data<T>() + start * inner, s[axis] * inner, n.grad.data<T>(), width,
               s.outer(axis), width);
  });
}
TAPESTRY_OP(kSlice, "slice", slice_backward, "y = x[..., a:b, ...];  dx[..., a:b, ...] += dy");

Var slice(const Var& x, int axis, int64_t start, int64_t length) {
  const Shape& s = x.shape();
  const int a = s.axis(axis, "slice");
  if (start < 0 || length < 0 || start > s[a] || length > s[a] - start)
    throw IndexError(fmt::format("slice: range [{}, {}) is out of range for axis {} of shape {}",
                                 start, start + length, axis, s.str()));
  const int64_t rows = s.outer(a), inner = s.inner(a);
  const Shape out = s.with(a, length);
  Tensor y;
  if (rows == 1) {  // one contiguous block: a view
    y = x.value().reshape(Shape{s[a], inner}).rows(start, length).reshape(out);
  } else {
    y = Tensor::empty(out, x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      copy_blocks(y.data<T>(), length * inner, x.value().data<T>() + start * inner, s[a] * inner,
                  rows, length * inner);
    });
  }
  Tape* tape = recording_tape({&x});
  if (!tape) return Var(std::move(y));
  int32_t id = tape->record(kSlice, std::move(y), {&x});
  tape->set_scalars(id, a, static_cast<double>(start));
  return tape->output(id);
}

std::vector<Var> split(const Var& x, std::span<const int64_t> sizes, int axis) {
  const int a = x.shape().axis(axis, "split");
  int64_t total = 0;
  bool negative = false;
  for (int64_t size : sizes) {
    negative |= size < 0;
    total += size;
  }
  if (negative || total != x.dim(a))
    throw ShapeError(
        fmt::format("split: sizes ({}) do not add up to axis {} of shape {} (length {})",
                    fmt::join(sizes, ","), axis, x.shape().str(), x.dim(a)));
  std::vector<Var> parts;
  int64_t start = 0;
  for (int64_t size : sizes) {
    parts.push_back(slice(x, a, start, size));
    start += size;
  }
  return parts;
}

std::vector<Var> split(const Var& x, std::initializer_list<int64_t> sizes, int axis) {
  return split(x, std::span<const int64_t>(sizes.begin(), sizes.size()), axis);
}

}  // namespace tapestry::ops
