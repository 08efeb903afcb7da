// Tensor: creation, element access, views, conversion and printing.
#include "tapestry/core/tensor.h"

#include <fmt/format.h>

#include <cstring>

namespace tapestry {

const char* dtype_name(DType d) {
  return d == DType::f32 ? "float32" : "float64";
}
size_t dtype_size(DType d) {
  return d == DType::f32 ? 4 : 8;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = allocate_storage(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::from(std::span<const double> values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(fmt::format("tensor: {} values given for shape {} ({} elements)",
                                 values.size(), shape.str(), shape.numel()));
  Tensor t = empty(shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

void Tensor::throw_bad_access(DType want) const {
  if (!defined()) throw Error("tensor: access to an undefined tensor");
  throw DTypeError(
      fmt::format("tensor: accessed as {} but holds {}", dtype_name(want), dtype_name(dtype_)));
}

double Tensor::at(int64_t i) const {
  if (i < 0 || i >= numel())
    throw IndexError(fmt::format("tensor: index {} out of range for shape {}", i, shape_.str()));
  return dispatch(dtype_, [&](auto tag) -> double { return data<decltype(tag)>()[i]; });
}

void Tensor::set(int64_t i, double v) {
  if (i < 0 || i >= numel())
    throw IndexError(fmt::format("tensor: index {} out of range for shape {}", i, shape_.str()));
  dispatch(dtype_, [&](auto tag) { data<decltype(tag)>()[i] = static_cast<decltype(tag)>(v); });
}

double Tensor::item() const {
  if (numel() != 1)
    throw ShapeError(
        fmt::format("item: tensor of shape {} has {} elements, not 1", shape_.str(), numel()));
  return at(0);
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  dispatch(dtype_, [&](auto tag) {
    const auto* p = data<decltype(tag)>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  });
  return v;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape.numel() != numel())
    throw ShapeError(fmt::format("reshape: cannot view shape {} ({} elements) as {} ({} elements)",
                                 shape_.str(), numel(), shape.str(), shape.numel()));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  if (ndim() == 0 || begin < 0 || count < 0 || begin + count > shape_[0])
    throw IndexError(fmt::format("rows: [{}, {}) out of range for shape {}", begin, begin + count,
                                 shape_.str()));
  Tensor t = *this;
  t.shape_[0] = count;
  t.offset_ += begin * shape_.inner(0);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  Tensor t = empty(shape_, dtype);
  dispatch(dtype_, [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch(dtype, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* s = data<S>();
      D* d = t.data<D>();
      for (int64_t i = 0; i < numel(); ++i) d[i] = static_cast<D>(s[i]);
    });
  });
  return t;
}

void Tensor::fill(double v) {
  dispatch(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T* p = data<T>();
    T x = static_cast<T>(v);
    for (int64_t i = 0; i < numel(); ++i) p[i] = x;
  });
}

void Tensor::zero() {
  if (numel() > 0)
    std::memset(static_cast<char*>(storage_.get()->data) + offset_ * dtype_size(dtype_), 0,
                numel() * dtype_size(dtype_));
}

void Tensor::copy_from(const Tensor& src) {
  if (src.numel() != numel() || src.dtype() != dtype_)
    throw ShapeError(fmt::format("copy: source {} {} does not fit destination {} {}",
                                 src.shape().str(), dtype_name(src.dtype()), shape_.str(),
                                 dtype_name(dtype_)));
  if (numel() > 0)
    std::memmove(
        static_cast<char*>(storage_.get()->data) + offset_ * dtype_size(dtype_),
        static_cast<const char*>(src.storage_.get()->data) + src.offset_ * dtype_size(dtype_),
        numel() * dtype_size(dtype_));
}

Tensor Tensor::broadcast_to(const Shape& shape, const char* op) const {
  if (broadcast_shapes(shape_, shape, op) != shape)
    throw ShapeError(
        fmt::format("{}: shape {} cannot be broadcast to {}", op, shape_.str(), shape.str()));
  if (shape == shape_) return *this;
  Tensor out = empty(shape, dtype_);
  auto st = broadcast_strides(shape_, shape);
  dispatch(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* s = data<T>();
    T* d = out.data<T>();
    int nd = shape.ndim();
    int64_t idx[kMaxDims] = {};
    int64_t src = 0;
    for (int64_t i = 0, n = shape.numel(); i < n; ++i) {
      d[i] = s[src];
      for (int k = nd - 1; k >= 0; --k) {  // odometer increment
        src += st[k];
        if (++idx[k] < shape[k]) break;
        src -= st[k] * shape[k];
        idx[k] = 0;
      }
    }
  });
  return out;
}

namespace {
void append_nested(std::string& s, const Tensor& t, int axis, int64_t& flat, int max_elems) {
  const Shape& sh = t.shape();
  if (axis == sh.ndim()) {
    s += fmt::format("{:.6g}", t.at(flat++));
    return;
  }
  s += "[";
  for (int64_t i = 0; i < sh[axis]; ++i) {
    if (i) s += ", ";
    append_nested(s, t, axis + 1, flat, max_elems);
  }
  s += "]";
}
}  // namespace

std::string Tensor::str(int max_elems) const {
  if (!defined()) return "<undefined>";
  if (numel() <= max_elems) {
    std::string s;
    int64_t flat = 0;
    append_nested(s, *this, 0, flat, max_elems);
    return s;
  }
  auto v = to_vector();
  double lo = v[0], hi = v[0], sum = 0;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  return fmt::format("<{} {} min {:.4g} max {:.4g} mean {:.4g}>", shape_.str(), dtype_name(dtype_),
                     lo, hi, sum / static_cast<double>(v.size()));
}

void check_same_dtype(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = *ts.begin();
  for (const Tensor* t : ts) {
    if (t->dtype() != first->dtype()) {
      std::string list;
      for (const Tensor* u : ts)
        list += fmt::format("{}{} {}", list.empty() ? "" : ", ", u->shape().str(),
                            dtype_name(u->dtype()));
      throw DTypeError(fmt::format("{}: operands have different dtypes: {}", op, list));
    }
  }
}

}  // namespace tapestry
