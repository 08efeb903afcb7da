// Scratch lists and buffers: per-thread storage for a function's temporaries that keeps its
// capacity from call to call, so a steady training step runs without heap allocations once warm.
#pragma once

#include <cstddef>
#include <vector>

namespace tapestry {

// The list for (T, Tag), emptied, with the capacity of earlier calls on this thread. Each caller
// names its own Tag type (a local struct), so lists held at the same time never collide. A list
// of tensors should be emptied again when its caller is done, to hand their storage back.
template <class T, class Tag>
std::vector<T>& scratch_list() {
  thread_local std::vector<T> list;
  list.clear();
  return list;
}

// A buffer of at least n elements for (T, Tag) on this thread, holding whatever earlier calls
// left in it: it grows once and is reused by every later call. Buffers in use at the same time
// need different Tags.
template <class T, class Tag>
T* scratch_buffer(std::size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace tapestry
