// Memory: a size-class pool of 64-byte aligned blocks (4 classes per power of two). Each thread
// keeps its own free lists, so a steady step allocates and frees without a lock; a shared list
// behind them takes a thread's blocks when it exits and serves other threads' misses.
#include "core/memory.h"

#include <atomic>
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

void destroy(Storage* s) {
  ::operator delete(s->data, std::align_val_t(kAlign));
  delete s;
}

struct Counters {
  std::atomic<size_t> in_use{0}, cached{0}, system{0}, hits{0};
};

Counters& counters() {
  static Counters* c = new Counters();  // never destroyed: tensors in statics may outlive main
  return *c;
}

// The shared lists: a thread's blocks when it exits, and what release_cached_memory drops.
struct Shared {
  std::mutex mu;
  std::vector<Storage*> lists[kClasses];
};

Shared& shared() {
  static Shared* s = new Shared();
  return *s;
}

// Set once a thread's lists are gone: tensors in statics are released after the main thread's
// thread-locals are destroyed, and must then go straight to the shared lists.
thread_local bool t_local_gone = false;

// One thread's free lists; handed to the shared lists when the thread ends.
struct Local {
  std::vector<Storage*> lists[kClasses];
  ~Local() {
    Shared& sh = shared();
    std::lock_guard lock(sh.mu);
    for (int c = 0; c < kClasses; ++c) {
      sh.lists[c].insert(sh.lists[c].end(), lists[c].begin(), lists[c].end());
      lists[c].clear();
    }
    t_local_gone = true;
  }
};

// This thread's lists, or null once they have been destroyed at thread exit.
Local* local() {
  if (t_local_gone) return nullptr;
  thread_local Local l;
  return &l;
}

}  // namespace

StorageRef allocate_storage(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const int c = size_class_of(bytes);
  Counters& n = counters();
  Storage* s = nullptr;
  if (c < kClasses) {
    Local* mine = local();
    if (mine && !mine->lists[c].empty()) {
      s = mine->lists[c].back();
      mine->lists[c].pop_back();
    } else {
      Shared& sh = shared();
      std::lock_guard lock(sh.mu);
      if (!sh.lists[c].empty()) {
        s = sh.lists[c].back();
        sh.lists[c].pop_back();
      }
    }
  }
  if (s) {
    n.cached.fetch_sub(s->bytes, std::memory_order_relaxed);
    n.hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    const size_t size = c < kClasses ? class_size(c) : bytes;
    s = new Storage();
    s->size_class = c;
    s->bytes = size;
    s->data = ::operator new(size, std::align_val_t(kAlign));
    n.system.fetch_add(1, std::memory_order_relaxed);
  }
  n.in_use.fetch_add(s->bytes, std::memory_order_relaxed);
  return StorageRef(s);
}

void StorageRef::release() {
  if (!s_) return;
  if (s_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Counters& n = counters();
    n.in_use.fetch_sub(s_->bytes, std::memory_order_relaxed);
    if (s_->size_class < kClasses) {
      if (Local* mine = local()) {
        mine->lists[s_->size_class].push_back(s_);
      } else {
        Shared& sh = shared();
        std::lock_guard lock(sh.mu);
        sh.lists[s_->size_class].push_back(s_);
      }
      n.cached.fetch_add(s_->bytes, std::memory_order_relaxed);
    } else {
      destroy(s_);
    }
  }
  s_ = nullptr;
}

MemoryStats memory_stats() {
  Counters& n = counters();
  MemoryStats m;
  m.bytes_in_use = n.in_use.load(std::memory_order_relaxed);
  m.bytes_cached = n.cached.load(std::memory_order_relaxed);
  m.system_allocations = n.system.load(std::memory_order_relaxed);
  m.pool_hits = n.hits.load(std::memory_order_relaxed);
  return m;
}

void release_cached_memory() {
  Counters& n = counters();
  auto drop = [&](std::vector<Storage*>& list) {
    for (Storage* s : list) {
      n.cached.fetch_sub(s->bytes, std::memory_order_relaxed);
      destroy(s);
    }
    list.clear();
  };
  if (Local* mine = local())
    for (auto& list : mine->lists) drop(list);
  Shared& sh = shared();
  std::lock_guard lock(sh.mu);
  for (auto& list : sh.lists) drop(list);
}

}  // namespace tapestry
