// Parallel: persistent worker threads woken by a generation counter.
#include "core/parallel.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tapestry {

namespace {

thread_local bool in_parallel = false;

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  void run(int n, const std::function<void(int)>& f) {
    std::unique_lock lock(run_mu_);  // one parallel_run at a time
    {
      std::lock_guard l(mu_);
      job_ = &f;
      jobs_ = n;
      pending_ = n - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    call(0);
    std::unique_lock l(mu_);
    done_.wait(l, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void call(int index) {
    in_parallel = true;
    try {
      (*job_)(index);
    } catch (...) {
      std::lock_guard l(mu_);
      if (!error_) error_ = std::current_exception();
    }
    in_parallel = false;
  }

  void loop(int index) {
    uint64_t seen = 0;
    while (true) {
      std::unique_lock l(mu_);
      wake_.wait(l, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
      if (index >= jobs_) continue;
      l.unlock();
      call(index);
      l.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_, run_mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int jobs_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool p(std::max(1, static_cast<int>(std::thread::hardware_concurrency())) - 1);
  return p;
}

}  // namespace

int parallel_workers() {
  return pool().workers();
}

void parallel_run(int n, const std::function<void(int)>& f) {
  if (n <= 0) return;
  if (n == 1 || in_parallel || pool().workers() == 0) {
    for (int i = 0; i < n; ++i) f(i);
    return;
  }
  // More jobs than threads: the extra ones run on the caller after its own.
  const int threads = pool().workers() + 1;
  if (n > threads) {
    pool().run(threads, [&](int k) {
      for (int i = k; i < n; i += threads) f(i);
    });
    return;
  }
  pool().run(n, f);
}

}  // namespace tapestry
