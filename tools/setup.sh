#!/usr/bin/env bash
# Installs the Debian packages Tapestry builds with, if any are missing (apt-get, as root).
#   tools/setup.sh               what the build needs
#   tools/setup.sh --test-tools  also what some tests use when present: Graphviz (DOT renders),
#                                Chromium (the HTML pages run), python3-torch (PyTorch parity);
#                                those tests skip, saying why, where a tool is missing, so this
#                                part is best effort: a failed install is reported, not fatal
set -euo pipefail

packages=(cmake make g++ pkg-config libopenblas-dev libfmt-dev catch2 nlohmann-json3-dev)
test_tools=(graphviz chromium python3-torch)

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

[[ "${1:-}" == "--test-tools" ]] || exit 0
mapfile -t missing < <(missing_of "${test_tools[@]}")
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all test tools present (${test_tools[*]})"
elif [[ $(id -u) -ne 0 ]]; then
  echo "setup: test tools missing (${missing[*]}): their tests will skip; as root, apt-get install them"
else
  for p in "${missing[@]}"; do  # one at a time: one that is not available leaves the others in
    if apt_install "$p" >/dev/null; then
      echo "setup: installed test tool $p"
    else
      echo "setup: could not install test tool $p: its tests will skip"
    fi
  done
fi
