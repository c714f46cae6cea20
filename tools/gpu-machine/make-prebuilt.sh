#!/usr/bin/env bash
# Builds, on the build machine, the programs gpu-check.sh runs on the GPU machine (sezm_tests,
# sezm-bench, sezm-stack-probe; CUDA sm_90a only, no -march=native) and packs them,
# stripped, into .devdeps/prebuilt.tar.xz (~8 MB: xz -9, whose 64 MiB window finds the engine
# code the programs share) with the tree they were built from. Carried
# with a device call, gpu-check.sh runs them instead of building there (~3 minutes of a call on
# the H200 machine) when the GPU is a Hopper and they start. Same build directory as
# make-lammps-bundle.sh (its objects are shared; only SEZM_BUILD_TESTS differs).
#   bash tools/gpu-machine/make-prebuilt.sh [--baseline]
# --baseline: only sezm-bench, stripped and xz'd into .devdeps/o-bench.xz (~2 MB), with its revision
# in .devdeps/o-bench.source: the OLD side of an A/B (ab.sh's SEZM_AB_OLD). Build it from the
# baseline's tree first, then the tree under test without the flag.
# SEZM_BUNDLE_BUILD_DIR: the build directory; SEZM_JOBS: parallel jobs (default: all cores).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${SEZM_BUNDLE_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sezm/bundle-build}"
jobs="${SEZM_JOBS:-$(nproc)}"
mkdir -p "$build" "$here/.devdeps"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSEZM_NATIVE=OFF -DSEZM_CUDA_ARCHITECTURES=90a-real \
  -DSEZM_BUILD_TESTS=ON > "$build/configure-prebuilt.log" 2>&1 || { tail -30 "$build/configure-prebuilt.log"; exit 1; }
grep -q "CUDA engine *: ON" "$build/configure-prebuilt.log" || { echo "the CUDA engine is not configured (no nvcc?)" >&2; exit 1; }
baseline=0
[ "${1:-}" = --baseline ] && baseline=1
targets=(sezm_tests sezm-bench sezm-stack-probe)
[ "$baseline" = 1 ] && targets=(sezm-bench)
cmake --build "$build" -j "$jobs" --target "${targets[@]}" > "$build/build-prebuilt.log" 2>&1 \
  || { grep -E "error" "$build/build-prebuilt.log" | head -40 >&2; exit 1; }
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
if [ "$baseline" = 1 ]; then
  cp "$build/bench/sezm-bench" "$stage/sezm-bench"
  strip --strip-unneeded "$stage/sezm-bench"
  xz -9 -c "$stage/sezm-bench" > "$here/.devdeps/o-bench.xz"
  echo "$(git -C "$here" describe --always --dirty) built $(date -u +%FT%TZ), sm_90a, SEZM_NATIVE=OFF" \
    > "$here/.devdeps/o-bench.source"
  echo "$here/.devdeps/o-bench.xz: $(du -h "$here/.devdeps/o-bench.xz" | cut -f1), $(cat "$here/.devdeps/o-bench.source")"
  exit 0
fi
p="$stage/prebuilt"
mkdir -p "$p/tests" "$p/bench"
cp "$build/tests/sezm_tests" "$p/tests/"
cp "$build/bench/sezm-bench" "$p/bench/"
cp "$build/sezm-stack-probe" "$p/"
strip --strip-unneeded "$p/tests/sezm_tests" "$p/bench/sezm-bench" "$p/sezm-stack-probe"
echo "$(git -C "$here" describe --always --dirty) built $(date -u +%FT%TZ), sm_90a, SEZM_NATIVE=OFF" > "$p/SOURCE"
XZ_OPT=-9 tar cJf "$here/.devdeps/prebuilt.tar.xz" -C "$stage" prebuilt
echo "$here/.devdeps/prebuilt.tar.xz: $(du -h "$here/.devdeps/prebuilt.tar.xz" | cut -f1), $(cat "$p/SOURCE")"
