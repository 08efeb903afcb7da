// Which kernels this CPU runs: its features read once, TAPESTRY_KERNELS to force a choice.
#include "tapestry/core/cpu_kernels.h"

#include <fmt/format.h>

#include <cstdlib>

#include "tapestry/core/errors.h"

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

namespace {

const Kernels& choose() {
  if (const char* forced = std::getenv("TAPESTRY_KERNELS"); forced && *forced)
    return *kernels_for(parse_capability(forced));
  for (Capability c : {Capability::avx512, Capability::avx2})
    if (const Kernels* k = kernels_for(c)) return *k;
  return kernels_portable;
}

}  // namespace

const Kernels& kernels() {
  // A bad TAPESTRY_KERNELS throws at every call, not once: a static's initialiser that throws is
  // retried at the next call.
  static const Kernels& chosen = choose();
  return chosen;
}

}  // namespace tapestry::cpu
