#!/usr/bin/env python3
"""Checks for the examples/gpu LAMMPS runs (plain Python 3, no numpy needed).

  analyze.py compare LOG_A DUMP_A LOG_B DUMP_B [--label L] [--tol-e 1e-6] [--tol-f 1e-5] [--tol-v 1e-5]
      Single points of in.check: |dE|/|E|, max|dF|/max|F| (per-atom forces matched by atom id),
      virial max|dW|/max|W| over its 6 components, per-atom energy (reported, not judged).
      B is the reference. Prints one PASS/FAIL line; exit status 0 on PASS.
  analyze.py drift LOG [--label L] [--max-slope 1e-5] [--expect-steps N]
      NVE run of in.drift: least-squares slope of etotal/atom against time (eV/atom/ps),
      max|E-E0| per atom. Prints one PASS/FAIL line; exit status 0 on PASS.
"""
import argparse
import math
import re
import sys


def thermo_blocks(path):
    """Thermo tables of a LAMMPS log: list of (header, rows)."""
    blocks, header, rows = [], None, []
    with open(path, errors="replace") as f:
        for line in f:
            tok = line.split()
            if tok and tok[0] == "Step":
                header, rows = tok, []
                blocks.append((header, rows))
                continue
            if header is None:
                continue
            if line.startswith("Loop time") or line.startswith("ERROR"):
                header = None
                continue
            if len(tok) == len(header):
                try:
                    rows.append([float(t) for t in tok])
                except ValueError:
                    pass  # e.g. the pair style's timing lines printed inside the table
    return blocks


def natoms_from_log(path):
    with open(path, errors="replace") as f:
        m = re.findall(r"^Created (\d+) atoms", f.read(), re.M)
    return int(m[-1]) if m else None


def read_dump(path):
    """Last snapshot of a custom dump: box lengths, {id: {column: value}}."""
    with open(path) as f:
        lines = f.read().splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("ITEM: TIMESTEP")]
    if not starts:
        raise SystemExit("analyze: %s holds no dump snapshot" % path)
    snap = lines[starts[-1]:]
    box, atoms = [], {}
    for i, l in enumerate(snap):
        if l.startswith("ITEM: BOX BOUNDS"):
            for k in range(3):
                lo, hi = map(float, snap[i + 1 + k].split()[:2])
                box.append(hi - lo)
        if l.startswith("ITEM: ATOMS"):
            cols = l.split()[2:]
            for row in snap[i + 1:]:
                v = row.split()
                if len(v) != len(cols):
                    break
                d = dict(zip(cols, map(float, v)))
                atoms[int(d["id"])] = d
            break
    return box, atoms


def fmt(x):
    return "%.2e" % x


def compare(a):
    res = {}
    ok = True
    why = []
    ta, tb = thermo_blocks(a.log_a), thermo_blocks(a.log_b)
    if not ta or not ta[-1][1] or not tb or not tb[-1][1]:
        print("FAIL %s: no thermo output in %s" % (a.label, a.log_a if not ta or not ta[-1][1] else a.log_b))
        return 1
    (ha, ra), (hb, rb) = ta[-1], tb[-1]
    va, vb = dict(zip(ha, ra[-1])), dict(zip(hb, rb[-1]))
    ea, eb = va["PotEng"], vb["PotEng"]
    res["E"] = abs(ea - eb) / max(abs(eb), 1e-300)
    wa = [va["c_vir[%d]" % k] for k in range(1, 7)]
    wb = [vb["c_vir[%d]" % k] for k in range(1, 7)]
    res["W"] = max(abs(x - y) for x, y in zip(wa, wb)) / max(max(abs(y) for y in wb), 1e-300)
    boxa, da = read_dump(a.dump_a)
    boxb, db = read_dump(a.dump_b)
    if len(da) != len(db) or not da:
        print("FAIL %s: the dumps hold different numbers of atoms (%d vs %d)" % (a.label, len(da), len(db)))
        return 1

    def dist(p, q):
        d = 0.0
        for k, c in enumerate("xyz"):
            e = abs(p[c] - q[c])
            if boxb:
                e = min(e, abs(e - boxb[k]))
            d = max(d, e)
        return d

    # Match by atom id; create_atoms numbers atoms per processor, so another decomposition can
    # number the same configuration differently: then match by position (the rattle is
    # rank-independent, so positions agree to the bit).
    how = "id"
    if sorted(da) != sorted(db) or max(dist(da[i], db[i]) for i in db) > 1e-8:
        how = "position"

        def key(p):
            out = []
            for c, L in zip("xyz", boxb or (0.0, 0.0, 0.0)):
                v = round(p[c], 5)
                if L:
                    v = round(v % L, 5)
                    if abs(v - L) < 1e-5:
                        v = 0.0
                out.append(v)
            return tuple(out)
        by_pos = {key(p): i for i, p in da.items()}
        remap = {}
        for i, p in db.items():
            j = by_pos.get(key(p))
            if j is None:  # rounding at a bin edge: nearest atom
                j = min(da, key=lambda k: dist(da[k], p))
            remap[i] = j
        da = {i: da[remap[i]] for i in db}
    dx = max(dist(da[i], db[i]) for i in db)
    fmax = max(abs(db[i][c]) for i in db for c in ("fx", "fy", "fz"))
    res["F"] = max(abs(da[i][c] - db[i][c]) for i in db for c in ("fx", "fy", "fz")) / max(fmax, 1e-300)
    pe_col = next((c for c in db[next(iter(db))] if c.startswith("c_pe")), None)
    if pe_col:
        emax = max(abs(db[i][pe_col]) for i in db)
        res["e_i"] = max(abs(da[i][pe_col] - db[i][pe_col]) for i in db) / max(emax, 1e-300)
    if dx > 1e-8:
        ok = False
        why.append("positions differ by %s A (not the same configuration)" % fmt(dx))
    if how == "position":
        why.append("atoms matched by position (ids differ between the decompositions)")
    for key, tol, name in (("E", a.tol_e, "energy"), ("F", a.tol_f, "forces"), ("W", a.tol_v, "virial")):
        if not res[key] <= tol:
            ok = False
            why.append("%s %s > %s" % (name, fmt(res[key]), fmt(tol)))
    line = ("%s %s: %d atoms, E %.10f eV, |dE|/|E| %s (tol %s), max|dF|/max|F| %s (tol %s, max|F| %.3f eV/A), "
            "virial max|dW|/max|W| %s (tol %s)%s" % (
                "PASS" if ok else "FAIL", a.label, len(db), ea, fmt(res["E"]), fmt(a.tol_e), fmt(res["F"]),
                fmt(a.tol_f), fmax, fmt(res["W"]), fmt(a.tol_v),
                (", per-atom E max|de|/max|e| %s" % fmt(res["e_i"])) if "e_i" in res else ""))
    if why:
        line += " -- " + "; ".join(why)
    print(line)
    return 0 if ok else 1


def drift(a):
    blocks = thermo_blocks(a.log)
    n = a.natoms or natoms_from_log(a.log)
    rows, head = [], None
    for h, r in blocks:
        if "TotEng" in h and "Time" in h and r:
            head, rows = h, r
    if not rows or not n:
        print("FAIL %s: no thermo table with Time and TotEng (or no atom count) in %s" % (a.label, a.log))
        return 1
    it, ie, istep = head.index("Time"), head.index("TotEng"), head.index("Step")
    t = [r[it] for r in rows]
    e = [r[ie] / n for r in rows]
    m = len(t)
    if m < 3:
        print("FAIL %s: only %d thermo points" % (a.label, m))
        return 1
    tm, em = sum(t) / m, sum(e) / m
    sxx = sum((x - tm) ** 2 for x in t)
    slope = sum((x - tm) * (y - em) for x, y in zip(t, e)) / sxx
    dmax = max(abs(y - e[0]) for y in e)
    resid = math.sqrt(sum((y - em - slope * (x - tm)) ** 2 for x, y in zip(t, e)) / m)
    steps = int(rows[-1][istep] - rows[0][istep])
    ok = abs(slope) <= a.max_slope and all(math.isfinite(y) for y in e)
    note = ""
    with open(a.log, errors="replace") as f:
        timed_out = "Wall time limit reached" in f.read()
    if a.expect_steps and steps < a.expect_steps:
        note = " (stopped after %d of %d steps%s)" % (steps, a.expect_steps,
                                                        ": LAMMPS timer timeout" if timed_out else "")
    print("%s %s: %d atoms, %d steps, %.3f ps, %d points: drift %+.2e eV/atom/ps (limit %s), "
          "max|E-E0| %.2e eV/atom, rms about the fit %.2e eV/atom, E0 %.6f eV/atom%s" % (
              "PASS" if ok else "FAIL", a.label, n, steps, t[-1] - t[0], m, slope, fmt(a.max_slope),
              dmax, resid, e[0], note))
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    for k in ("log_a", "dump_a", "log_b", "dump_b"):
        c.add_argument(k)
    c.add_argument("--label", default="compare")
    c.add_argument("--tol-e", type=float, default=1e-6)
    c.add_argument("--tol-f", type=float, default=1e-5)
    c.add_argument("--tol-v", type=float, default=1e-5)
    d = sub.add_parser("drift")
    d.add_argument("log")
    d.add_argument("--label", default="drift")
    d.add_argument("--natoms", type=int, default=0)
    d.add_argument("--max-slope", type=float, default=1e-5)
    d.add_argument("--expect-steps", type=int, default=0)
    a = p.parse_args()
    try:
        return compare(a) if a.cmd == "compare" else drift(a)
    except (OSError, KeyError, ValueError) as e:
        print("FAIL %s: %s: %s" % (a.label, type(e).__name__, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
