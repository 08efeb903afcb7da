// Memory: a size-class pool of 64-byte aligned blocks (4 classes per power of two). Each thread
// keeps its own free lists, so a steady step allocates and frees without a lock; a shared list
// behind them takes a thread's blocks when it exits, the blocks a thread frees that another took
// out, and serves every thread's misses. A class no step has asked for lately goes back to the
// system at the next miss, so batches of ever-changing shapes do not fill every size class. A
// thread's own lists age by the steps that thread marks: the shards of a training step clear their
// tapes at their own pace, and what a miss lets go must not depend on how far the others are.
#include "tapestry/core/memory.h"

#include <algorithm>
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
// A request its own class cannot serve may take a block of one of the next classes (under twice
// its size): a batch a little shorter than the last reuses the last one's blocks.
constexpr int kLargerClasses = 3;
// A class no request has asked for in this many steps is let go at the next miss (the shared
// lists: this many steps of every live thread).
constexpr uint64_t kIdleSteps = 2;

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

// Steps ended so far (mark_memory_step): by this thread, the clock of its own lists; by every
// thread, the clock of the shared lists.
thread_local uint64_t t_steps = 0;
std::atomic<uint64_t> g_steps{0};

// One free list per size class and the step each class was last asked for in.
struct FreeLists {
  std::vector<Storage*> lists[kClasses];
  uint64_t last_use[kClasses] = {};
  uint64_t trimmed_at = 0;  // the step of the last trim

  // A block of class c or of one of the next kLargerClasses, or null; `now` is the lists' clock.
  Storage* take(int c, uint64_t now) {
    last_use[c] = now;
    for (int from = c; from < std::min(c + 1 + kLargerClasses, kClasses); ++from) {
      if (lists[from].empty()) continue;
      last_use[from] = now;
      Storage* s = lists[from].back();
      lists[from].pop_back();
      return s;
    }
    return nullptr;
  }
  // Frees the blocks of every class not asked for in the last `idle` steps (at most once a
  // step); returns the bytes freed.
  int64_t trim_idle(uint64_t now, uint64_t idle) {
    if (trimmed_at == now || now <= idle) return 0;
    trimmed_at = now;
    int64_t freed = 0;
    for (int c = 0; c < kClasses; ++c)
      if (last_use[c] + idle < now) freed += drop(lists[c]);
    return freed;
  }
  int64_t drop_all() {
    int64_t freed = 0;
    for (auto& list : lists) freed += drop(list);
    return freed;
  }
  static int64_t drop(std::vector<Storage*>& list) {
    int64_t freed = 0;
    for (Storage* s : list) {
      freed += static_cast<int64_t>(s->bytes);
      destroy(s);
    }
    list.clear();
    return freed;
  }
};

// Byte and block counts. Each thread keeps its own, written only by that thread (a plain load
// and store, no locked read-modify-write on the hot path), and memory_stats sums them; a block
// freed on another thread than the one that took it makes one thread's in_use negative, never
// the sum.
struct Counters {
  std::atomic<int64_t> in_use{0}, cached{0}, system{0}, hits{0};
};

inline void bump(std::atomic<int64_t>& c, int64_t by) {
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// The shared lists: a thread's blocks when it exits, and what release_cached_memory drops; the
// live threads' counters, and the totals of threads that have ended.
struct Local;
struct Shared {
  std::mutex mu;
  FreeLists free;
  std::vector<const Local*> threads;
  Counters ended;  // changed under mu only
};

Shared& shared() {
  static Shared* s = new Shared();  // never destroyed: tensors in statics may outlive main
  return *s;
}

// Set once a thread's lists are gone: tensors in statics are released after the main thread's
// thread-locals are destroyed, and must then go straight to the shared lists.
thread_local bool t_local_gone = false;

// One thread's free lists and counters; handed to the shared lists when the thread ends.
struct Local {
  FreeLists free;
  Counters n;
  Local() {
    Shared& sh = shared();
    std::lock_guard lock(sh.mu);
    sh.threads.push_back(this);
  }
  ~Local() {
    Shared& sh = shared();
    std::lock_guard lock(sh.mu);
    const uint64_t now = g_steps.load(std::memory_order_relaxed);
    for (int c = 0; c < kClasses; ++c) {
      if (free.lists[c].empty()) continue;
      auto& to = sh.free.lists[c];
      to.insert(to.end(), free.lists[c].begin(), free.lists[c].end());
      free.lists[c].clear();
      sh.free.last_use[c] = now;  // its own clock does not run on: they age from here
    }
    bump(sh.ended.in_use, n.in_use.load());
    bump(sh.ended.cached, n.cached.load());
    bump(sh.ended.system, n.system.load());
    bump(sh.ended.hits, n.hits.load());
    std::erase(sh.threads, this);
    t_local_gone = true;
  }
};

// This thread's lists, or null once they have been destroyed at thread exit.
Local* local() {
  if (t_local_gone) return nullptr;
  thread_local Local l;
  return &l;
}

// Adds to one of this thread's counters, or (after its lists are gone) to the shared totals.
void count(std::atomic<int64_t> Counters::*which, Local* mine, int64_t by) {
  if (mine) {
    bump(mine->n.*which, by);
  } else {
    Shared& sh = shared();
    std::lock_guard lock(sh.mu);
    bump(sh.ended.*which, by);
  }
}

}  // namespace

StorageRef allocate_storage(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const int c = size_class_of(bytes);
  Local* mine = local();
  Storage* s = nullptr;
  int64_t trimmed = 0;
  if (c < kClasses) {
    if (mine) s = mine->free.take(c, t_steps);
    if (!s) {
      // A miss: a good time to let old classes go.
      if (mine) trimmed += mine->free.trim_idle(t_steps, kIdleSteps);
      Shared& sh = shared();
      std::lock_guard lock(sh.mu);
      const uint64_t now = g_steps.load(std::memory_order_relaxed);
      s = sh.free.take(c, now);
      if (!s)
        trimmed += sh.free.trim_idle(now, kIdleSteps * std::max<size_t>(sh.threads.size(), 1));
    }
  }
  if (s) {
    count(&Counters::cached, mine, -static_cast<int64_t>(s->bytes));
    count(&Counters::hits, mine, 1);
  } else {
    const size_t size = c < kClasses ? class_size(c) : bytes;
    s = new Storage();
    s->size_class = c;
    s->bytes = size;
    s->data = ::operator new(size, std::align_val_t(kAlign));
    count(&Counters::system, mine, 1);
  }
  if (trimmed) count(&Counters::cached, mine, -trimmed);
  s->owner = mine;
  count(&Counters::in_use, mine, static_cast<int64_t>(s->bytes));
  return StorageRef::adopt(s);
}

void StorageRef::release() {
  if (!s_) return;
  // The last reference needs no atomic read-modify-write: holding it, no other thread can be
  // copying this block (most tensors have one owner from start to end).
  if (s_->refs.load(std::memory_order_acquire) == 1 ||
      s_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Local* mine = local();
    const auto bytes = static_cast<int64_t>(s_->bytes);
    count(&Counters::in_use, mine, -bytes);
    if (s_->size_class < kClasses) {
      // A block another thread took out goes back where that thread's misses will find it: kept
      // here, it would sit unused while the other thread (a decoding shard's worker, every
      // call) took new memory from the system.
      if (mine && s_->owner == mine) {
        mine->free.lists[s_->size_class].push_back(s_);
      } else {
        Shared& sh = shared();
        std::lock_guard lock(sh.mu);
        sh.free.lists[s_->size_class].push_back(s_);
      }
      count(&Counters::cached, mine, bytes);
    } else {
      destroy(s_);
    }
  }
  s_ = nullptr;
}

void mark_memory_step() {
  ++t_steps;
  g_steps.fetch_add(1, std::memory_order_relaxed);
}

MemoryStats memory_stats() {
  Shared& sh = shared();
  std::lock_guard lock(sh.mu);
  int64_t in_use = sh.ended.in_use.load(), cached = sh.ended.cached.load();
  int64_t system = sh.ended.system.load(), hits = sh.ended.hits.load();
  for (const Local* t : sh.threads) {
    in_use += t->n.in_use.load(std::memory_order_relaxed);
    cached += t->n.cached.load(std::memory_order_relaxed);
    system += t->n.system.load(std::memory_order_relaxed);
    hits += t->n.hits.load(std::memory_order_relaxed);
  }
  MemoryStats m;
  m.bytes_in_use = static_cast<size_t>(in_use);
  m.bytes_cached = static_cast<size_t>(cached);
  m.system_allocations = static_cast<size_t>(system);
  m.pool_hits = static_cast<size_t>(hits);
  return m;
}

void release_cached_memory() {
  int64_t dropped = 0;
  Local* mine = local();
  if (mine) dropped += mine->free.drop_all();
  {
    Shared& sh = shared();
    std::lock_guard lock(sh.mu);
    dropped += sh.free.drop_all();
  }
  count(&Counters::cached, mine, -dropped);
}

}  // namespace tapestry
