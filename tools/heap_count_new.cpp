// The global allocation functions, replaced ([replacement.functions]) so that a program can count
// its heap allocations (tools/heap_count.h): `tapestry bench` counts a steady training step's,
// tests/test_allocations.cpp checks there are none. Linked into both programs (CMakeLists.txt),
// in a file of its own so that no caller sees the definitions to inline. Outside a count they
// cost one relaxed load. The nothrow forms call these, as libstdc++'s do. Not under
// AddressSanitizer, which owns the allocator (and reports a free of this operator new's memory);
// heap_counter.installed says whether the replacement is in.
#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>

#include "tools/heap_count.h"

#if !defined(__SANITIZE_ADDRESS__)
namespace {

// Set before main (heap_counter is constant-initialised, so it exists by then).
const bool installed = (tapestry::cli::heap_counter.installed = true);

void count_allocation(size_t n) {
  using tapestry::cli::heap_counter;
  if (!heap_counter.counting.load(std::memory_order_relaxed)) return;
  heap_counter.allocations.fetch_add(1, std::memory_order_relaxed);
  if (!heap_counter.trace.load(std::memory_order_relaxed)) return;
  // backtrace() may allocate (on its first call it loads the unwinder): not counted twice.
  thread_local bool inside = false;
  if (inside) return;
  inside = true;
  char line[64];
  const int len = std::snprintf(line, sizeof line, "heap allocation: %zu bytes\n", n);
  [[maybe_unused]] const ssize_t written = write(2, line, static_cast<size_t>(len));
  void* frames[24];
  backtrace_symbols_fd(frames, backtrace(frames, 24), 2);
  inside = false;
}

}  // namespace

void* operator new(size_t n) {
  count_allocation(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  return ::operator new(n);
}
void* operator new(size_t n, std::align_val_t a) {
  count_allocation(n);
  const size_t align = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) {
  return ::operator new(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}
#endif
