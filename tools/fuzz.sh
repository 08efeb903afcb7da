#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) into build-fuzz/ with clang, ASan and UBSan, and runs
# each for SECONDS (default 30) from its seed corpus, printing per target the executions, exec/s,
# coverage (libFuzzer's cov and ft at the end) and crashes. Exits non-zero if any target crashed,
# leaked, hit undefined behaviour, timed out or ran out of memory; the input is kept in
# build-fuzz/artifacts/ (replay it: build-fuzz/fuzz/TARGET FILE).
#   tools/fuzz.sh [SECONDS] [TARGET...]    e.g. tools/fuzz.sh 60 fuzz_tsv fuzz_flags
# Inputs that found new coverage go to build-fuzz/corpus/TARGET/ (kept between runs; the seeds in
# tests/fuzz/corpus/ are never written to).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
build_dir=${TAPESTRY_FUZZ_BUILD_DIR:-build-fuzz}
tools/setup.sh --fuzz-tools

# -O1 with line tables: quicker to build than -O2 -g, and the sanitizers' reports keep their lines.
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build_dir" -DTAPESTRY_FUZZ=ON \
  -DTAPESTRY_BUILD_TESTS=OFF -DTAPESTRY_BUILD_EXAMPLES=OFF -DTAPESTRY_INSTALL=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target fuzz_targets

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for src in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi

mkdir -p "$build_dir/logs" "$build_dir/artifacts"
# The targets write their inputs under here (in memory where /dev/shm exists); removed at the end
# even when a target crashed before cleaning up after itself.
scratch_base=/dev/shm
[[ -d $scratch_base && -w $scratch_base ]] || scratch_base=${TMPDIR:-/tmp}
TAPESTRY_FUZZ_SCRATCH=$(mktemp -d "$scratch_base/tapestry-fuzz.XXXXXX")
export TAPESTRY_FUZZ_SCRATCH
trap 'rm -rf "$TAPESTRY_FUZZ_SCRATCH"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '%-18s %8s %12s %8s %8s %8s  %s\n' target seconds executions exec/s cov ft crashes
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  seeds=tests/fuzz/corpus/$name
  corpus=$build_dir/corpus/$name
  log=$build_dir/logs/$t.log
  mkdir -p "$corpus"
  dict=()
  case $name in
    flags | command) dict=(-dict=tests/fuzz/flags.dict) ;;
    safetensors | saved_model | metrics | model_json) dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  before=$(find "$build_dir/artifacts" -name "$t-*" | wc -l)
  start=$SECONDS
  # -close_fd_mask=1: the targets' own output (--help text) is not libFuzzer's; -timeout: an input
  # taking over 10 s counts as a hang.
  status=0
  "$build_dir/fuzz/$t" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
    -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$build_dir/artifacts/$t-" \
    >"$log" 2>&1 || status=$?
  took=$((SECONDS - start))
  after=$(find "$build_dir/artifacts" -name "$t-*" | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=$((after - before))
  if [[ $status -ne 0 && $crashes -eq 0 ]]; then crashes=1; fi  # e.g. a crash before the first input
  printf '%-18s %8s %12s %8s %8s %8s  %s\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "$crashes"
  if [[ $crashes -ne 0 ]]; then
    failed+=("$t")
    grep -E 'ERROR: |runtime error|SUMMARY|Test unit written' "$log" | head -8 | sed 's/^/    /'
  fi
done
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz: crashes in ${failed[*]} (logs in $build_dir/logs/, inputs in $build_dir/artifacts/)"
  exit 1
fi
echo "fuzz: no crashes in ${#targets[@]} targets"
