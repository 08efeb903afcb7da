// parallel_run: every job exactly once, errors rethrown, the workers' and the caller's sleep.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tapestry/core/parallel.h"

using namespace tapestry;

namespace {

// Restores the default core count when a test case ends, whatever it set.
struct DefaultThreads {
  ~DefaultThreads() { set_parallel_threads(0); }
};

// Runs parallel_run(n) once and returns how many times each job index ran. Where the jobs are
// spread over the cores, a job that does not see itself inside a parallel region counts 100
// (Catch2's assertions are for the test's own thread); a single job runs as a plain call.
std::vector<int> run_counting(int n) {
  std::vector<std::atomic<int>> counts(static_cast<size_t>(n));
  const bool spread = n >= 2 && parallel_threads() >= 2;
  parallel_run(n, [&](int i) {
    counts[static_cast<size_t>(i)].fetch_add(!spread || in_parallel_region() ? 1 : 100);
  });
  std::vector<int> out;
  for (auto& c : counts) out.push_back(c.load());
  return out;
}

}  // namespace

TEST_CASE("parallel_run runs every job exactly once, whatever the job count", "[parallel]") {
  DefaultThreads restore;
  set_parallel_threads(0);
  if (parallel_threads() < 2) WARN("one core only: every job runs on the calling thread");
  // Job counts below, at and above the cores (more jobs than cores: each thread strides), many
  // times in a row, so that runs follow each other while the workers are still spinning.
  for (int round = 0; round < 2000; ++round) {
    const int n = 1 + round % 8;
    const auto counts = run_counting(n);
    for (int i = 0; i < n; ++i) {
      INFO("round " << round << " n " << n << " job " << i);
      REQUIRE(counts[static_cast<size_t>(i)] == 1);
    }
  }
  REQUIRE_FALSE(in_parallel_region());
}

TEST_CASE("parallel_run rethrows a job's error and stays usable", "[parallel]") {
  DefaultThreads restore;
  set_parallel_threads(0);
  for (int thrower : {0, 1}) {
    INFO("job " << thrower << " throws");
    std::atomic<int> ran{0};
    REQUIRE_THROWS_WITH(parallel_run(2,
                                     [&](int i) {
                                       ran.fetch_add(1);
                                       if (i == thrower) throw std::runtime_error("job failed");
                                     }),
                        "job failed");
    REQUIRE(ran.load() == 2);  // the other job still ran to its end
    REQUIRE_FALSE(in_parallel_region());
    const auto counts = run_counting(2);
    REQUIRE(counts == std::vector<int>{1, 1});
  }
}

TEST_CASE("parallel_run wakes sleeping workers and a sleeping caller", "[parallel]") {
  DefaultThreads restore;
  set_parallel_threads(0);
  if (parallel_threads() < 2) WARN("one core only: there are no workers to put to sleep");
  for (int round = 0; round < 3; ++round) {
    // Long past the workers' spinning (thousands of pauses, tens of microseconds): they sleep on
    // the condition variable, and the next run must wake them.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(run_counting(2) == std::vector<int>{1, 1});
    // A worker's job longer than the caller's spinning: the caller sleeps until the worker ends.
    std::atomic<int> finished{0};
    parallel_run(2, [&](int i) {
      if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      finished.fetch_add(1);
    });
    REQUIRE(finished.load() == 2);
  }
}

TEST_CASE("parallel_run inside a job runs its jobs serially on that thread", "[parallel]") {
  DefaultThreads restore;
  set_parallel_threads(0);
  std::vector<std::atomic<int>> inner(4);  // 1 per job run on its outer job's thread, else 100
  parallel_run(2, [&](int outer) {
    const auto self = std::this_thread::get_id();
    parallel_run(2, [&](int i) {
      inner[static_cast<size_t>(outer * 2 + i)].fetch_add(std::this_thread::get_id() == self ? 1
                                                                                             : 100);
    });
  });
  for (auto& c : inner) REQUIRE(c.load() == 1);
}

TEST_CASE("parallel_workers_awake: false with one core or sleeping workers, true while one works",
          "[parallel]") {
  DefaultThreads restore;
  set_parallel_threads(1);
  REQUIRE_FALSE(parallel_workers_awake());
  set_parallel_threads(0);
  if (parallel_threads() < 2) {
    WARN("one core only: there are no workers to be awake");
    return;
  }
  // Long past the workers' spinning they sleep, and say so (within a second even where other
  // programs keep them from the cores for a while).
  bool asleep = false;
  for (int wait = 0; wait < 50 && !asleep; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    asleep = !parallel_workers_awake();
  }
  REQUIRE(asleep);
  // While a worker runs a job it is awake: the caller's job asks while the worker's waits.
  REQUIRE_FALSE(in_parallel_region());  // else the jobs would run one after the other, and wait
  std::atomic<int> phase{0};
  bool awake = false;
  parallel_run(2, [&](int job) {
    if (job == 1) {
      phase.store(1);
      while (phase.load() != 2) std::this_thread::yield();
      return;
    }
    while (phase.load() != 1) std::this_thread::yield();
    awake = parallel_workers_awake();
    phase.store(2);
  });
  REQUIRE(awake);
}
