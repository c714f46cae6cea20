#!/usr/bin/env bash
# The test command: installs dependencies, builds outside the clone, runs the whole ctest suite.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup-deps.sh"
build="$(bash "$here/scripts/build.sh" | tail -n 1)"
cd "$build"
OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" ctest --output-on-failure "$@"
