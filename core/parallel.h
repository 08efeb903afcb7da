// Parallel: a small pool of worker threads for coarse-grained work (one batch half per core), so
// the two cores of a small machine both compute without a thread pool per operation.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tapestry {

// A non-owning reference to a callable taking the job index: unlike std::function it never
// allocates, so a training step that runs its shards in parallel stays free of heap allocations.
// The callable must outlive the call (parallel_run returns only when every job is done).
class JobRef {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, JobRef>>>
  JobRef(F&& f)  // NOLINT: converts from any callable, as std::function does
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int i) { (*static_cast<std::remove_reference_t<F>*>(o))(i); }) {}
  void operator()(int i) const { call_(object_, i); }

 private:
  void* object_;
  void (*call_)(void*, int);
};

// One pause of a spin-wait: `pause` on x86, `yield` on aarch64 (about 10-40 ns here).
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

// Tapestry spreads work over cores itself, a batch shard per core, so OpenBLAS runs single-threaded
// inside each (two thread pools on two cores only slow each other down).

// Runs f(0) .. f(n-1), f(0) on the calling thread and the others on pool threads, and returns when
// all are done. The first exception thrown by any f is rethrown here (after all have finished).
// Calls from inside f run serially (no nesting).
void parallel_run(int n, JobRef f);

// How many cores parallel_run uses (1: everything on the calling thread). Defaults to the hardware
// threads; set_parallel_threads(0) restores that. Either also sets OpenBLAS to one thread.
int parallel_threads();
void set_parallel_threads(int n);
// True inside a parallel_run job (where nested parallel_runs run serially).
bool in_parallel_region();
// Whether a second job handed to the pool now would start at once: more than one core in use
// and the worker that takes it not asleep. A worker idle for longer than it spins sleeps, and
// waking it through the kernel took 100-250 us on the 2-core virtual machines here: more than a
// small model's whole optimizer pass, which then runs on this core alone (its split into jobs, and
// so its results, unchanged).
bool parallel_workers_awake();

// Elementwise passes over all parameters (clipping, Adam) split across the cores only from this
// many elements on (below it, a tiny model's 66K, handing half to the other core costs more than
// it saves), and only while the workers are awake (parallel_workers_awake).
inline constexpr int64_t kParallelMinElements = int64_t{1} << 17;
// Whether such a pass over `elements` elements goes to the second core now.
inline bool parameter_pass_parallel(int64_t elements) {
  return elements >= kParallelMinElements && parallel_workers_awake();
}

// parallel_run when `worth_it`, else the same jobs one after another on this thread: work too
// small to repay waking a core keeps its split into jobs, and so its results.
inline void parallel_run_if(bool worth_it, int n, JobRef f) {
  if (worth_it) return parallel_run(n, f);
  for (int i = 0; i < n; ++i) f(i);
}

}  // namespace tapestry
