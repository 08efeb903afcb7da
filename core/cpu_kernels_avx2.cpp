// The kernels of core/cpu_kernels.h compiled for AVX2 and FMA (x86-64-v3); CMakeLists.txt sets this
// file's flags.
#define TAPESTRY_KERNELS_ISA avx2
#define TAPESTRY_KERNELS_CAPABILITY Capability::avx2
#define TAPESTRY_KERNELS_TABLE kernels_avx2
#if defined(__x86_64__) && !(defined(__AVX2__) && defined(__FMA__))
#error "this file needs -march=x86-64-v3 (CMakeLists.txt sets it)"
#endif
#include "cpu_kernels_body.inc"
