#!/usr/bin/env bash
# Times a training step of a saved model (the README's Multi30k recipe, say) in Tapestry and in
# its own export to PyTorch, on the same batches of real text, alternately, and prints both
# speeds and their ratio, each side at its best setting.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/bench_recipe.sh --model DIR --src-text FILE --tgt-text FILE [--rounds N]
                             [--batch N] [--iters N] [--blas-cores "Haswell SkylakeX"]
                             [--malloc "default keep"] [--no-build] [--out DIR]

Exports the model (`tapestry export --to pytorch`), writes the batches once (`tapestry bench
--model DIR --dump-batches`: the first 8 batches training would make of the text, with the
seed 0), then runs N rounds; a round times `tapestry bench --model` at 1 and 2 cores and
tools/bench_exported.py (the exported model, in training mode, Adam and clipping as Tapestry's)
at PyTorch's three thread settings (--threads 1; --threads 1 --blas-threads 2; --threads 2), each
once per OpenBLAS kernel set (on an AVX-512 CPU both Haswell and SkylakeX, as tools/bench.sh)
and once per glibc malloc setting (as tools/bench.sh).
Each side is compared at the setting with the best median over the rounds.

  --model DIR       run directory or .safetensors file (required)
  --src-text FILE   source side of the training text (required)
  --tgt-text FILE   target side, line-aligned (required)
  --rounds N        rounds [3]
  --batch N         sentences per batch [128]
  --iters N         timed steps per run (after 2 untimed) [8]
  --blas-cores L    OPENBLAS_CORETYPE values tried; "default" leaves the environment's
                    [AVX-512 CPUs: "Haswell SkylakeX"; others: "default"]
  --malloc L        glibc malloc settings tried ["default keep"]; keep has freed memory kept
                    for reuse (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_=1 TiB), see
                    tools/bench.sh --help
  --no-build        use the existing build (TAPESTRY_BUILD_DIR, default build/)
  --out DIR         keep the export, the batches and every run's output there [BUILD/recipe-DATE]
Environment: PYTHON (default /usr/bin/python3, the interpreter with Debian's torch).
EOF
}

die() {
  echo "bench_recipe.sh: $*" >&2
  exit 1
}

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${TAPESTRY_BUILD_DIR:-build}
[[ $build_dir = /* ]] || build_dir="$root/$build_dir"
python=${PYTHON:-/usr/bin/python3}
model="" src="" tgt="" rounds=3 batch=128 iters=8 build=1 out="" blas_cores=""
mallocs="default keep"
while (($#)); do
  case $1 in
    --model | --src-text | --tgt-text | --rounds | --batch | --iters | --blas-cores | --malloc | --out)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --model) model=$2 ;;
        --src-text) src=$2 ;;
        --tgt-text) tgt=$2 ;;
        --rounds) rounds=$2 ;;
        --batch) batch=$2 ;;
        --iters) iters=$2 ;;
        --blas-cores) blas_cores=$2 ;;
        --malloc) mallocs=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2
      ;;
    --no-build) build=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n $model && -n $src && -n $tgt ]] || die "--model, --src-text and --tgt-text are required"
[[ $mallocs =~ ^(default|keep)( (default|keep))?$ && $mallocs != "keep keep" &&
  $mallocs != "default default" ]] ||
  die "--malloc needs default, keep or both, once each, got '$mallocs'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive whole number, got '$rounds'"
[[ -e $model ]] || die "--model: '$model' does not exist"
for f in "$src" "$tgt"; do [[ -r $f ]] || die "cannot read '$f'"; done
"$python" -c 'import torch' 2>/dev/null || die "$python has no torch (apt-get install python3-torch)"
if [[ -z $blas_cores ]]; then
  if grep -qw avx512f /proc/cpuinfo; then blas_cores="Haswell SkylakeX"; else blas_cores=default; fi
fi

((build)) && "$root/tools/build.sh" >/dev/null
tapestry="$build_dir/tapestry"
[[ -x $tapestry ]] || die "no $tapestry (build first, or drop --no-build)"
out=${out:-$build_dir/recipe-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(uptime | sed 's/.*load/load/')"
[[ -d $out/export ]] || "$tapestry" export --model "$model" --to pytorch --out "$out/export" >/dev/null
common=(--model "$model" --src-text "$src" --tgt-text "$tgt" --batch "$batch" --warmup 2
  --iters "$iters")
"$tapestry" bench "${common[@]}" --iters 1 --warmup 0 --dump-batches "$out/batches.json" \
  >"$out/dump.log"

run_one() {  # impl label round command...
  local impl=$1 label=$2 round=$3
  shift 3
  local log="$out/$impl-$label-$round.log"
  "$@" >"$log" 2>&1 || die "$impl $label failed: see $log"
  local result
  result=$(grep '^RESULT ' "$log" | tail -1 | cut -c8-)
  [[ -n $result ]] || die "$impl $label printed no RESULT: see $log"
  python3 -c 'import json, sys
r = json.loads(sys.argv[1]); r.update(impl=sys.argv[2], label=sys.argv[3])
print(json.dumps(r))' "$result" "$impl" "$label" >>"$results"
  printf '%-15s %-18s round %s: %8.1f ms/step\n' "$impl" "$label" "$round" \
    "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["train_ms_median"])' "$result")"
}

for ((r = 1; r <= rounds; ++r)); do
  for core in $blas_cores; do
    for mal in $mallocs; do
      cenv=()
      [[ $mal = default ]] || cenv=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776)
      [[ $core = default ]] || cenv+=("OPENBLAS_CORETYPE=$core")
      suffix=""
      [[ $core = default ]] || suffix="-$core"
      [[ $mal = default ]] || suffix+="-$mal"
      for t in 1 2; do
        run_one tapestry "t$t$suffix" "$r" env "${cenv[@]}" OPENBLAS_NUM_THREADS=1 "$tapestry" \
          bench "${common[@]}" --threads "$t"
      done
      exported=("$python" "$root/tools/bench_exported.py" "$out/export" "$out/batches.json"
        --warmup 2 --iters "$iters")
      run_one pytorch "t1$suffix" "$r" env "${cenv[@]}" "${exported[@]}" --threads 1
      run_one pytorch "t1b2$suffix" "$r" env "${cenv[@]}" "${exported[@]}" --threads 1 --blas-threads 2
      run_one pytorch "t2$suffix" "$r" env "${cenv[@]}" "${exported[@]}" --threads 2
    done
  done
done
echo "# done: $(uptime | sed 's/.*load/load/')"

python3 - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def best(impl):
    groups = {}
    for r in rows:
        if r["impl"] == impl:
            groups.setdefault(r["label"], []).append(r["train_ms_median"])
    label = min(groups, key=lambda g: statistics.median(groups[g]))
    return label, statistics.median(groups[label])
t_label, t_ms = best("tapestry")
p_label, p_ms = best("pytorch")
print()
print(f"training step, medians over rounds: Tapestry {t_ms:.1f} ms ({t_label}), "
      f"exported PyTorch model {p_ms:.1f} ms ({p_label}): {p_ms / t_ms:.2f}x")
EOF
