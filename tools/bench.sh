#!/usr/bin/env bash
# Runs `tapestry bench` and the PyTorch references (../shared/bench/torch_seq2seq.py for the RNN,
# torch_transformer.py for the Transformer) alternately on this machine and prints, per
# architecture and preset, both speeds and their ratios (medians over rounds).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/bench.sh [--rounds N] [--presets "tiny small medium"] [--archs "rnn transformer"]
                      [--bidir] [--tapestry-threads "1 2"] [--blas-cores "Haswell SkylakeX"]
                      [--malloc "default keep"] [--no-build] [--no-peak] [--out DIR]

Builds Tapestry (tools/build.sh), measures the machine's peak once (the FMA probe and OpenBLAS
sgemm of ../shared/bench/sgemm_peak.c, compiled into the build directory), then for every
architecture and preset runs N rounds; a round runs `tapestry bench --arch A` at each
--tapestry-threads setting and the PyTorch reference (torch_seq2seq.py for rnn,
torch_transformer.py for transformer) at each of its thread settings (--threads 1; --threads 1
--blas-threads 2; --threads 2: Debian's torch uses OpenBLAS, whose pool competes with torch's
own, see the reference README), and each of those once per OpenBLAS kernel set: on a CPU with
AVX-512, both OpenBLAS's AVX2 kernels (OPENBLAS_CORETYPE=Haswell) and its AVX-512 ones
(SkylakeX), since OpenBLAS 0.3.21 does not know every AVX-512 CPU and may pick the slower set by
itself; and each once per glibc malloc setting (--malloc). LibTorch (the same RNN model in
C++, ../shared/bench/libtorch/, built here when Debian's libtorch-dev is installed) runs at the
same settings as PyTorch, so the RNN is compared against both references. Each side is
compared at its best setting: the one with the best median over the rounds, chosen separately
for training and for decoding; the speedup is over the faster of PyTorch and LibTorch. Every
run is wrapped in /usr/bin/time -v, so the peak RSS of both programs is measured the same way.

  --rounds N             rounds per preset [3]
  --presets LIST         presets to run, in order ["tiny small medium"]
  --archs LIST           architectures to run, in order ["rnn transformer"]
  --bidir                bidirectional encoder on both sides (rnn only)
  --tapestry-threads L   core counts tried for Tapestry ["1 2"]
  --blas-cores LIST      OPENBLAS_CORETYPE values tried for both sides; "default" leaves the
                         environment's [AVX-512 CPUs: "Haswell SkylakeX"; others: "default"]
  --malloc LIST          glibc malloc settings tried for every side ["default keep"]: default
                         leaves glibc's; keep (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_=1 TiB)
                         keeps freed memory for reuse instead of returning it to the system, so
                         that PyTorch's large tensors, allocated afresh at every op, are not
                         faulted in again at every step (where page faults are dear, as on a
                         virtual machine, they took 42% of a large torch.mm); Tapestry allocates
                         nothing in a steady step of the presets and is unaffected there
  --no-build             use the existing build (TAPESTRY_BUILD_DIR, default build/)
  --no-peak              skip the FMA probe and sgemm peak (no % of peak column)
  --out DIR              keep every run's output there [BUILD/bench-DATE]

Speed ratios are Tapestry / the best reference: above 1, Tapestry is faster; the memory ratio is
Tapestry's peak RSS / that reference's: below 1, Tapestry needs less. The machine may be shared; the
load average is printed before and after, and medians over rounds damp the noise.
Environment: TAPESTRY_REFERENCE_DIR (default ../shared/bench from the repository root),
PYTHON (default /usr/bin/python3, the interpreter with Debian's torch).
EOF
}

die() {
  echo "bench.sh: $*" >&2
  exit 1
}

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${TAPESTRY_BUILD_DIR:-build}
[[ $build_dir = /* ]] || build_dir="$root/$build_dir"
ref_dir=${TAPESTRY_REFERENCE_DIR:-$root/../shared/bench}
python=${PYTHON:-/usr/bin/python3}
rounds=3
presets="tiny small medium"
archs="rnn transformer"
bidir=()
tapestry_threads="1 2"
blas_cores=""
mallocs="default keep"
do_build=1
do_peak=1
out=""

while (($#)); do
  case $1 in
    --rounds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a positive whole number"
      rounds=$2; shift 2 ;;
    --presets) [[ -n ${2:-} ]] || die "--presets needs a list, e.g. \"tiny small\""
      presets=$2; shift 2 ;;
    --archs) [[ -n ${2:-} ]] || die "--archs needs a list, e.g. \"rnn transformer\""
      archs=$2; shift 2 ;;
    --bidir) bidir=(--bidir); shift ;;
    --tapestry-threads) [[ ${2:-} =~ ^[0-9]+( [0-9]+)*$ ]] ||
        die "--tapestry-threads needs thread counts, e.g. \"1 2\""
      tapestry_threads=$2; shift 2 ;;
    --blas-cores) [[ ${2:-} =~ ^[A-Za-z0-9]+( [A-Za-z0-9]+)*$ ]] ||
        die "--blas-cores needs OPENBLAS_CORETYPE names, e.g. \"Haswell SkylakeX\" or default"
      blas_cores=$2; shift 2 ;;
    --malloc) [[ ${2:-} =~ ^(default|keep)( (default|keep))?$ ]] ||
        die "--malloc needs a list of default and keep, e.g. \"default keep\""
      mallocs=$2; shift 2
      [[ $mallocs != "keep keep" && $mallocs != "default default" ]] ||
        die "--malloc names a setting twice" ;;
    --no-build) do_build=0; shift ;;
    --no-peak) do_peak=0; shift ;;
    --out) [[ -n ${2:-} ]] || die "--out needs a directory"
      out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
done
for p in $presets; do
  case $p in tiny|small|medium) ;; *) die "unknown preset '$p' (valid: tiny, small, medium)" ;; esac
done
for a in $archs; do
  case $a in rnn|transformer) ;; *) die "unknown architecture '$a' (valid: rnn, transformer)" ;; esac
done

# OpenBLAS's kernel sets to try: on an AVX-512 CPU its AVX2 and its AVX-512 ones. Its SkylakeX
# kernels need AVX-512 F, BW, DQ and VL; forced onto a CPU without them they die of SIGILL.
has_avx512=1
for f in avx512f avx512bw avx512dq avx512vl; do
  grep -qw "$f" /proc/cpuinfo 2>/dev/null || has_avx512=0
done
if [[ -z $blas_cores ]]; then
  if ((has_avx512)); then blas_cores="Haswell SkylakeX"; else blas_cores=default; fi
fi
seen=" "
for core in $blas_cores; do
  case $core in
    default | Haswell | Zen | SkylakeX | Sandybridge | Nehalem | Prescott) ;;
    *) die "--blas-cores: '$core' is not an OpenBLAS core type this script knows (default, Haswell, Zen, SkylakeX, Sandybridge, Nehalem, Prescott)" ;;
  esac
  [[ $core != SkylakeX ]] || ((has_avx512)) ||
    die "--blas-cores SkylakeX needs AVX-512 (F, BW, DQ, VL), which this CPU lacks"
  [[ $seen != *" $core "* ]] || die "--blas-cores names '$core' twice"
  seen+="$core "
done

[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt-get install time): it measures peak RSS"
command -v python3 >/dev/null || die "python3 not found: it reads the RESULT lines"
if ((do_build)); then
  echo "# building ($build_dir)"
  TAPESTRY_BUILD_DIR=$build_dir "$root/tools/build.sh" >/dev/null ||
    die "build failed (run tools/build.sh to see why)"
fi
tapestry="$build_dir/tapestry"
[[ -x $tapestry ]] || die "$tapestry not found (build first, or drop --no-build)"

# The reference of each architecture.
reference_of() {
  case $1 in rnn) echo "$ref_dir/torch_seq2seq.py" ;; transformer) echo "$ref_dir/torch_transformer.py" ;; esac
}
have_torch=0
if ! [[ -x $python ]] || ! "$python" -c 'import torch' 2>/dev/null; then
  echo "PyTorch not installed (tools/setup.sh --bench-tools, as root): showing Tapestry only"
else
  have_torch=1
  for a in $archs; do
    [[ -f $(reference_of "$a") ]] && continue
    echo "PyTorch reference not found at $(reference_of "$a") (set TAPESTRY_REFERENCE_DIR): showing Tapestry only"
    have_torch=0
  done
fi

# LibTorch: the C++ port of torch_seq2seq.py (RNN only), built once into the build directory.
have_libtorch=0
libtorch_bin="$build_dir/libtorch-bench/torch_seq2seq"
if [[ " $archs " == *" rnn "* ]]; then
  if [[ ! -f $ref_dir/libtorch/CMakeLists.txt ]]; then
    echo "LibTorch reference not found at $ref_dir/libtorch: no LibTorch column"
  elif ! compgen -G "/usr/lib/*/cmake/Torch/TorchConfig.cmake" >/dev/null; then
    echo "LibTorch not installed (tools/setup.sh --bench-tools, as root): no LibTorch column"
  elif ! { [[ -x $libtorch_bin && $libtorch_bin -nt $ref_dir/libtorch/torch_seq2seq.cpp ]] ||
    { cmake -S "$ref_dir/libtorch" -B "$build_dir/libtorch-bench" -DCMAKE_BUILD_TYPE=Release &&
      cmake --build "$build_dir/libtorch-bench" -j "$(nproc)"; } >"$build_dir/libtorch-bench.log" 2>&1; }; then
    echo "building the LibTorch reference failed (see $build_dir/libtorch-bench.log): no LibTorch column"
  else
    have_libtorch=1
  fi
fi

out=${out:-$build_dir/bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"
echo "# machine: $(nproc) cores, $(uptime | sed 's/.*load/load/'); runs kept in $out"

# The machine's peak: the FMA probe's GFLOP/s per core (512-bit FMAs where the CPU has them),
# times the cores a run uses; OpenBLAS sgemm's best square shape per thread count beside it.
peaks="$out/peaks.json"
echo "{}" >"$peaks"
if ((do_peak)); then
  if ! command -v gcc >/dev/null || ! pkg-config --exists openblas 2>/dev/null; then
    echo "# peak skipped: needs gcc and pkg-config's openblas (apt-get install libopenblas-dev)"
  elif [[ ! -f $ref_dir/sgemm_peak.c ]]; then
    echo "# peak skipped: $ref_dir/sgemm_peak.c not found"
  else
    # shellcheck disable=SC2046  # pkg-config's flags are meant to split
    gcc -O2 -march=native -o "$build_dir/sgemm_peak" "$ref_dir/sgemm_peak.c" \
      $(pkg-config --cflags --libs openblas) -lm || die "compiling sgemm_peak.c failed"
    for t in $(echo 1 2 "$tapestry_threads" | tr ' ' '\n' | sort -nu); do
      ((t > 0)) || continue
      echo "# FMA probe and sgemm peak, OPENBLAS_NUM_THREADS=$t ..."
      OPENBLAS_NUM_THREADS=$t "$build_dir/sgemm_peak" >"$out/sgemm_peak_t$t.txt" ||
        die "sgemm_peak failed (see $out/sgemm_peak_t$t.txt)"
    done
    python3 - "$out" >"$peaks" <<'EOF'
import glob, json, re, sys
peaks = {"fma_per_core": 0.0, "fma_width": "", "sgemm": {}}
for path in glob.glob(sys.argv[1] + "/sgemm_peak_t*.txt"):
    t = re.search(r"_t(\d+)\.txt$", path).group(1)
    text = open(path).read()
    best = [float(l.split()[6]) for l in text.splitlines() if l.startswith("square")]
    if best:
        peaks["sgemm"][t] = max(best)
    m = re.search(r"ymm FMA: ([0-9.]+) GFLOP/s.*zmm FMA: ([0-9.]+) GFLOP/s", text)
    if m:
        y, z = float(m.group(1)), float(m.group(2))
        per_core, width = (z, "512-bit") if z > y else (y, "256-bit")
        if per_core > peaks["fma_per_core"]:
            peaks["fma_per_core"], peaks["fma_width"] = per_core, width
print(json.dumps(peaks))
EOF
  fi
fi

echo "# OpenBLAS kernel sets tried on both sides: $blas_cores (environment: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
# The label suffix of one kernel set (none when only the environment's is tried).
core_label() { [[ $blas_cores = default ]] || echo "-$1"; }
echo "# glibc malloc settings tried on every side: $mallocs"
# The label suffix and the environment of one malloc setting (keep: freed memory stays in the
# heap, none of it returned to the system or mapped afresh).
malloc_label() { [[ $1 = default ]] || echo "-$1"; }
malloc_env() { [[ $1 = default ]] || echo MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776; }

# Runs one benchmark under /usr/bin/time -v and appends its RESULT, labelled, to results.jsonl.
run_one() {  # impl label arch preset round command...
  local impl=$1 label=$2 arch=$3 preset=$4 round=$5
  shift 5
  local log="$out/$arch-$preset-$impl-$label-r$round"
  if ! /usr/bin/time -v -o "$log.time" "$@" >"$log.out" 2>"$log.err"; then
    die "$impl ($label) failed on $preset: $* (output in $log.out, $log.err)"
  fi
  local result rss
  result=$(grep '^RESULT ' "$log.out" | tail -n 1 | cut -c8-)
  [[ -n $result ]] || die "$impl ($label) printed no RESULT line on $preset (see $log.out)"
  rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$log.time")
  python3 -c 'import json, sys
r = json.loads(sys.argv[1])
r.update(impl=sys.argv[2], label=sys.argv[3], arch=sys.argv[4], preset=sys.argv[5],
         round=int(sys.argv[6]), time_rss_mb=int(sys.argv[7]) / 1024)
print(json.dumps(r))' "$result" "$impl" "$label" "$arch" "$preset" "$round" "${rss:-0}" >>"$results"
  printf '  %-8s %-18s %-11s %-6s round %d: train %9.2f ms, decode %9.2f ms\n' "$impl" "$label" \
    "$arch" "$preset" "$round" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["train_ms_median"])' "$result")" \
    "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("decode_ms_median", 0))' "$result")"
}

for arch in $archs; do
  reference=$(reference_of "$arch")
  flags=()  # --bidir is the RNN's
  [[ $arch = rnn ]] && flags=("${bidir[@]}")
  for preset in $presets; do
    echo "# $arch $preset: $rounds rounds"
    for ((r = 1; r <= rounds; ++r)); do
      for core in $blas_cores; do
        for mal in $mallocs; do
          # The kernel set's and the malloc setting's environment.
          read -r -a cenv <<<"$(malloc_env "$mal")"
          [[ $core = default ]] || cenv+=("OPENBLAS_CORETYPE=$core")
          suffix=$(core_label "$core")$(malloc_label "$mal")
          for t in $tapestry_threads; do
            # Tapestry spreads a batch over t cores itself, OpenBLAS single-threaded inside each
            # (set in the environment too: OpenBLAS starts its own pool when it loads).
            run_one tapestry "t$t$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" OPENBLAS_NUM_THREADS=1 \
              "$tapestry" bench --arch "$arch" --config "$preset" --threads "$t" "${flags[@]}"
          done
          if ((have_torch)); then
            run_one pytorch "t1$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" "$python" "$reference" \
              --config "$preset" --threads 1 "${flags[@]}"
            run_one pytorch "t1b2$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" "$python" "$reference" \
              --config "$preset" --threads 1 --blas-threads 2 "${flags[@]}"
            run_one pytorch "t2$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" "$python" "$reference" \
              --config "$preset" --threads 2 "${flags[@]}"
          fi
          if ((have_libtorch)) && [[ $arch = rnn ]]; then
            run_one libtorch "t1$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" "$libtorch_bin" \
              --config "$preset" --threads 1 "${flags[@]}"
            run_one libtorch "t1b2$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" "$libtorch_bin" \
              --config "$preset" --threads 1 --blas-threads 2 "${flags[@]}"
            run_one libtorch "t2$suffix" "$arch" "$preset" "$r" env "${cenv[@]}" "$libtorch_bin" \
              --config "$preset" --threads 2 "${flags[@]}"
          fi
        done
      done
    done
  done
done
echo "# done: $(uptime | sed 's/.*load/load/')"
echo
((have_torch)) || echo "(PyTorch not run: see the first lines)"

python3 - "$results" "$peaks" "$presets" "$archs" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peaks = json.load(open(sys.argv[2]))
presets = sys.argv[3].split()
archs = sys.argv[4].split()

def med(runs, key):
    return statistics.median(r[key] for r in runs)

def best(impl, arch, preset, key):
    """(label, median, runs) of the setting with the best median of `key` (higher is better)."""
    groups = {}
    for r in rows:
        if r["impl"] == impl and r["arch"] == arch and r["preset"] == preset:
            groups.setdefault(r["label"], []).append(r)
    if not groups:
        return None
    label = max(groups, key=lambda g: med(groups[g], key))
    return label, med(groups[label], key), groups[label]

def pct(runs):
    # The FMA peak of Tapestry's cores, or of the OpenBLAS threads PyTorch's products ran on.
    r = runs[0]
    cores = r["threads"] if r["impl"] == "tapestry" else r["blas_threads"]
    p = peaks.get("fma_per_core", 0) * cores
    return f"{100 * med(runs, 'train_gflops') / p:.0f}%" if p else "-"

if peaks.get("sgemm") and not peaks.get("fma_per_core"):
    print("note: the peak probe printed no FMA line (an sgemm_peak.c without it?): no %peak")

def num(x, fmt="{:,.0f}"):
    return "-" if x is None else fmt.format(x)

def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}x"

def ms(b, key):
    return None if b is None else med(b[2], key)

# Speeds as ms per batch; the speedups are the ratios of the best settings' tokens (training) or
# sentences (decoding) per second, the same as the inverse ratio of their ms, against the faster of
# the two references (PyTorch from Python, LibTorch from C++). Memory: the peak RSS of the best
# training settings' runs, Tapestry's over that reference's.
head = ["arch", "preset", "train ms T", "train ms P", "train ms L", "speedup", "decode ms T",
        "decode ms P", "decode ms L", "speedup", "GFLOP/s T (%peak)", "GFLOP/s ref (%peak)",
        "RSS MB T", "RSS MB ref", "RSS T/ref"]
table, notes = [], []
for arch, preset in ((a, p) for a in archs for p in presets):
    tt = best("tapestry", arch, preset, "train_tok_s")
    pt = best("pytorch", arch, preset, "train_tok_s")
    lt = best("libtorch", arch, preset, "train_tok_s")
    td = best("tapestry", arch, preset, "decode_sent_s")
    pd = best("pytorch", arch, preset, "decode_sent_s")
    ld = best("libtorch", arch, preset, "decode_sent_s")
    if tt is None:
        continue
    # The faster reference, with its name: (name, (label, median, runs)) or None.
    def faster(*named):
        named = [(n, b) for n, b in named if b is not None]
        return max(named, key=lambda nb: nb[1][1]) if named else None
    rt, rd = faster(("PyTorch", pt), ("LibTorch", lt)), faster(("PyTorch", pd), ("LibTorch", ld))
    gf = lambda b: "-" if b is None else f"{med(b[2], 'train_gflops'):.1f} ({pct(b[2])})"
    rss = lambda b: "-" if b is None else f"{med(b[2], 'time_rss_mb'):,.0f}"
    mem = (f"{med(tt[2], 'time_rss_mb') / med(rt[1][2], 'time_rss_mb'):.2f}" if rt else "-")
    table.append([arch, preset, num(ms(tt, "train_ms_median"), "{:,.2f}"),
                  num(ms(pt, "train_ms_median"), "{:,.2f}"),
                  num(ms(lt, "train_ms_median"), "{:,.2f}"), ratio(tt[1], rt and rt[1][1]),
                  num(ms(td, "decode_ms_median"), "{:,.2f}"),
                  num(ms(pd, "decode_ms_median"), "{:,.2f}"),
                  num(ms(ld, "decode_ms_median"), "{:,.2f}"), ratio(td and td[1], rd and rd[1][1]),
                  gf(tt), gf(rt and rt[1]), rss(tt), rss(rt and rt[1]), mem])
    won = lambda name, b: f"{name} {b[0]}" if b else f"{name} -"
    if rt:
        notes.append(f"{arch} {preset}: the faster reference: training {rt[0]} ({rt[1][0]}), "
                     f"decoding {rd[0]} ({rd[1][0]}); best settings: "
                     + ", ".join(f"{n} train {b[0]} decode {d[0]}" for n, b, d in
                                 (("PyTorch", pt, pd), ("LibTorch", lt, ld)) if b))
    n = len(tt[2])
    line = (f"{arch} {preset}: best settings: Tapestry train {tt[0]}, decode {td[0]}"
            + (f"; PyTorch train {pt[0]}, decode {pd[0]}" if pt else "")
            + f" (medians of {n} rounds); train ms/step T {med(tt[2], 'train_ms_median'):.2f}"
            + (f", P {med(pt[2], 'train_ms_median'):.2f}" if pt else ""))
    notes.append(line)
    notes.append(f"  Tapestry's models::greedy_decode, which stops at <eos>: "
                 f"{med(td[2], 'greedy_decode_sent_s'):,.0f} sent/s after "
                 f"{med(td[2], 'greedy_decode_steps_mean'):.1f} of {td[2][0]['tgt_len']} steps "
                 f"(the decode columns run all {td[2][0]['tgt_len']} steps, as the reference)")
    if "train_heap_allocs_per_step" in tt[2][0]:
        notes.append(f"  Tapestry's heap allocations per steady training step: "
                     f"{med(tt[2], 'train_heap_allocs_per_step'):,.1f} operator new, "
                     f"{med(tt[2], 'train_new_blocks_per_step'):,.1f} new tensor blocks")
    notes.append(f"  Tapestry's own getrusage peak: {med(tt[2], 'peak_rss_mb'):,.0f} MB; "
                 f"loss first -> last T {med(tt[2], 'loss_first'):.3f} -> "
                 f"{med(tt[2], 'loss_last'):.3f}"
                 + (f", P {med(pt[2], 'loss_first'):.3f} -> {med(pt[2], 'loss_last'):.3f}"
                    if pt else ""))
    for impl in ("tapestry", "pytorch", "libtorch"):
        for label in sorted({r["label"] for r in rows if r["impl"] == impl
                             and r["arch"] == arch and r["preset"] == preset}):
            runs = [r for r in rows if r["impl"] == impl and r["arch"] == arch
                    and r["preset"] == preset and r["label"] == label]
            notes.append(f"  {impl:8} {label:18} train tok/s per round: "
                         + ", ".join(f"{r['train_tok_s']:,.0f}" for r in runs)
                         + "; decode sent/s: "
                         + ", ".join(f"{r.get('decode_sent_s', 0):,.0f}" for r in runs))
    params = {r["impl"]: r["params"] for r in rows if r["arch"] == arch and r["preset"] == preset}
    if len(set(params.values())) > 1:
        notes.append(f"  WARNING: the parameter counts differ: {params}")
    else:
        notes.append(f"  parameters: {params['tapestry']:,}"
                     + (" on every side" if len(params) > 1 else " (Tapestry)"))

widths = [max(len(str(x)) for x in col) for col in zip(head, *table)]
fmt_row = lambda r: "  ".join(str(x).rjust(w) if i else str(x).ljust(w)
                              for i, (x, w) in enumerate(zip(r, widths)))
print(fmt_row(head))
print("  ".join("-" * w for w in widths))
for r in table:
    print(fmt_row(r))
print()
print("T = Tapestry, P = PyTorch (Python), L = LibTorch (C++, RNN only), each at its best setting")
print("(threads, OpenBLAS kernels, malloc); ref = the faster of P and L; speedup = ref ms / T ms")
print("(above 1: Tapestry faster); RSS: /usr/bin/time -v of the best training settings, T/ref below")
print("1: Tapestry smaller")
if peaks.get("fma_per_core"):
    print(f"%peak: of the FMA probe's {peaks['fma_per_core']:.1f} GFLOP/s per core "
          f"({peaks['fma_width']} FMAs) times the cores used")
if peaks.get("sgemm"):
    print("sgemm (OpenBLAS's own choice of kernels, best square shape, GFLOP/s): "
          + ", ".join(f"{t} thread(s) {p:.1f}" for t, p in sorted(peaks["sgemm"].items())))
for n in notes:
    print(n)
EOF
