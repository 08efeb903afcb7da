#!/usr/bin/env bash
# Set up, build, and run every test (CTest over the Catch2 suite and the examples). The tools some
# tests use (Graphviz, Chromium, python3-torch) are installed too where possible; without them
# those tests skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --test-tools
tools/build.sh
cd "${TAPESTRY_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
