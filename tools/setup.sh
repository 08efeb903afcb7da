#!/usr/bin/env bash
# Installs the Debian packages Tapestry builds with, if any are missing (apt-get, as root).
set -euo pipefail

packages=(cmake make g++ pkg-config libopenblas-dev libfmt-dev catch2 nlohmann-json3-dev)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all packages present (${packages[*]})"
  exit 0
fi

echo "setup: missing packages: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "setup: run this as root, or install them yourself:"
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: installed ${missing[*]}"
