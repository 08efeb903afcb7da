// SmallVec: a vector that keeps up to N elements inline (no heap allocation) and moves to the
// heap only beyond that, for per-step lists that are almost always short.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace tapestry {

template <class T, size_t N>
class SmallVec {
 public:
  SmallVec() = default;

  void push_back(T v) {
    if (!heap_mode_ && size_ < N) {
      inline_[size_++] = std::move(v);
      return;
    }
    if (!heap_mode_) {
      heap_.assign(std::make_move_iterator(inline_.begin()),
                   std::make_move_iterator(inline_.begin() + size_));
      heap_mode_ = true;
    }
    heap_.push_back(std::move(v));
    ++size_;
  }
  template <class It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }
  void clear() {
    for (size_t i = 0; i < size_ && !heap_mode_; ++i) inline_[i] = T();
    heap_.clear();
    heap_mode_ = false;
    size_ = 0;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_mode_ ? heap_.data() : inline_.data(); }
  const T* data() const { return heap_mode_ ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  operator std::span<const T>() const { return {data(), size_}; }  // NOLINT: a view of the list

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  size_t size_ = 0;
  bool heap_mode_ = false;
};

}  // namespace tapestry
