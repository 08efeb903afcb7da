// Which kernels this CPU runs: its features read once, TAPESTRY_KERNELS to force a choice.
#include "tapestry/core/cpu_kernels.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

#include "tapestry/core/errors.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace tapestry::cpu {

// One table per capability, each from its own build of cpu_kernels_body.inc.
extern const Kernels kernels_avx512;
extern const Kernels kernels_avx2;
extern const Kernels kernels_portable;

std::string_view capability_name(Capability c) {
  switch (c) {
    case Capability::avx512:
      return "avx512";
    case Capability::avx2:
      return "avx2";
    case Capability::portable:
      return "portable";
  }
  return "unknown";
}

bool cpu_supports(Capability c) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (c) {
    case Capability::avx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    case Capability::avx2:
      return avx2;
    case Capability::portable:
      return true;
  }
  return false;
#else
  return c == Capability::portable;
#endif
}

const Kernels* kernels_for(Capability c) {
  if (!cpu_supports(c)) return nullptr;
  switch (c) {
    case Capability::avx512:
      return &kernels_avx512;
    case Capability::avx2:
      return &kernels_avx2;
    case Capability::portable:
      return &kernels_portable;
  }
  return nullptr;
}

Capability parse_capability(std::string_view name) {
  for (Capability c : {Capability::avx512, Capability::avx2, Capability::portable}) {
    if (name != capability_name(c)) continue;
    if (!cpu_supports(c))
      throw ValueError(
          fmt::format("TAPESTRY_KERNELS={}: this CPU cannot run the {} kernels", name, name));
    return c;
  }
  throw ValueError(
      fmt::format("TAPESTRY_KERNELS={}: not a kernel set (avx512, avx2 or portable)", name));
}

bool splits_512_bit_vectors() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned family = ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
  return family == 0x19 && cpu_supports(Capability::avx512);
#else
  return false;
#endif
}

namespace {

// The AVX-512 set with its Adam step replaced by the AVX2 set's where 512-bit vectors are split.
// On a Zen 4 the AVX2 set's vsqrtps and vdivps on 8 floats (the reference's exact arithmetic)
// take 66 us for a `tiny` Transformer's 173,856 parameters, the AVX-512 set's estimates and
// Newton steps on 16 floats 89 us: each 16-float instruction takes two passes through a 256-bit
// unit, and the refinement is many more instructions than the divider's two. A `tiny`
// Transformer training step: 0.328 against 0.342 ms.
const Kernels& avx512_for_this_cpu() {
  static const Kernels adjusted = [] {
    Kernels k = kernels_avx512;
    if (splits_512_bit_vectors()) k.adam_update = kernels_avx2.adam_update;
    return k;
  }();
  return adjusted;
}

const Kernels& choose() {
  Capability c = Capability::portable;
  if (const char* forced = std::getenv("TAPESTRY_KERNELS"); forced && *forced)
    c = parse_capability(forced);
  else if (cpu_supports(Capability::avx512))
    c = Capability::avx512;
  else if (cpu_supports(Capability::avx2))
    c = Capability::avx2;
  return c == Capability::avx512 ? avx512_for_this_cpu() : *kernels_for(c);
}

// replace_kernels_for_testing's; atomic, as the pool's workers read it (a plain load on x86-64).
std::atomic<const Kernels*> replacement{nullptr};

}  // namespace

const Kernels& kernels() {
  if (const Kernels* k = replacement.load(std::memory_order_acquire)) return *k;
  // A bad TAPESTRY_KERNELS throws at every call, not once: a static's initialiser that throws is
  // retried at the next call.
  static const Kernels& chosen = choose();
  return chosen;
}

void replace_kernels_for_testing(const Kernels* k) {
  replacement.store(k, std::memory_order_release);
}

decltype(Kernels::few_rows_product) few_rows_kernel(int64_t m, int64_t k) {
  const Kernels& kern = kernels();
  return m >= 2 && m <= kern.few_rows_max && k > 0 && k <= kProductDepth &&
                 kern.capability != Capability::portable
             ? kern.few_rows_product
             : nullptr;
}

}  // namespace tapestry::cpu
