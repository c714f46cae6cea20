#!/usr/bin/env bash
# Every kernel of one engine call, ranked by total time: Nsight Compute's duration metric (one pass
# per kernel, clocks left alone) over one warm `sezm-bench` call, summed by kernel name. For the
# per-kernel table of a docs/performance.md entry and for choosing what to work on next; not a
# timing of the call (ncu serialises the kernels).
#   bash tools/gpu-machine/kernel-times.sh BENCH [sezm-bench options ...]
# e.g. kernel-times.sh /tmp/sezm-gpu-build/bench/sezm-bench potentials/C.pt --device cuda --mode lean --cells 4
# The bench runs with --repeat 1 --warmup 1; the warm-up call's kernels are skipped by counting
# the launches of a first, unprofiled-metrics pass. Output: a table (µs total, launches, share) on
# stdout; the raw CSV in $OUT/kernel-times.csv when OUT is set.
set -euo pipefail
bench="$1"
shift
out="${OUT:-/tmp}"
csv="$out/kernel-times.csv"
# Two calls (warm-up + timed); profile both, keep the second half of the launches.
ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$bench" "$@" --repeat 1 --warmup 1 > "$csv.raw" 2> "$out/kernel-times.err" || {
  tail -20 "$out/kernel-times.err"
  exit 1
}
grep -E '^"[0-9]' "$csv.raw" > "$csv" || true
python3 - "$csv" <<'EOF'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
# columns: ID, Process ID, Process Name, Host Name, Kernel Name, Context, Stream, Block Size,
# Grid Size, Device, CC, Section Name, Metric Name, Metric Unit, Metric Value
launches = [(int(r[0]), r[4], float(r[-1].replace(",", ""))) for r in rows if r[-3] == "gpu__time_duration.sum"]
launches.sort()
half = launches[len(launches) // 2:]  # the timed call (the warm-up makes the same launches)
if len(launches) % 2:
    print("note: an odd number of launches (a set-up kernel?): the halves are approximate")
tot = collections.defaultdict(float); cnt = collections.Counter()
for _, name, ns in half:
    key = name.replace("(anonymous namespace)::", "").replace("sezm::cuda::", "").replace("void ", "")
    key = key.split("(")[0].strip()
    tot[key] += ns; cnt[key] += 1
all_ns = sum(tot.values())
print(f"{len(launches)} launches profiled; timed call: {len(half)} launches, {all_ns / 1e3:.1f} us of kernels")
print(f"{'kernel':60s} {'us':>10s} {'launches':>9s} {'share':>7s}")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{k[:60]:60s} {v / 1e3:10.1f} {cnt[k]:9d} {100 * v / all_ns:6.1f}%")
EOF
