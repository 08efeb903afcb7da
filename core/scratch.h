// Scratch lists: per-thread vectors for a function's temporaries that keep their capacity from
// call to call, so a steady training step runs without heap allocations once it is warm.
#pragma once

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

}  // namespace tapestry
