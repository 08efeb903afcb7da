#!/usr/bin/env bash
# Set up, build, and run the main job: for now, the float64 gradient check of every op.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
echo
build/tapestry gradcheck
