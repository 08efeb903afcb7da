// HeapCounter: the program's heap allocations (calls of the global operator new), counted while a
// benchmark asks, to check that a steady training step allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>

namespace tapestry::cli {

// The tapestry program and the tests link a replacement of the global operator new
// (tools/heap_count_new.cpp, which sets `installed`; not under AddressSanitizer) that counts its
// calls here while `counting` is set. With `trace` set as well (TAPESTRY_HEAP_TRACE=1), each
// counted allocation prints its size and a backtrace to standard error, to find where it comes
// from (addresses resolve with addr2line -e build/tapestry).
struct HeapCounter {
  std::atomic<bool> installed{false};
  std::atomic<bool> counting{false};
  std::atomic<bool> trace{false};
  std::atomic<int64_t> allocations{0};
};

extern HeapCounter heap_counter;

}  // namespace tapestry::cli
