// GEMM profile: with TAPESTRY_GEMM_PROFILE set, every product's shape and time is tallied and the
// table printed to stderr at exit, to see where the product time of a step goes.
#pragma once

#include <chrono>
#include <cstdint>

namespace tapestry::blas {

struct GemmProfile;
// The profile, or null when TAPESTRY_GEMM_PROFILE is not set.
GemmProfile* gemm_profile();
void gemm_profile_add(GemmProfile* p, char a, char b, int64_t m, int64_t n, int64_t k,
                      double seconds);

// Times one product while in scope, when profiling is on. a and b say how the operands were
// read: 'N' as stored, 'T' transposed, 'P' a packed weight (core/packed.h).
class GemmTimer {
 public:
  GemmTimer(char a, char b, int64_t m, int64_t n, int64_t k)
      : p_(gemm_profile()), a_(a), b_(b), m_(m), n_(n), k_(k) {
    if (p_) start_ = std::chrono::steady_clock::now();
  }
  ~GemmTimer() {
    if (p_)
      gemm_profile_add(
          p_, a_, b_, m_, n_, k_,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

 private:
  GemmProfile* p_;
  char a_, b_;
  int64_t m_, n_, k_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tapestry::blas
