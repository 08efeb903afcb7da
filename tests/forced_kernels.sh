#!/bin/sh
# Runs a test command with TAPESTRY_KERNELS=CAP forced, or skips (exit 77, CTest's
# SKIP_RETURN_CODE) with the reason when this CPU cannot run CAP or would run it anyway.
# CAP avx512-emulated runs the AVX-512 kernels emulated with AVX2 (tests/emulated/) where the CPU
# has no AVX-512.
# usage: forced_kernels.sh CAP COMMAND...
cap=$1
shift
has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
case $cap in
  avx2)
    has avx2 && has fma || { echo "skipped: this CPU has no AVX2 and FMA"; exit 77; }
    has avx512f || { echo "skipped: without AVX-512 the default run already uses the AVX2 kernels"; exit 77; }
    ;;
  avx512-emulated)
    has avx512f && has avx512dq && has avx512bw && has avx512vl &&
      { echo "skipped: this CPU runs the AVX-512 kernels themselves"; exit 77; }
    has avx2 && has fma || { echo "skipped: this CPU has no AVX2 and FMA to emulate AVX-512 with"; exit 77; }
    TAPESTRY_TEST_KERNELS=$cap exec "$@"
    ;;
esac
TAPESTRY_KERNELS=$cap exec "$@"
