#!/usr/bin/env bash
# The GPU check, in one call on a machine with an NVIDIA GPU: build (CUDA for that GPU only),
# run the CUDA tests, sezm-stack-probe, the benchmark, and -- when the LAMMPS bundle of
# make-lammps-bundle.sh is in .devdeps -- the LAMMPS check (device cuda vs cpu on 1 and 2
# ranks, gpu-lammps.sh check). Results go to stdout and, when set, to $OUT (the LAMMPS logs to
# $OUT/lammps).
#   bash tools/gpu-machine/gpu-check.sh [quick|full|dev|tests]
#     quick: tests, 512 and 4096 atoms in both modes and precisions, LAMMPS; full (default): also 32768 to
#     438,976 atoms; dev: tests and a short benchmark, no LAMMPS; tests: the CUDA tests alone (both
#     tiles on Hopper), e.g. in the call after ab.sh's A/B. Every mode also checks that every call of
#     a 4,096-atom run gives the same bits in both precisions (SEZM_GPU_REPEAT_CALLS).
# Dependencies come from the system, or from .devdeps/ (make-devdeps.sh) when present.
# SEZM_GPU_SIMT_TESTS=0 skips the second test pass on Hopper (below). SEZM_GPU_AB="VAR=value ...": in
# dev mode, the 4,096-atom benches again with each of these settings (an opt-in path against the
# default on the same build); SEZM_GPU_KT_CELLS="4 8" and SEZM_GPU_NCU_KERNELS="name ...": in dev
# mode, every kernel of one call at those sizes and an Nsight Compute summary of the named kernels.
# .devdeps/prebuilt.tar.xz (make-prebuilt.sh): on Hopper its programs run instead of a build here
# (SEZM_GPU_PREBUILT=0 builds anyway). SEZM_GPU_PROBE_TIMEOUT (seconds, default 900) ends a probe whose kernel hangs (a barrier that
# never completes) so that the benches still run; SEZM_GPU_PROBE=0 neither builds nor runs the probe.
# SEZM_GPU_TEST_FILTER replaces the CUDA tests' gtest filter (default
# '*Cuda*:FeatureExchange*:*ModelDeviation*:*SharedGeometry*'), e.g. to leave out a family whose
# checkpoint did not travel. On Hopper the tests run twice: on the warpgroup tile (the default
# there) and on the SIMT / mma.sync tile (SEZM_CUDA_WGMMA=0) that other GPUs run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
what="${1:-full}"
out="${OUT:-/tmp/sezm-gpu-out}"
mkdir -p "$out"
build="${SEZM_GPU_BUILD_DIR:-/tmp/sezm-gpu-build}"
args=(-DCMAKE_BUILD_TYPE=Release -DSEZM_NATIVE=ON)
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d . || true)"
# Hopper (9.0): sm_90a, the machine code with the stack's warpgroup tensor-core tile.
[ "$arch" = 90 ] && arch=90a
[ -n "$arch" ] && args+=("-DSEZM_CUDA_ARCHITECTURES=${arch}-real")
# A call that carried only the archive of make-devdeps.sh: unpack it.
if [ -f "$here/.devdeps/devdeps.tar.xz" ] && [ ! -d "$here/.devdeps/include" ]; then
  tar xJf "$here/.devdeps/devdeps.tar.xz" -C "$here/.devdeps"
fi
if [ -d "$here/.devdeps" ]; then
  deps="$here/.devdeps"
  args+=("-DCMAKE_INCLUDE_PATH=$deps/include" "-DCMAKE_LIBRARY_PATH=$deps/lib" "-DGTEST_ROOT=$deps")
  export LD_LIBRARY_PATH="$deps/lib:${LD_LIBRARY_PATH:-}"
  [ -d "$deps/shared" ] && export SEZM_SHARED_DIR="$deps/shared"
fi
export SEZM_TEST_DATA_DIR="$here/tests/data"
# On the GPU machine a skipped GPU test is a failure (tests/cuda_test_util.h, SEZM_REQUIRE_GPU).
export SEZM_GPU_TESTS_REQUIRED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
probe="${SEZM_GPU_PROBE:-1}"
[ "$what" = tests ] && probe=0  # nothing but the tests
# Programs built on the build machine (make-prebuilt.sh, sm_90a): used on a Hopper when they start
# here, unless SEZM_GPU_PREBUILT=0; else (or when they do not start) built here.
prebuilt=0
if [ "${SEZM_GPU_PREBUILT:-1}" != 0 ] && [ "$arch" = 90a ] && [ -f "$here/.devdeps/prebuilt.tar.xz" ]; then
  rm -rf "$build-prebuilt" && mkdir -p "$build-prebuilt"
  tar xJf "$here/.devdeps/prebuilt.tar.xz" -C "$build-prebuilt" --strip-components=1
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/lib"
  if "$build-prebuilt/tests/sezm_tests" --gtest_list_tests > "$out/prebuilt.log" 2>&1; then
    build="$build-prebuilt"
    prebuilt=1
    echo "== prebuilt programs: $(cat "$build/SOURCE")"
  else
    echo "== the prebuilt programs do not start here (prebuilt.log): building"
  fi
fi
if [ "$prebuilt" = 0 ]; then
  cmake -S "$here" -B "$build" "${args[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  grep -E "CUDA engine|LAMMPS" "$out/configure.log" || true
  targets=(sezm_tests sezm-bench)
  [ "$probe" != 0 ] && targets+=(sezm-stack-probe)
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" > "$out/build.log" 2>&1 \
    || { grep -E "error" "$out/build.log" | head -40; exit 1; }
fi
echo "== CUDA tests"
status=0
filter="${SEZM_GPU_TEST_FILTER:-*Cuda*:FeatureExchange*:*ModelDeviation*:*SharedGeometry*}"
# Checkpoints left home to keep a device call's carried tree under its 64 MiB (README, "GPU"):
# their families are left out of the filter, and said so.
skip=()
[ -f "$here/tests/data/defaults_float64.pt" ] || skip+=("*defaults*")
[ -f "$here/tests/data/recipes/c32_lora.pt" ] || skip+=("*lora*")
[ -f "$here/tests/data/mini_float64.pt" ] || skip+=("*mini_float64*" "*CudaModesPrecisions.Mini*")
# A CPU test that runs sezm-bench at the path it was built at, which prebuilt programs lack here
# (CI runs it).
[ "$prebuilt" = 0 ] || skip+=("ModelDeviation.BenchTimesACommittee")
if [ ${#skip[@]} -gt 0 ]; then
  echo "== left out of the tests (not in this tree, or needing the build tree): ${skip[*]}"
  neg="$(IFS=:; echo "${skip[*]}")"
  case "$filter" in *-*) filter="$filter:$neg" ;; *) filter="$filter-$neg" ;; esac
fi
"$build/tests/sezm_tests" --gtest_filter="$filter" 2>&1 | tee "$out/gpu-tests.log" || status=1
if [ "$arch" = 90a ] && [ "${SEZM_GPU_SIMT_TESTS:-1}" != 0 ]; then
  echo "== CUDA tests on the SIMT / mma.sync tile (SEZM_CUDA_WGMMA=0)"
  SEZM_CUDA_WGMMA=0 "$build/tests/sezm_tests" --gtest_filter="$filter" 2>&1 | tee "$out/gpu-tests-simt.log" || status=1
fi
# Repeatability: every call of a run must give the same bits (a race shows as a rate of calls that
# differ: the tf32 landings' missing proxy fence made 0.2 to 1 % of fast tf32 calls at this size do so,
# docs/performance.md, 2026-12-06 twenty-fourth session). sezm-bench --digest counts the distinct
# results; SEZM_GPU_REPEAT_CALLS (default 500; 0: skip) calls per precision, 4,096 atoms, fast mode,
# the chunk size that showed the race most (500 calls find a race of 0.5 % nine times in ten).
calls="${SEZM_GPU_REPEAT_CALLS:-500}"
if [ "$calls" != 0 ]; then
  for precision in tf32 default; do
    echo "== repeatability: $calls calls, fast, precision $precision, --chunk 57344"
    r="$("$build/bench/sezm-bench" "$here/potentials/C.pt" --device cuda --mode fast --precision $precision \
      --cells 8 --chunk 57344 --warmup 0 --repeat "$calls" --digest 2>&1 | tee -a "$out/repeat.log")" || status=1
    if echo "$r" | grep -q "^digest: every one of the $calls calls gave these bits"; then
      echo "   every call the same bits"
    else
      echo "$r" | grep -E "^digest|^  [0-9]+ x" | head -12
      echo "   FAILED: not every call gave the same bits"
      status=1
    fi
  done
fi
[ "$what" = tests ] && exit $status
echo "== benchmark"
bench() { "$build/bench/sezm-bench" "$here/potentials/C.pt" --device cuda "$@" 2>&1 | tee -a "$out/bench.log"; }
if [ "$probe" != 0 ]; then
  echo "== stack kernels on synthetic data (sezm-stack-probe)"
  timeout "${SEZM_GPU_PROBE_TIMEOUT:-900}" "$build/sezm-stack-probe" 2>&1 | tee "$out/probe.log" || status=1
fi
if [ "$what" = dev ]; then  # a kernel-tuning round: 4096 atoms in both modes, the phase timing, 512 and 64 atoms
  bench --mode lean --cells 8 --repeat 5 --warmup 1
  bench --mode fast --cells 8 --repeat 5 --warmup 1
  SEZM_CUDA_TIMING=1 bench --mode lean --cells 8 --repeat 1 --warmup 1
  bench --mode lean --cells 4 --repeat 5 --warmup 1
  bench --mode fast --cells 4 --repeat 5 --warmup 1
  bench --mode lean --cells 2 --repeat 5 --warmup 1
  for ab in ${SEZM_GPU_AB:-}; do
    echo "== with $ab" | tee -a "$out/bench.log"
    env "$ab" "$build/bench/sezm-bench" "$here/potentials/C.pt" --device cuda --mode lean --cells 8 --repeat 5 --warmup 1 2>&1 | tee -a "$out/bench.log"
    env "$ab" "$build/bench/sezm-bench" "$here/potentials/C.pt" --device cuda --mode fast --cells 8 --repeat 5 --warmup 1 2>&1 | tee -a "$out/bench.log"
    env "$ab" SEZM_CUDA_TIMING=1 "$build/bench/sezm-bench" "$here/potentials/C.pt" --device cuda --mode lean --cells 8 --repeat 1 --warmup 1 2>&1 | tee -a "$out/bench.log"
  done
  # What to tune next (lean; the reports stay in /tmp: the device tool returns few files):
  # every kernel of one call at each of SEZM_GPU_KT_CELLS (e.g. "4 8"), then Nsight Compute's
  # full set on one launch (the fourth) of each kernel whose name matches a word of
  # SEZM_GPU_NCU_KERNELS, summarised by sass-summary.py.
  for cells in ${SEZM_GPU_KT_CELLS:-}; do
    echo "== every kernel, lean, --cells $cells" | tee -a "$out/kernels.log"
    mkdir -p "/tmp/sezm-kt-$cells"
    OUT="/tmp/sezm-kt-$cells" bash "$here/tools/gpu-machine/kernel-times.sh" "$build/bench/sezm-bench" \
      "$here/potentials/C.pt" --device cuda --mode lean --cells "$cells" 2>&1 | head -45 | tee -a "$out/kernels.log"
  done
  for k in ${SEZM_GPU_NCU_KERNELS:-}; do
    echo "== ncu: $k (lean, --cells 4)" | tee -a "$out/kernels.log"
    r="/tmp/sezm-ncu-$k"
    timeout 180 ncu --set full --import-source yes -k "regex:$k" -s 3 -c 1 -f -o "$r" "$build/bench/sezm-bench" \
      "$here/potentials/C.pt" --device cuda --mode lean --cells 4 --repeat 1 --warmup 1 > "$r.log" 2>&1 || tail -5 "$r.log"
    ncu -i "$r.ncu-rep" --page source --csv --print-source sass > "$r.csv" 2> /dev/null || true
    python3 "$here/tools/gpu-machine/sass-summary.py" "$r.csv" 2>&1 | head -40 | tee -a "$out/kernels.log"
    ncu -i "$r.ncu-rep" --page details 2>&1 | grep -E "Duration|Registers Per|Occupancy|Issue Slots Busy|Memory Throughput" \
      | tee -a "$out/kernels.log"
  done
  exit $status
fi
for mode in lean fast; do
  for precision in default tf32; do
    bench --mode $mode --precision $precision --cells 4 --repeat 5 --warmup 1
    bench --mode $mode --precision $precision --cells 8 --repeat 5 --warmup 1
  done
  SEZM_CUDA_TIMING=1 bench --mode $mode --cells 8 --repeat 1 --warmup 1
done
# A small system (64 atoms): where the fixed per-call latency goes.
SEZM_CUDA_TIMING=1 bench --mode lean --cells 2 --repeat 5 --warmup 1
# A larger lean chunk than the default 81920 (more memory, fewer launches).
bench --mode lean --cells 8 --repeat 3 --warmup 1 --chunk 131072
if [ "$what" = full ]; then
  # docs/performance.md's size table: 32,768 and 262,144 atoms, both modes and precisions (fast
  # mode at 262,144 atoms needs ~300 GiB and is expected to report out of memory).
  for precision in default tf32; do
    bench --mode lean --precision $precision --cells 16 --repeat 3 --warmup 1
    bench --mode fast --precision $precision --cells 16 --repeat 3 --warmup 1
    bench --mode lean --precision $precision --cells 32 --repeat 1 --warmup 0
  done
  bench --mode fast --cells 32 --repeat 1 --warmup 0 || true
  # Size check: a large lean system (cells 38: 438,976 atoms; the edge state kept, ~95 GiB computed,
  # docs/ARCHITECTURE.md; 128.6 GiB measured while lean kept the radial features). Larger systems
  # go per chunk (1,000,000 atoms: cells 50, 61.5 GiB).
  bench --mode lean --cells "${SEZM_GPU_MAX_CELLS:-38}" --repeat 1 --warmup 0 || true
fi
if [ -f "$here/.devdeps/lammps-gpu.tar.xz" ] && [ "${SEZM_GPU_CHECK_LAMMPS:-1}" != 0 ]; then
  echo "== LAMMPS (device cuda vs cpu, 1 and 2 ranks)"
  mkdir -p "$out/lammps"
  OUT="$out/lammps" bash "$here/tools/gpu-machine/gpu-lammps.sh" check || status=1
else
  echo "== LAMMPS check skipped (SEZM_GPU_CHECK_LAMMPS=0, or no .devdeps/lammps-gpu.tar.xz:" \
       "run tools/gpu-machine/make-lammps-bundle.sh)"
fi
exit $status
