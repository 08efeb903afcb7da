#!/usr/bin/env bash
# Set up, build, and run every test (CTest over the Catch2 suite).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
cd "${TAPESTRY_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
