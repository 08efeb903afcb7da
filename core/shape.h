// Shape: up to kMaxDims dimensions stored inline (no heap), axis normalisation, broadcasting.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace tapestry {

inline constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  // Dimension at `axis`, which may be negative (counted from the end). Inline: every op reads a
  // few, and one sentence's decoding step is mostly such bookkeeping.
  int64_t dim(int a) const { return dims_[axis(a, "dim")]; }
  // Inline so loops bounded by a tensor's numel() can hoist it.
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(ndim_)}; }
  int64_t back() const { return dims_[ndim_ - 1]; }

  // Maps a possibly negative axis into [0, ndim); throws IndexError naming `op` if out of range.
  int axis(int a, const char* op) const {
    const int r = a < 0 ? a + ndim_ : a;
    if (r < 0 || r >= ndim_) [[unlikely]]
      throw_bad_axis(a, op);
    return r;
  }

  void push_back(int64_t d);
  Shape without(int axis) const;          // drops one axis
  Shape with(int axis, int64_t d) const;  // replaces one axis
  // Number of elements before / after `axis` in row-major order.
  int64_t outer(int axis) const;
  int64_t inner(int axis) const;

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

  std::string str() const;  // "(2,3)"; a scalar is "()"

 private:
  [[noreturn]] void throw_bad_axis(int a, const char* op) const;

  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides (in elements) with which a tensor of shape `from` is read when broadcast to `to`:
// 0 along broadcast axes. `to` must be a broadcast of `from` (checked by the caller).
std::array<int64_t, kMaxDims> broadcast_strides(const Shape& from, const Shape& to);

}  // namespace tapestry
