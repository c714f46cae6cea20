#!/usr/bin/env bash
# A/B of the CUDA engine on the GPU machine, in one device call, between a baseline sezm-bench
# (OLD: the previous build's, carried xz'd beside the prebuilt programs) and the bench under test
# (NEW: the prebuilt programs' by default), and NEW again under environment switches (variants:
# an opt-in or opt-out path against the default in the same binary).
#   bash tools/gpu-machine/ab.sh digests|times|both|kernels|repeat
#     digests: `--digest` lines (energy to 17 digits, hash of per-atom energies, forces and virial)
#       of OLD, NEW and each variant for every option set of SEZM_AB_DIGESTS: "the same bits" is
#       equal lines (docs/performance.md: how the project checks that a change keeps every sum's
#       order); lean and fast at the same --chunk must agree too;
#     times: SEZM_AB_ROUNDS rounds, each timing every option set of SEZM_AB_CONFIGS on OLD, NEW and
#       each variant in turn (interleaved, so that a drift of the machine shows as a drift, not as
#       a difference): the bench's median of SEZM_AB_REPEAT calls and its peak device memory;
#     both: digests, then times;
#     kernels: every kernel of one warm call (kernel-times.sh with DRAM bytes, SEZM_KT_BYTES=1) of
#       OLD and NEW under SEZM_AB_KT (default "--mode fast --precision tf32"), the first 14 lines.
#     repeat: each option set of SEZM_AB_DIGESTS run SEZM_AB_REPEATS times (default 20, a process
#       each) on OLD, NEW and each variant, and the distinct digests counted: a run's bits should
#       not depend on the run (docs/performance.md, 2026-12-06 twenty-second session: two fast tf32
#       runs that gave other bits once). Faster for a rate: one process, `sezm-bench --repeat N
#       --warmup 0 --digest`, which counts the distinct results of its calls.
# Environment:
#   SEZM_AB_OLD       baseline bench: a sezm-bench, or one compressed by xz (*.xz); unset: none
#   SEZM_AB_NEW       bench under test (default: sezm-bench of .devdeps/prebuilt.tar.xz, unpacked)
#   SEZM_AB_VARIANTS  space-separated NAME:VAR=value[,VAR=value...], e.g.
#                     "ws3:SEZM_CUDA_STACK_WS=3 one:SEZM_CUDA_WGMMA=0,SEZM_CUDA_TIMING=1"
#   SEZM_AB_DIGESTS   ';'-separated option sets (default: fast; lean; fast tf32; fast and lean at
#                     --chunk 57344)
#   SEZM_AB_CONFIGS   ';'-separated option sets (default: fast; lean; fast tf32)
#   SEZM_AB_TIMES_SKIP  space-separated variant names left out of the timing (digests only)
#   SEZM_AB_CELLS (8: 4,096 atoms), SEZM_AB_ROUNDS (3), SEZM_AB_REPEAT (7), SEZM_AB_MODEL
#   (potentials/C.pt), SEZM_AB_TIMEOUT (seconds per bench run, 60: a run that takes longer, e.g.
#   a kernel that never completes a barrier, is ended, and its NAME is left out of every later run)
# Output: stdout and $OUT/ab.txt (the device tool returns $OUT). Dependencies: .devdeps/ as
# gpu-check.sh unpacks them (make-devdeps.sh, make-prebuilt.sh).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
what="${1:-both}"
out="${OUT:-/tmp/sezm-ab-out}"
mkdir -p "$out"
log="$out/ab.txt"
t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$log"; }
deps="$here/.devdeps"
if [ -f "$deps/devdeps.tar.xz" ] && [ ! -d "$deps/lib" ]; then tar xJf "$deps/devdeps.tar.xz" -C "$deps"; fi
export LD_LIBRARY_PATH="$deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
work="${SEZM_AB_DIR:-/tmp/sezm-ab}"
mkdir -p "$work"
new="${SEZM_AB_NEW:-}"
if [ -z "$new" ]; then
  [ -f "$deps/prebuilt.tar.xz" ] || { echo "no SEZM_AB_NEW and no .devdeps/prebuilt.tar.xz (make-prebuilt.sh)" >&2; exit 2; }
  rm -rf "$work/pb" && mkdir -p "$work/pb"
  tar xJf "$deps/prebuilt.tar.xz" -C "$work/pb" --strip-components=1
  new="$work/pb/bench/sezm-bench"
  say "NEW: prebuilt $(cat "$work/pb/SOURCE")"
fi
old="${SEZM_AB_OLD:-}"
if [ -n "$old" ] && [ "${old%.xz}" != "$old" ]; then
  xz -dc "$old" > "$work/old-bench" && chmod +x "$work/old-bench"
  old="$work/old-bench"
fi
[ -n "$old" ] && say "OLD: ${SEZM_AB_OLD}"
model="${SEZM_AB_MODEL:-$here/potentials/C.pt}"
cells="${SEZM_AB_CELLS:-8}"
lim="${SEZM_AB_TIMEOUT:-60}"
dead=" "  # names whose run timed out: not run again
# The runs: "NAME|bench|VAR=value,..." (OLD, NEW, then NEW under each variant).
runs=()
[ -n "$old" ] && runs+=("old|$old|")
runs+=("new|$new|")
for v in ${SEZM_AB_VARIANTS:-}; do runs+=("${v%%:*}|$new|${v#*:}"); done
# run NAME ENVS BENCH OPTIONS...: the bench under ENVS (comma-separated VAR=value, or empty), its
# output in $work/run.out; a run ended by the timeout leaves NAME out from now on, and says so.
run() {
  local name="$1" envs="$2" bench="$3"
  shift 3
  local e=()
  [ -n "$envs" ] && IFS=, read -r -a e <<< "$envs"
  timeout -k 10 "$lim" env ${e[@]+"${e[@]}"} "$bench" "$model" --device cuda --cells "$cells" "$@" > "$work/run.out" 2>&1
  if [ $? = 124 ]; then
    dead="$dead$name "
    say "$name: timed out after ${lim} s; left out of the later runs"
  fi
}
split_sets() { local IFS=';'; read -r -a sets <<< "$1"; }
if [ "$what" = digests ] || [ "$what" = both ]; then
  split_sets "${SEZM_AB_DIGESTS:---mode fast;--mode lean;--mode fast --precision tf32;--mode fast --chunk 57344;--mode lean --chunk 57344}"
  say "== digests (--cells $cells --repeat 1 --warmup 0 --digest; '=' the same as the first run's)"
  differ=0
  for opts in "${sets[@]}"; do
    first=""
    for r in "${runs[@]}"; do
      IFS='|' read -r name bench envs <<< "$r"
      case "$dead" in *" $name "*) continue ;; esac
      # shellcheck disable=SC2086
      run "$name" "$envs" "$bench" $opts --repeat 1 --warmup 0 --digest
      d="$(grep '^digest: energy' "$work/run.out" | sed 's/^digest: //; s/ | FNV-1a 64 of per-atom energies, forces, virial / | /')"
      mark=" "
      if [ -z "$first" ]; then first="$d"; elif [ -n "$d" ] && [ "$d" = "$first" ]; then mark="="; else mark="!"; differ=1; fi
      say "$(printf '%-40s %-5s %s %s' "$opts" "$name" "$mark" "${d:-(no digest: failed or timed out)}")"
    done
  done
  [ "$differ" = 0 ] && say "digests: every run gives the first run's bits" || say "digests: DIFFER ('!' lines)"
fi
if [ "$what" = repeat ]; then
  split_sets "${SEZM_AB_DIGESTS:---mode fast --precision tf32;--mode lean --precision tf32;--mode fast;--mode lean}"
  n="${SEZM_AB_REPEATS:-20}"
  say "== repeat ($n runs each, --cells $cells --repeat 1 --warmup 0 --digest; count x digest)"
  unsteady=0
  for opts in "${sets[@]}"; do
    for r in "${runs[@]}"; do
      IFS='|' read -r name bench envs <<< "$r"
      : > "$work/repeat.txt"
      for _ in $(seq 1 "$n"); do
        case "$dead" in *" $name "*) break ;; esac
        # shellcheck disable=SC2086
        run "$name" "$envs" "$bench" $opts --repeat 1 --warmup 0 --digest
        d="$(grep '^digest: energy' "$work/run.out" | sed 's/^digest: //; s/ | FNV-1a 64 of per-atom energies, forces, virial / | /')"
        echo "${d:-(no digest: failed or timed out)}" >> "$work/repeat.txt"
      done
      k="$(sort -u "$work/repeat.txt" | wc -l)"
      [ "$k" -gt 1 ] && unsteady=1
      sort "$work/repeat.txt" | uniq -c | sort -rn | while read -r c dg; do
        say "$(printf '%-40s %-5s %3s x %s' "$opts" "$name" "$c" "$dg")"
      done
    done
  done
  [ "$unsteady" = 0 ] && say "repeat: every run of a set gave the same bits" || say "repeat: RUNS DIFFER (sets with more than one line)"
fi
if [ "$what" = times ] || [ "$what" = both ]; then
  split_sets "${SEZM_AB_CONFIGS:---mode fast;--mode lean;--mode fast --precision tf32}"
  rep="${SEZM_AB_REPEAT:-7}"
  say "== times (--cells $cells --repeat $rep --warmup 1; median s, peak device GiB), rounds interleaved"
  for round in $(seq 1 "${SEZM_AB_ROUNDS:-3}"); do
    for opts in "${sets[@]}"; do
      line="r$round $opts"
      for r in "${runs[@]}"; do
        IFS='|' read -r name bench envs <<< "$r"
        case " ${SEZM_AB_TIMES_SKIP:-} $dead" in *" $name "*) continue ;; esac
        # shellcheck disable=SC2086
        run "$name" "$envs" "$bench" $opts --repeat "$rep" --warmup 1
        m="$(grep -oE 'median [0-9.]+ s|device memory \(engine buffers\) [0-9.]+' "$work/run.out" | grep -oE '[0-9.]+' |
          tr '\n' ' ')"
        line="$line | $name ${m:-failed}"
      done
      say "$line"
    done
  done
fi
if [ "$what" = kernels ]; then
  say "== kernels (kernel-times.sh, SEZM_KT_BYTES=1, --cells $cells ${SEZM_AB_KT:---mode fast --precision tf32})"
  for r in "${runs[@]}"; do
    IFS='|' read -r name bench envs <<< "$r"
    [ -n "$envs" ] && continue  # the builds only
    mkdir -p "$work/kt-$name"
    # shellcheck disable=SC2086
    OUT="$work/kt-$name" SEZM_KT_BYTES=1 timeout 200 bash "$here/tools/gpu-machine/kernel-times.sh" "$bench" "$model" \
      --device cuda --cells "$cells" ${SEZM_AB_KT:---mode fast --precision tf32} 2>&1 | head -14 | tee -a "$log"
    say "-- $name done"
  done
fi
say "end"
