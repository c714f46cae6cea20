#!/usr/bin/env python3
"""Compare the thermo output of a LAMMPS log against a reference log.

    compare-thermo.py LOG REF_LOG [--rtol R] [--min-rows N] [--columns C1,C2,...]

Thermo blocks are read from both logs: a block starts at a header line whose first word is
"Step" and ends at the run's "Loop time" line (LAMMPS 29Sep2021 writes "Step Time Temp ...",
22Jul2025 pads the names into aligned columns; both are split on whitespace). A data row is a
line of the header's number of words, all numbers, the first an integer step; other lines inside
a block (warnings, `pair sezm timing` reports) are skipped. Only the default one-line thermo
format is understood (not `thermo_modify line multi/yaml`).

Rows are paired by run block (the n-th `run` of LOG with the n-th of REF_LOG) and step, so a log
that ran a prefix of the reference protocol (fewer steps in the first run, same thermo interval)
is compared on the steps both printed. Every column of the reference header (or of --columns) is
compared; a column missing from either log is a failure, and so is a comparison of fewer than
--min-rows rows (default 2).

Tolerance, per value a (LOG) and b (REF_LOG):

    |a - b| <= rtol * |b| + (u_a + u_b) / 2

u_a and u_b are one unit in the last printed digit of a and b (1e-8 for "%14.8f", 0 for an
integer): the rounding of the two printed values alone can differ by that much. rtol (default
1e-8) bounds the difference of the unrounded values. It is set from what the same input gives
on another rank count or another LAMMPS build: forces of the pair style agree to ~1e-15
relative between 1, 2 and 4 ranks and between LAMMPS builds, and the ctest rank checks bound
them at 1e-10; a few tens of MD steps amplify such differences by a few orders at most
(docs/lammps.md, "Thermo output against the reference logs", lists the measured differences).
A different model, input or step changes the printed values at 1e-6 relative or more.

Exit status 0 when every compared value is within tolerance, 1 otherwise, 2 on unusable input.
"""
import argparse
import math
import re
import sys

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_INTEGER = re.compile(r"^[-+]?\d+$")


def last_digit_unit(token):
    """One unit in the last printed digit of a number as written ('-58.96690485' -> 1e-8)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals) if "." in mantissa or exponent else 0.0


def read_blocks(path):
    """List of run blocks, each (header words, {step: row words}), in the order of the log."""
    blocks, current = [], None
    with open(path, errors="replace") as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "Step":
                current = (words, {})
                blocks.append(current)
            elif current is not None and line.startswith("Loop time"):
                current = None
            elif (current is not None and len(words) == len(current[0]) and _INTEGER.match(words[0])
                  and all(_NUMBER.match(w) for w in words)):
                current[1][int(words[0])] = words
    return blocks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="LAMMPS log to check")
    ap.add_argument("ref", help="reference LAMMPS log")
    ap.add_argument("--rtol", type=float, default=1e-8, help="relative tolerance (default 1e-8)")
    ap.add_argument("--min-rows", type=int, default=2, help="fewest rows that must be compared (default 2)")
    ap.add_argument("--columns", help="comma-separated thermo columns to compare (default: all of REF_LOG's)")
    args = ap.parse_args()

    try:
        test, ref = read_blocks(args.log), read_blocks(args.ref)
    except OSError as e:
        print(f"compare-thermo: {e}")
        return 2
    for path, blocks in ((args.log, test), (args.ref, ref)):
        if not blocks:
            print(f"compare-thermo: {path}: no thermo block (no line starting with 'Step')")
            return 2

    wanted = args.columns.split(",") if args.columns else None
    ok, rows, worst = True, 0, {}
    for b, ((thead, trows), (rhead, rrows)) in enumerate(zip(test, ref), start=1):
        cols = wanted or rhead
        missing = [c for c in cols if c not in thead or c not in rhead]
        if missing:
            which = [("LOG" if c not in thead else "") + ("REF" if c not in rhead else "") for c in missing]
            print(f"run block {b}: column(s) missing: " + ", ".join(f"{c} (not in {w})" for c, w in zip(missing, which)))
            ok = False
            continue
        steps = sorted(set(trows) & set(rrows))
        span = lambda rows: f"{min(rows)}..{max(rows)} ({len(rows)} rows)" if rows else "none"
        print(f"run block {b}: steps {span(trows)} in LOG, {span(rrows)} in REF; {len(steps)} compared")
        for s in steps:
            rows += 1
            for c in cols:
                ta, tb = trows[s][thead.index(c)], rrows[s][rhead.index(c)]
                a, r = float(ta), float(tb)
                allowed = args.rtol * abs(r) + 0.5 * (last_digit_unit(ta) + last_digit_unit(tb))
                diff = abs(a - r)
                # parsing the decimal strings adds ~1e-16 relative; never let that decide
                good = diff <= allowed * (1 + 1e-9) + 4 * sys.float_info.epsilon * abs(r)
                rel = diff / abs(r) if r != 0 else (0.0 if diff == 0 else math.inf)
                if c not in worst or rel > worst[c][0]:
                    worst[c] = (rel, diff, b, s)
                if not good:
                    print(f"  step {s} {c}: {ta} vs {tb}: |diff| {diff:.3e} > allowed {allowed:.3e} FAIL")
                    ok = False
    if len(test) != len(ref):
        print(f"run blocks: {len(test)} in LOG, {len(ref)} in REF (only the first {min(len(test), len(ref))} paired)")
    for c, (rel, diff, b, s) in worst.items():
        print(f"  {c:>10}: max |diff| {diff:.3e}, rel {rel:.3e} (block {b} step {s})")
    if rows < args.min_rows:
        print(f"compared {rows} rows, fewer than --min-rows {args.min_rows} FAIL")
        ok = False
    print(f"{rows} rows compared, rtol {args.rtol:g} + half a unit of each last printed digit: "
          + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
