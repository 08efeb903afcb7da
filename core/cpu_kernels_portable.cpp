// The kernels of core/cpu_kernels.h compiled for no vector extension beyond the baseline (the
// reference loops); CMakeLists.txt sets this file's flags.
#define TAPESTRY_KERNELS_ISA portable
#define TAPESTRY_KERNELS_CAPABILITY Capability::portable
#define TAPESTRY_KERNELS_TABLE kernels_portable
#include "cpu_kernels_body.inc"
