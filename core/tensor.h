// Tensor: an N-dimensional row-major array of float32 or float64 over shared, pooled storage.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tapestry/core/errors.h"
#include "tapestry/core/memory.h"
#include "tapestry/core/shape.h"

namespace tapestry {

enum class DType : uint8_t { f32, f64 };

const char* dtype_name(DType d);
size_t dtype_size(DType d);
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}

// Calls f(T{}) with T = float or double according to `d`, so one templated kernel serves both.
template <class F>
decltype(auto) dispatch(DType d, F&& f) {
  if (d == DType::f32) return f(float{});
  return f(double{});
}

// Tensors are always contiguous and row-major. A view (reshape, leading-axis rows) shares
// storage with its base; values recorded on the tape are never written after recording.
class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype);
  static Tensor full(const Shape& shape, double value, DType dtype);
  static Tensor scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }
  // Copies `values` (row-major) into a new tensor; throws ShapeError if the count differs.
  static Tensor from(std::span<const double> values, const Shape& shape, DType dtype);
  static Tensor from(std::initializer_list<double> values, const Shape& shape, DType dtype) {
    return from(std::span<const double>(values.begin(), values.size()), shape, dtype);
  }

  bool defined() const { return static_cast<bool>(storage_); }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int ndim() const { return shape_.ndim(); }
  int64_t numel() const { return shape_.numel(); }
  int64_t dim(int axis) const { return shape_.dim(axis); }

  template <class T>
  T* data() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(storage_.get()->data) + offset_;
  }
  template <class T>
  const T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(storage_.get()->data) + offset_;
  }

  // Element access by flat index, converting to and from double (for tests and printing).
  double at(int64_t i) const;
  void set(int64_t i, double v);
  double item() const;  // the single element of a one-element tensor
  std::vector<double> to_vector() const;

  // A tensor sharing storage with a new shape of the same element count.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, begin+count) along axis 0, sharing storage.
  Tensor rows(int64_t begin, int64_t count) const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  void fill(double v);
  void zero();
  // Copies the elements of `src` (same numel and dtype) into this tensor.
  void copy_from(const Tensor& src);
  // Materialises `this` broadcast to `shape` (a new tensor).
  Tensor broadcast_to(const Shape& shape, const char* op) const;

  bool shares_storage(const Tensor& o) const { return storage_.get() == o.storage_.get(); }
  std::string str(int max_elems = 64) const;  // "[[1, 2], [3, 4]]" (summarised if large)

 private:
  void check_dtype(DType want) const {
    if (!storage_ || want != dtype_) [[unlikely]]
      throw_bad_access(want);
  }
  [[noreturn]] void throw_bad_access(DType want) const;

  StorageRef storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  DType dtype_ = DType::f32;
};

// Throws DTypeError naming `op` unless every tensor has the dtype of the first.
void check_same_dtype(const char* op, std::initializer_list<const Tensor*> ts);

}  // namespace tapestry
