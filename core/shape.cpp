// Shape: construction, axis handling and NumPy broadcasting rules.
#include "tapestry/core/shape.h"

#include <fmt/format.h>

#include "tapestry/core/errors.h"

namespace tapestry {

Shape::Shape(std::initializer_list<int64_t> dims)
    : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxDims))
    throw ShapeError(
        fmt::format("shape: {} dimensions given, at most {} supported", dims.size(), kMaxDims));
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      throw ShapeError(fmt::format("shape: negative dimension {} at axis {}", dims[i], i));
    dims_[i] = dims[i];
  }
  ndim_ = static_cast<int>(dims.size());
}

void Shape::throw_bad_axis(int a, const char* op) const {
  throw IndexError(
      fmt::format("{}: axis {} is out of range for shape {} ({} dimensions)", op, a, str(), ndim_));
}

void Shape::push_back(int64_t d) {
  if (ndim_ == kMaxDims) throw ShapeError(fmt::format("shape: more than {} dimensions", kMaxDims));
  dims_[ndim_++] = d;
}

Shape Shape::without(int a) const {
  Shape s;
  for (int i = 0; i < ndim_; ++i)
    if (i != a) s.push_back(dims_[i]);
  return s;
}

Shape Shape::with(int a, int64_t d) const {
  Shape s = *this;
  s.dims_[a] = d;
  return s;
}

int64_t Shape::outer(int a) const {
  int64_t n = 1;
  for (int i = 0; i < a; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::inner(int a) const {
  int64_t n = 1;
  for (int i = a + 1; i < ndim_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < ndim_; ++i) {
    if (i) s += ",";
    s += std::to_string(dims_[i]);
  }
  return s + ")";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  int n = std::max(a.ndim(), b.ndim());
  Shape out;
  for (int i = 0; i < n; ++i) {
    int ia = a.ndim() - n + i, ib = b.ndim() - n + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw ShapeError(
          fmt::format("{}: shapes {} and {} do not broadcast (axis {} of the result: {} vs {})", op,
                      a.str(), b.str(), i, da, db));
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

std::array<int64_t, kMaxDims> broadcast_strides(const Shape& from, const Shape& to) {
  std::array<int64_t, kMaxDims> st{};
  int64_t s = 1;
  for (int i = to.ndim() - 1; i >= 0; --i) {
    int j = from.ndim() - to.ndim() + i;
    if (j < 0) {
      st[i] = 0;
    } else {
      st[i] = from[j] == 1 ? 0 : s;
      s *= from[j];
    }
  }
  return st;
}

}  // namespace tapestry
