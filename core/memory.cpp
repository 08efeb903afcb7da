// Memory: a size-class pool of 64-byte aligned blocks (4 classes per power of two).
#include "core/memory.h"

#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace tapestry {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMinBlock = 64;
constexpr int kClasses = 4 * 48;

// Block sizes grow by quarter powers of two: 64, 80, 96, 112, 128, 160, ... so at most 25% is
// wasted, and a shape seen once is served from the pool every step after.
size_t class_size(int c) {
  int octave = c / 4, quarter = c % 4;
  size_t base = kMinBlock << octave;
  return base + (base / 4) * quarter;
}

int size_class_of(size_t bytes) {
  if (bytes <= kMinBlock) return 0;
  int octave = std::bit_width((bytes - 1) / kMinBlock) - 1;  // floor(log2(bytes/64))
  if (octave < 0) octave = 0;
  int c = octave * 4;
  while (class_size(c) < bytes) ++c;
  return c;
}

struct Pool {
  std::mutex mu;
  std::vector<Storage*> free_lists[kClasses];
  MemoryStats stats;

  ~Pool() {
    for (auto& list : free_lists)
      for (Storage* s : list) destroy(s);
  }

  static void destroy(Storage* s) {
    ::operator delete(s->data, std::align_val_t(kAlign));
    delete s;
  }
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: tensors in static objects may outlive main
  return *p;
}

}  // namespace

StorageRef allocate_storage(size_t bytes) {
  if (bytes == 0) bytes = 1;
  int c = size_class_of(bytes);
  Pool& p = pool();
  Storage* s = nullptr;
  {
    std::lock_guard lock(p.mu);
    if (c < kClasses && !p.free_lists[c].empty()) {
      s = p.free_lists[c].back();
      p.free_lists[c].pop_back();
      p.stats.bytes_cached -= s->bytes;
      ++p.stats.pool_hits;
    } else {
      ++p.stats.system_allocations;
    }
    if (s) p.stats.bytes_in_use += s->bytes;
  }
  if (!s) {
    size_t size = c < kClasses ? class_size(c) : bytes;
    s = new Storage();
    s->size_class = c;
    s->bytes = size;
    s->data = ::operator new(size, std::align_val_t(kAlign));
    std::lock_guard lock(p.mu);
    p.stats.bytes_in_use += s->bytes;
  }
  return StorageRef(s);
}

void StorageRef::release() {
  if (!s_) return;
  if (s_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Pool& p = pool();
    std::lock_guard lock(p.mu);
    p.stats.bytes_in_use -= s_->bytes;
    if (s_->size_class < kClasses) {
      p.free_lists[s_->size_class].push_back(s_);
      p.stats.bytes_cached += s_->bytes;
    } else {
      Pool::destroy(s_);
    }
  }
  s_ = nullptr;
}

MemoryStats memory_stats() {
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  return p.stats;
}

void release_cached_memory() {
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  for (auto& list : p.free_lists) {
    for (Storage* s : list) {
      p.stats.bytes_cached -= s->bytes;
      Pool::destroy(s);
    }
    list.clear();
  }
}

}  // namespace tapestry
