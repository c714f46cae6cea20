#!/usr/bin/env python3
"""Where a kernel's time goes, from Nsight Compute's source page: warp-stall reasons, the executed
instruction mix and the warp samples per window of SASS lines (products, epilogues and waits show
up as separate windows). For choosing what to change in a kernel and for docs/performance.md.

  ncu --set full -k regex:KERNEL --launch-skip N --launch-count 1 -o /tmp/r BENCH ...
  ncu -i /tmp/r.ncu-rep --page source --csv --print-source sass > r.csv
  python3 tools/gpu-machine/sass-summary.py r.csv [--window 128] [--top 20]

Several reports appended into one CSV are taken kernel by kernel."""
import argparse
import collections
import csv


def kernels(path):
    """(kernel name, header, rows) per 'Kernel Name' block of the CSV."""
    out, cur = [], None
    for r in csv.reader(open(path)):
        if r and r[0] == "Kernel Name":
            cur = [r[1], None, []]
            out.append(cur)
        elif cur is not None and r and r[0] == "Address":
            cur[1] = r
        elif cur is not None and cur[1] and r and r[0].startswith("0x"):
            cur[2].append(r)
    return out


def opcode(sass):
    t = sass.split()
    if not t:
        return ""
    return (t[1] if t[0].startswith("@") else t[0]).split(".")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--window", type=int, default=128, help="SASS lines per window")
    ap.add_argument("--top", type=int, default=15, help="lines with the most samples")
    ap.add_argument("--excess", type=int, default=0,
                    help="also the N lines with the most excessive shared wavefronts / global sectors")
    a = ap.parse_args()
    for name, h, rows in kernels(a.csv):
        ix = {n: i for i, n in enumerate(h)}
        stalls = [n for n in h if n.startswith("stall_") and "(Not" not in n]
        num = lambda r, k: int(r[ix[k]] or 0)
        tot = collections.Counter()
        ops = collections.Counter()
        for r in rows:
            for s in stalls:
                tot[s] += num(r, s)
            ops[opcode(r[1])] += num(r, "Instructions Executed")
        S, T = max(1, sum(tot.values())), max(1, sum(ops.values()))
        print(f"== {name[:110]}\nwarp samples {S}, warp instructions executed {T}")
        print("stalls: " + " ".join(f"{s[6:]} {100 * v / S:.0f}%" for s, v in tot.most_common(10)))
        print("instructions: " + " ".join(f"{o} {100 * v / T:.1f}%" for o, v in ops.most_common(18)))
        print(f"windows of {a.window} lines: first address, samples, counts of HGMMA FADD FFMA LDG STG LDS STS MUFU SYNCS")
        for w0 in range(0, len(rows), a.window):
            blk = rows[w0:w0 + a.window]
            c = collections.Counter(opcode(r[1]) for r in blk)
            smp = sum(num(r, "# Samples") for r in blk)
            print(f"  {blk[0][0][-6:]} {smp:6d}  " + " ".join(f"{c[o]:3d}" for o in
                  ("HGMMA", "FADD", "FFMA", "LDG", "STG", "LDS", "STS", "MUFU", "SYNCS")))
        print(f"top {a.top} lines: address, samples, main stall, SASS")
        for r in sorted(rows, key=lambda r: -num(r, "# Samples"))[:a.top]:
            st = max(stalls, key=lambda s: num(r, s))
            print(f"  {r[0][-6:]} {num(r, '# Samples'):5d} {st[6:]:16s} {r[1].strip()[:80]}")
        # Bank conflicts and uncoalesced accesses per line (SourceCounters), with the two lines
        # before each for context (the address arithmetic that names the access).
        for col in [n for n in h if "Excessive" in n]:
            hot = sorted(range(len(rows)), key=lambda i: -num(rows[i], col))[:a.excess]
            tot_x = sum(num(r, col) for r in rows)
            if not hot or tot_x == 0:
                continue
            print(f"top {a.excess} lines by '{col}' (kernel total {tot_x}): address, count, SASS")
            for i in hot:
                if num(rows[i], col) == 0:
                    break
                ctx = " | ".join(rows[j][1].strip()[:40] for j in range(max(0, i - 2), i))
                print(f"  {rows[i][0][-6:]} {num(rows[i], col):8d} {rows[i][1].strip()[:60]}   [{ctx}]")


if __name__ == "__main__":
    main()
