#!/usr/bin/env bash
# Installs the Debian packages Tapestry builds with, if any are missing (apt-get, as root).
#   tools/setup.sh               what the build needs
#   tools/setup.sh --test-tools  also what some tests use when present: Graphviz (DOT renders),
#                                Chromium (the HTML pages run), python3-torch (PyTorch parity),
#                                python3-sentencepiece (exported subword models),
#                                libsimde-dev (the AVX-512 kernels emulated on other CPUs);
#                                those tests skip, saying why, where a tool is missing, so this
#                                part is best effort: a failed install is reported, not fatal
#   tools/setup.sh --fuzz-tools  also clang and its runtime libraries with libFuzzer
#                                (libclang-rt-dev), for tools/fuzz.sh; best effort as above
#   tools/setup.sh --bench-tools also the references tools/bench.sh measures against:
#                                python3-torch (PyTorch) and libtorch-dev (LibTorch, C++);
#                                best effort as above (the options may be combined)
set -euo pipefail

packages=(cmake make g++ pkg-config libopenblas-dev libfmt-dev catch2 nlohmann-json3-dev
  libsentencepiece-dev)
test_tools=(graphviz chromium python3-torch python3-sentencepiece libsimde-dev)
fuzz_tools=(clang libclang-rt-dev)
bench_tools=(python3-torch libtorch-dev)

want_test_tools=0
want_fuzz_tools=0
want_bench_tools=0
for arg in "$@"; do
  case $arg in
    --test-tools) want_test_tools=1 ;;
    --fuzz-tools) want_fuzz_tools=1 ;;
    --bench-tools) want_bench_tools=1 ;;
    *)
      echo "setup: unknown option '$arg' (valid: --test-tools, --fuzz-tools, --bench-tools)" >&2
      exit 2
      ;;
  esac
done

missing_of() {
  local p status
  for p in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || printf '%s\n' "$p"
  done
}

updated=0
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [[ $updated -eq 0 ]]; then
    apt-get update -qq || return 1
    updated=1
  fi
  apt-get install -y -qq --no-install-recommends "$@"
}

mapfile -t missing < <(missing_of "${packages[@]}")
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all packages present (${packages[*]})"
else
  echo "setup: missing packages: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: run this as root, or install them yourself:"
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  apt_install "${missing[@]}"
  echo "setup: installed ${missing[*]}"
fi

# Optional tools, best effort: those that cannot be installed are reported, the rest go in.
#   install_optional WHAT CONSEQUENCE PACKAGE...
install_optional() {
  local what=$1 consequence=$2 p
  shift 2
  mapfile -t missing < <(missing_of "$@")
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "setup: all $what present ($*)"
  elif [[ $(id -u) -ne 0 ]]; then
    echo "setup: $what missing (${missing[*]}): $consequence; as root, apt-get install them"
  else
    for p in "${missing[@]}"; do  # one at a time: one that is not available leaves the others in
      if apt_install "$p" >/dev/null; then
        echo "setup: installed $what $p"
      else
        echo "setup: could not install $what $p: $consequence"
      fi
    done
  fi
}

if [[ $want_test_tools -eq 1 ]]; then
  install_optional "test tools" "their tests will skip" "${test_tools[@]}"
fi
if [[ $want_fuzz_tools -eq 1 ]]; then
  install_optional "fuzz tools" "tools/fuzz.sh cannot build" "${fuzz_tools[@]}"
fi
if [[ $want_bench_tools -eq 1 ]]; then
  install_optional "benchmark references" "tools/bench.sh leaves their columns out" "${bench_tools[@]}"
fi
