// Parallel: persistent worker threads, woken by a new state (a run's number and job count).
#include "tapestry/core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tapestry/core/blas.h"

namespace tapestry {

namespace {

thread_local bool in_parallel = false;

// Spins this many times (a pause each, about 10-40 ns) before sleeping: a worker waiting for
// the next job, or the caller waiting for the workers, catches work that follows within tens of
// microseconds (the ops of one decoding step split across the cores) without the futex wake-up.
constexpr int kSpins = 2048;

// A run with nothing to do, for the job's place before the first run.
const auto no_job = [](int) {};

// The caller and the workers meet through atomics; the mutex and the condition variables serve
// only a thread that has stopped spinning and sleeps. What the caller writes for a run (the state
// and a copy of the job) and what the workers write back (their count of finished jobs) sit on
// cache lines of their own, so that a run moves about two lines: the caller's out, the workers'
// back (besides what the job reads). parallel_run(2) of an empty job on the 2-core Zen 4: 650-710
// ns when every worker took mu_ to read its job and to report it done, about 205 with the atomics
// on one line and the job read through a pointer to the caller's stack, 95-100 now. The state
// holds the run's number and its job count in one atomic, so that a worker left out of one run (its
// index past the count) can never pair that run's number with the next run's count.
class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
  }
  ~Pool() {
    to_workers_.stop.store(true);
    {
      std::lock_guard lock(mu_);
      // No jobs: every worker sees a new state, then stop.
      to_workers_.state.store((++runs_) << 32);
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }
  // Whether worker 1, the one a run of two jobs hands its second to, sleeps.
  bool first_sleeping() const { return to_caller_.first_sleeping.load(std::memory_order_relaxed); }

  void run(int n, JobRef f) {
    std::unique_lock lock(run_mu_);  // one parallel_run at a time
    to_workers_.job = f;
    error_ = nullptr;
    expected_ += static_cast<uint64_t>(n - 1);
    // seq_cst, as sleeping (see loop)
    to_workers_.state.store((++runs_) << 32 | static_cast<uint32_t>(n));
    if (to_caller_.sleeping.load() > 0) {
      std::lock_guard l(mu_);  // a worker between its last check and its wait holds mu_
      wake_.notify_all();
    }
    call(f, 0);
    // seq_cst: with caller_sleeping's store before the wait below, and the workers' add then
    // load of that flag, either the caller sees the last job finished or that worker sees the
    // caller asleep (an acquire load could be ordered before the flag's store, on ARM).
    auto done = [&] { return to_caller_.finished.load() == expected_; };
    for (int i = 0; i < kSpins && !done(); ++i) spin_pause();
    if (!done()) {
      std::unique_lock l(mu_);
      to_workers_.caller_sleeping.store(true);
      done_.wait(l, done);
      to_workers_.caller_sleeping.store(false);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void call(JobRef job, int index) {
    in_parallel = true;
    try {
      job(index);
    } catch (...) {
      std::lock_guard l(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    in_parallel = false;
  }

  void loop(int index) {
    uint64_t seen = 0;
    std::atomic<uint64_t>& state = to_workers_.state;
    while (true) {
      for (int i = 0; i < kSpins && state.load(std::memory_order_acquire) == seen; ++i)
        spin_pause();
      if (state.load() == seen) {
        // Going to sleep: counted first, so that a caller storing a new state after the check
        // below sees the count and notifies (under mu_, hence after this wait began).
        std::unique_lock l(mu_);
        to_caller_.sleeping.fetch_add(1);
        if (index == 1) to_caller_.first_sleeping.store(true, std::memory_order_relaxed);
        wake_.wait(l, [&] { return state.load() != seen; });
        if (index == 1) to_caller_.first_sleeping.store(false, std::memory_order_relaxed);
        to_caller_.sleeping.fetch_sub(1);
      }
      seen = state.load();  // the job was written before it
      if (to_workers_.stop.load()) return;
      if (index >= static_cast<int>(seen & 0xFFFFFFFFu)) continue;
      // A worker in the run keeps the job valid: the caller waits for it before the next run.
      call(to_workers_.job, index);
      // The caller spins on finished, or sleeps on done_ once it has said so; the last worker
      // wakes it under mu_, so a caller between its check and its wait cannot miss it.
      to_caller_.finished.fetch_add(1);
      if (to_workers_.caller_sleeping.load()) {
        std::lock_guard g(mu_);
        done_.notify_one();
      }
    }
  }

  // Written by the caller, read by the workers.
  struct alignas(64) ToWorkers {
    std::atomic<uint64_t> state{0};  // runs_ << 32 | the run's job count
    JobRef job{no_job};
    std::atomic<bool> stop{false}, caller_sleeping{false};
  };
  // Written by the workers, read by the caller.
  struct alignas(64) ToCaller {
    std::atomic<uint64_t> finished{0};  // jobs the workers have finished, over all runs
    std::atomic<int> sleeping{0};
    std::atomic<bool> first_sleeping{false};
  };
  ToWorkers to_workers_;
  ToCaller to_caller_;
  std::vector<std::thread> threads_;
  std::mutex mu_, run_mu_, error_mu_;
  std::condition_variable wake_, done_;
  uint64_t runs_ = 0;      // written by the caller only (under run_mu_) and the destructor
  uint64_t expected_ = 0;  // the finished count that ends the current run (the caller's)
  std::exception_ptr error_;
};

// Read once: glibc's hardware_concurrency opens and reads /sys/devices/system/cpu/online at
// every call (about 45 us), and parallel_threads() is asked at every product.
int hardware_threads() {
  static const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return n;
}

std::atomic<int> wanted_threads{0};  // 0: hardware_threads()

Pool& pool() {
  static Pool* p = [] {
    blas::set_threads(1);
    return new Pool(hardware_threads() - 1);  // never destroyed: workers may outlive statics
  }();
  return *p;
}

}  // namespace

bool in_parallel_region() {
  return in_parallel;
}

bool parallel_workers_awake() {
  return parallel_threads() > 1 && !pool().first_sleeping();
}

int parallel_threads() {
  const int w = wanted_threads.load();
  return std::min(w > 0 ? w : hardware_threads(), pool().workers() + 1);
}

void set_parallel_threads(int n) {
  wanted_threads.store(std::max(n, 0));
  pool();  // sets OpenBLAS to one thread
  blas::set_threads(1);
}

void parallel_run(int n, JobRef f) {
  if (n <= 0) return;
  const int threads = parallel_threads();
  if (n == 1 || in_parallel || threads == 1) {
    for (int i = 0; i < n; ++i) f(i);
    return;
  }
  // More jobs than threads: each thread takes every threads-th job.
  if (n > threads) {
    pool().run(threads, [&](int k) {
      for (int i = k; i < n; i += threads) f(i);
    });
    return;
  }
  pool().run(n, f);
}

}  // namespace tapestry
