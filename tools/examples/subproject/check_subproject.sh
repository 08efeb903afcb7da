#!/usr/bin/env bash
# CTest: Tapestry as a subproject. Through add_subdirectory, the parent's build holds Tapestry's
# libraries and its own target, and neither Tapestry's program, tests nor examples; the parent's
# program (example 1) builds and runs. Through FetchContent the targets are the same, and each
# option turns its part back on.   usage: check_subproject.sh WORK_DIR [CMAKE_ARGS...]
set -euo pipefail
work=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"

targets() {  # the targets of a configured build tree, one per line
  cmake --build "$1" --target help | sed -n 's/^\.\.\. \([A-Za-z0-9_]*\).*/\1/p' | sort -u
}
expect() {  # expect BUILD has|lacks TARGET...
  local dir=$1 want=$2
  shift 2
  local list
  list=$(targets "$dir")
  for t in "$@"; do
    if grep -qx "$t" <<<"$list"; then [[ $want == has ]] && continue; else [[ $want == lacks ]] && continue; fi
    echo "$dir: expected it to $want target '$t'; its targets: $(tr '\n' ' ' <<<"$list")"
    exit 1
  done
}

# The Makefile generator: targets() reads its 'help' listing.
set -- -G "Unix Makefiles" "$@"

echo "== add_subdirectory"
cmake -S "$here" -B "$work/sub" "$@" >"$work/sub.log"
expect "$work/sub" has xor tapestry_core tapestry_ops tapestry_nn tapestry_models
expect "$work/sub" lacks tapestry tapestry_tools tapestry_tests example_1_xor
cmake --build "$work/sub" --target xor -j "$(nproc)" >>"$work/sub.log" || { tail -n 30 "$work/sub.log"; exit 1; }
"$work/sub/xor" | tail -n 1

echo "== FetchContent"
cmake -S "$here" -B "$work/fetch" -DUSE_FETCHCONTENT=ON "$@" >"$work/fetch.log"
expect "$work/fetch" has xor tapestry_core tapestry_models
expect "$work/fetch" lacks tapestry tapestry_tools tapestry_tests example_1_xor

echo "== the options turn the program, the tests and the examples back on"
cmake -S "$here" -B "$work/on" -DTAPESTRY_BUILD_PROGRAM=ON -DTAPESTRY_BUILD_TESTS=ON \
  -DTAPESTRY_BUILD_EXAMPLES=ON "$@" >"$work/on.log"
expect "$work/on" has tapestry tapestry_tools tapestry_tests example_1_xor
echo "subproject check passed"
