// The kernels of core/cpu_kernels.h compiled for AVX-512 (x86-64-v4); CMakeLists.txt sets this
// file's flags.
#define TAPESTRY_KERNELS_ISA avx512
#define TAPESTRY_KERNELS_CAPABILITY Capability::avx512
#define TAPESTRY_KERNELS_TABLE kernels_avx512
#if defined(__x86_64__) && !(defined(__AVX512F__) && defined(__AVX512BW__) && \
                             defined(__AVX512DQ__) && defined(__AVX512VL__))
#error "this file needs -march=x86-64-v4 (CMakeLists.txt sets it)"
#endif
#include "cpu_kernels_body.inc"
