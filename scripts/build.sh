#!/usr/bin/env bash
# Configures and builds the project in a directory outside the clone (reused across runs).
# Prints the build directory on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
key="$(printf '%s' "$here" | md5sum | cut -c1-12)"
build="${SEZM_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sezm/build-$key}"
mkdir -p "$build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release ${SEZM_CMAKE_ARGS:-} >&2
cmake --build "$build" -j "$(nproc)" >&2
echo "$build"
