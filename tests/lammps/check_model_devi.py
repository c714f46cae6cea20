#!/usr/bin/env python3
"""Checks a model-deviation file written by `pair_style sezm M1 M2 ... out_freq N` (Python 3,
standard library only).

  check_model_devi.py ref FILE REF_JSON [--force TABLE] [--virial TABLE] [--atomic] [--rtol R] --steps 0,5,...
      FILE has deepmd-kit's pair-style header and exactly the rows of --steps, each against
      deepmd-kit 3.2.0's numbers in REF_JSON (tests/data/model_devi/ref_model_devi.json): force
      columns from table --force, virial columns from --virial (default "plain"; the tables are
      calc_model_devi's "plain", "relative_f", "relative_v" and "relative_v_per_component");
      with --atomic the per-atom force deviations too (atom-ID order). --rtol R (default 1e-9)
      replaces the 1e-9 |b| below by R times the largest reference value of the same kind in
      the row (max_devi_v for the virial columns, max_devi_f for the others): for the fp32
      CUDA engine (tools/gpu-machine/gpu-lammps.sh committee).
  check_model_devi.py same FILE1 FILE2
      byte-identical files (another rank count).
  check_model_devi.py rows FILE REFERENCE_FILE --steps 0,5,...
      FILE has one header, the rows of --steps, each equal to REFERENCE_FILE's row of that step
      (an example against its reference output).
  check_model_devi.py restart APPENDED CONTINUOUS --steps 0,5,10,10,15,20
      APPENDED (a run, write_restart, read_restart, a second run) has one header, the rows of
      --steps in that order, each equal to CONTINUOUS's row of that step.

A printed value a matches a number b when |a - b| <= 0.5 u (1 + 1e-6) + 1e-9 |b|, u one unit in
the last of a's seven printed digits (the file's %18.6e): the rounding of b to the file's digits
plus the project's 1e-9 rule; two printed values match within one unit u.
"""
import json
import sys

HEADER = ("#       step         max_devi_v         min_devi_v         avg_devi_v         max_devi_f"
          "         min_devi_f         avg_devi_f")
COLS = ["max_devi_v", "min_devi_v", "avg_devi_v", "max_devi_f", "min_devi_f", "avg_devi_f"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def unit(text):
    mant, exp = text.lower().split("e")
    return 10.0 ** (int(exp) - (len(mant.split(".")[1]) if "." in mant else 0))


def read(path, atomic):
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        fail(f"{path} is empty")
    want = HEADER + ("      atm_devi_f(N)" if atomic else "")
    if lines[0] != want:
        fail(f"{path}: header\n  {lines[0]!r}\nexpected\n  {want!r}")
    rows = []
    for n, line in enumerate(lines[1:], 2):
        if line.startswith("#"):
            fail(f"{path}:{n}: a second header (the file was truncated and rewritten, or not appended to)")
        if len(line) < 12 + 6 * 19 or line[12] != " ":
            fail(f"{path}:{n}: not deepmd-kit's layout (%12d then ' %18.6e' per value): {line!r}")
        vals = [line[12 + 19 * k: 12 + 19 * (k + 1)] for k in range((len(line) - 12) // 19)]
        if 12 + 19 * len(vals) != len(line) or any(v[0] != " " or len(v.strip()) != 12 for v in vals):
            fail(f"{path}:{n}: not deepmd-kit's layout (%12d then ' %18.6e' per value): {line!r}")
        rows.append((int(line[:12]), [v.strip() for v in vals]))
    return rows


def match(text, b, what, rtol=1e-9, scale=None):
    a = float(text)
    tol = 0.5 * unit(text) * (1 + 1e-6) + rtol * (abs(b) if scale is None else scale)
    if not abs(a - b) <= tol:
        fail(f"{what}: file {text}, deepmd-kit {b!r} (difference {abs(a - b):.3g}, allowed {tol:.3g})")
    return abs(a - b) / unit(text), abs(a - b) / (abs(b) if scale is None else scale) if (scale or b) else 0.0


def steps_arg(args):
    return [int(s) for s in args[args.index("--steps") + 1].split(",")]


def opt(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def check_ref(args):
    path, ref_path = args[0], args[1]
    atomic = "--atomic" in args
    with open(ref_path) as f:
        ref = json.load(f)
    tables = {k: v for k, v in ref["calc_model_devi"].items()}
    tables["relative_v_per_component"] = ref["relative_v_per_component"]
    ft, vt = tables[opt(args, "--force", "plain")], tables[opt(args, "--virial", "plain")]
    steps = steps_arg(args)
    rows = read(path, atomic)
    if [s for s, _ in rows] != steps:
        fail(f"{path}: steps {[s for s, _ in rows]}, expected {steps}")
    frame_of = {fr["step"]: k for k, fr in enumerate(ref["frames"])}
    rtol = float(opt(args, "--rtol", "1e-9"))
    kind = (lambda k, c: None) if "--rtol" not in args else \
        (lambda k, c: abs((vt if c < 3 else ft)[k][1 if c < 3 else 4]))
    worst, worst_rel = 0.0, 0.0
    for step, vals in rows:
        k = frame_of[step]
        n_atoms = ref["natoms"] if atomic else 0
        if len(vals) != 6 + n_atoms:
            fail(f"{path}: step {step}: {len(vals)} values, expected {6 + n_atoms}")
        for c in range(6):
            b = (vt if c < 3 else ft)[k][c + 1]
            u, r = match(vals[c], b, f"{path}: step {step} {COLS[c]}", rtol, kind(k, c))
            worst, worst_rel = max(worst, u), max(worst_rel, r)
        for i in range(n_atoms):
            u, r = match(vals[6 + i], ref["calc_model_devi"]["atomic"][k][i],
                         f"{path}: step {step} atom ID {i + 1}", rtol, kind(k, 3))
            worst, worst_rel = max(worst, u), max(worst_rel, r)
    print(f"OK: {path}: {len(rows)} rows match deepmd-kit 3.2.0 (largest difference {worst:.3f} units of the last "
          f"printed digit, rounding alone allows 0.5; {worst_rel:.2e} relative"
          f"{' to the largest value of its kind' if '--rtol' in args else ''})")


def check_same(args):
    with open(args[0], "rb") as a, open(args[1], "rb") as b:
        if a.read() != b.read():
            fail(f"{args[0]} and {args[1]} differ")
    print(f"OK: {args[0]} and {args[1]} are identical")


def check_restart(args):
    appended, continuous = read(args[0], False), dict(read(args[1], False))
    steps = steps_arg(args)
    if [s for s, _ in appended] != steps:
        fail(f"{args[0]}: steps {[s for s, _ in appended]}, expected {steps}")
    for step, vals in appended:
        for c, (a, b) in enumerate(zip(vals, continuous[step])):
            if abs(float(a) - float(b)) > unit(b) * (1 + 1e-6):
                fail(f"{args[0]}: step {step} {COLS[c]} {a}, {args[1]}: {b}")
    print(f"OK: {args[0]}: one header, steps {steps}, rows equal to those of {args[1]}")


if __name__ == "__main__":
    modes = {"ref": check_ref, "same": check_same, "restart": check_restart, "rows": check_restart}
    if len(sys.argv) < 4 or sys.argv[1] not in modes:
        fail(__doc__)
    modes[sys.argv[1]](sys.argv[2:])
