// Parallel: a small pool of worker threads for coarse-grained work (one batch half per core), so
// the two cores of a small machine both compute without a thread pool per operation.
#pragma once

#include <functional>

namespace tapestry {

// Runs f(0) .. f(n-1), f(0) on the calling thread and the others on pool threads, and returns when
// all are done. The first exception thrown by any f is rethrown here (after all have finished).
// Calls from inside f run serially (no nesting).
void parallel_run(int n, const std::function<void(int)>& f);

// Worker threads available besides the caller: hardware threads - 1, at least 0.
int parallel_workers();

}  // namespace tapestry
