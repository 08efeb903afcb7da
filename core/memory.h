// Memory: reference-counted storage blocks recycled through per-thread size-class pools, so a
// steady training step (the same shapes every step) takes no memory from the system allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tapestry {

// A block of raw memory, 64-byte aligned, shared by every tensor that views it.
struct Storage {
  std::atomic<int32_t> refs{0};
  int32_t size_class = 0;
  size_t bytes = 0;  // usable bytes (>= what was asked for)
  void* data = nullptr;
  const void* owner = nullptr;  // the pool of the thread that took it out (null: none)
};

// Intrusive owning pointer to a Storage; returns the block to the pool on last release.
class StorageRef {
 public:
  StorageRef() = default;
  // Takes a block no one references (new, or back from the pool, where refs is left at whatever
  // the last release saw): the first reference, set without an atomic read-modify-write.
  static StorageRef adopt(Storage* s) {
    s->refs.store(1, std::memory_order_relaxed);
    StorageRef r;
    r.s_ = s;
    return r;
  }
  StorageRef(const StorageRef& o) : s_(o.s_) { retain(); }
  StorageRef(StorageRef&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  StorageRef& operator=(const StorageRef& o) {
    if (o.s_ != s_) {
      StorageRef tmp(o);
      swap(tmp);
    }
    return *this;
  }
  StorageRef& operator=(StorageRef&& o) noexcept {
    StorageRef tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~StorageRef() {
    if (s_) release();  // the test inline: many tensors are moved-from or empty
  }

  Storage* get() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }
  void swap(StorageRef& o) noexcept { std::swap(s_, o.s_); }
  int32_t use_count() const { return s_ ? s_->refs.load(std::memory_order_relaxed) : 0; }

 private:
  void retain() {
    if (s_) s_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void release();
  Storage* s_ = nullptr;
};

// Allocates a block of at least `bytes` bytes (contents undefined).
StorageRef allocate_storage(size_t bytes);

// What the pool holds, for tests and the memory report.
struct MemoryStats {
  size_t bytes_in_use = 0;        // handed out to live tensors
  size_t bytes_cached = 0;        // free blocks kept for reuse
  size_t system_allocations = 0;  // blocks ever taken from the system allocator
  size_t pool_hits = 0;           // allocations served from the pool
};
MemoryStats memory_stats();

// Marks the end of the calling thread's step (Tape::clear calls it). A size class the thread has
// not asked for in its last two steps is returned to the system at its next miss: a steady step
// (the same shapes every time) keeps all its blocks, while batches of changing lengths do not
// hoard every class. Other threads' steps do not age this thread's classes.
void mark_memory_step();

// Returns the calling thread's cached free blocks and the shared ones to the system (other
// threads keep their own caches until they exit).
void release_cached_memory();

}  // namespace tapestry
