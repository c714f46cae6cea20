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
# SEZM_KT_BYTES=1: also each kernel's DRAM bytes read and written (GB per call) and its DRAM rate
# (TB/s of its own duration; the H200's HBM3e peaks at 4.8): which kernels are bound by memory
# traffic. The caches are left alone between kernels (--cache-control none), as in a real call.
set -euo pipefail
bench="$1"
shift
out="${OUT:-/tmp}"
csv="$out/kernel-times.csv"
# Two calls (warm-up + timed); profile both, keep the second half of the launches.
metrics=gpu__time_duration.sum
cache=()
if [ "${SEZM_KT_BYTES:-0}" = 1 ]; then
  metrics="$metrics,dram__bytes_read.sum,dram__bytes_write.sum"
  cache=(--cache-control none)
fi
ncu --clock-control none ${cache[@]+"${cache[@]}"} --metrics "$metrics" --csv --print-units base \
  "$bench" "$@" --repeat 1 --warmup 1 > "$csv.raw" 2> "$out/kernel-times.err" || {
  tail -20 "$out/kernel-times.err"
  exit 1
}
grep -E '^"[0-9]' "$csv.raw" > "$csv" || true
python3 - "$csv" <<'EOF'
import csv, sys, collections, signal
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into `head`: stop quietly, no traceback
rows = list(csv.reader(open(sys.argv[1])))
# columns: ID, Process ID, Process Name, Host Name, Kernel Name, Context, Stream, Block Size,
# Grid Size, Device, CC, Section Name, Metric Name, Metric Unit, Metric Value
vals = collections.defaultdict(dict)  # launch ID -> metric -> value
names = {}
for r in rows:
    vals[int(r[0])][r[-3]] = float(r[-1].replace(",", ""))
    names[int(r[0])] = r[4]
ids = sorted(i for i in vals if "gpu__time_duration.sum" in vals[i])
half = ids[len(ids) // 2:]  # the timed call (the warm-up makes the same launches)
if len(ids) % 2:
    print("note: an odd number of launches (a set-up kernel?): the halves are approximate")
with_bytes = all("dram__bytes_read.sum" in vals[i] for i in half) and half
tot = collections.defaultdict(float); cnt = collections.Counter()
rd = collections.defaultdict(float); wr = collections.defaultdict(float)
for i in half:
    key = names[i].replace("(anonymous namespace)::", "").replace("sezm::cuda::", "").replace("void ", "")
    key = key.split("(")[0].strip()
    tot[key] += vals[i]["gpu__time_duration.sum"]; cnt[key] += 1
    if with_bytes:
        rd[key] += vals[i]["dram__bytes_read.sum"]; wr[key] += vals[i]["dram__bytes_write.sum"]
all_ns = sum(tot.values())
print(f"{len(ids)} launches profiled; timed call: {len(half)} launches, {all_ns / 1e3:.1f} us of kernels"
      + (f", DRAM {sum(rd.values()) / 1e9:.2f} GB read, {sum(wr.values()) / 1e9:.2f} GB written" if with_bytes else ""))
print(f"{'kernel':60s} {'us':>10s} {'launches':>9s} {'share':>7s}" + ("   GB read  GB written   TB/s" if with_bytes else ""))
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    line = f"{k[:60]:60s} {v / 1e3:10.1f} {cnt[k]:9d} {100 * v / all_ns:6.1f}%"
    if with_bytes:
        line += f" {rd[k] / 1e9:9.3f} {wr[k] / 1e9:10.3f} {(rd[k] + wr[k]) / v / 1e3:6.2f}"
    print(line)
EOF
