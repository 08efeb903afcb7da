#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) into build-fuzz/ with clang, ASan and UBSan, and runs
# each for SECONDS (default 30) from its seed corpus, one per core at a time, printing per target
# the executions, exec/s, coverage (libFuzzer's cov and ft at the end) and crashes. Exits non-zero
# if any target crashed, leaked, hit undefined behaviour, timed out or ran out of memory; the input
# is kept in build-fuzz/artifacts/ (replay it: build-fuzz/fuzz/TARGET FILE).
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
# fuzz_one TARGET: fuzzes it for SECONDS and writes its table row, and the report of anything it
# found, to logs/TARGET.row; logs/TARGET.failed marks a crash.
fuzz_one() {
  local t=$1 name=${1#fuzz_}
  local seeds=tests/fuzz/corpus/$name corpus=$build_dir/corpus/$name log=$build_dir/logs/$1.log
  local row=$build_dir/logs/$1.row
  rm -f "$build_dir/logs/$t.failed"
  mkdir -p "$corpus"
  local dict=()
  case $name in
    flags | command) dict=(-dict=tests/fuzz/flags.dict) ;;
    safetensors | saved_model | metrics | model_json) dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  local before after start took status=0
  before=$(find "$build_dir/artifacts" -name "$t-*" | wc -l)
  start=$SECONDS
  # -close_fd_mask=1: the targets' own output (--help text) is not libFuzzer's; -timeout: an input
  # taking over 10 s counts as a hang.
  "$build_dir/fuzz/$t" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
    -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$build_dir/artifacts/$t-" \
    >"$log" 2>&1 || status=$?
  took=$((SECONDS - start))
  after=$(find "$build_dir/artifacts" -name "$t-*" | wc -l)
  local execs rate last cov ft crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=$((after - before))
  if [[ $status -ne 0 && $crashes -eq 0 ]]; then crashes=1; fi  # e.g. a crash before the first input
  printf '%-18s %8s %12s %8s %8s %8s  %s\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "$crashes" >"$row"
  if [[ $crashes -ne 0 ]]; then
    touch "$build_dir/logs/$t.failed"
    grep -E 'ERROR: |runtime error|SUMMARY|Test unit written' "$log" | head -8 | sed 's/^/    /' \
      >>"$row"
  fi
}

# One target per core at a time: each is single-threaded, so a target fuzzes as fast beside
# another as alone, and the whole takes SECONDS per target divided by the cores.
parallel=$(nproc)
for t in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $parallel ]]; do wait -n || true; done
  fuzz_one "$t" &
done
wait

failed=()
printf '%-18s %8s %12s %8s %8s %8s  %s\n' target seconds executions exec/s cov ft crashes
for t in "${targets[@]}"; do
  cat "$build_dir/logs/$t.row"
  if [[ -e $build_dir/logs/$t.failed ]]; then failed+=("$t"); fi
done
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz: crashes in ${failed[*]} (logs in $build_dir/logs/, inputs in $build_dir/artifacts/)"
  exit 1
fi
echo "fuzz: no crashes in ${#targets[@]} targets"
