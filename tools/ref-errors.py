#!/usr/bin/env python3
"""The error of sezm-eval against deepmd-kit's reference files, one line per model and configuration.

    python3 tools/ref-errors.py SEZM_EVAL REF.json [REF.json ...] [--device cpu|cuda] [--mode lean|fast]
                                [--only NAME ...]

Each REF.json is a reference file of tests/data (schema: tests/data/recipes/README.md): its
"model" is the checkpoint beside it (or one folder up), its configurations are written to a
temporary extended-XYZ file and evaluated with `sezm-eval --json` (plus `--atom-virial` where the
reference has per-atom virials, `--head` / `--charge-spin` where the file or the configuration
names them). Errors are relative to the largest |reference value| of each quantity, the measure
of tests/test_reference.cpp; the last line per file is the maximum over its configurations.
Only the standard library: it runs on the GPU machine too.
"""
import json
import os
import subprocess
import sys
import tempfile

QUANTITIES = ("energy", "atom_energy", "forces", "virial", "atom_virial")


def rel(a, b):
    a = a if isinstance(a, list) else [a]
    b = b if isinstance(b, list) else [b]
    scale = max(abs(x) for x in b)
    err = max(abs(x - y) for x, y in zip(a, b))
    return err / scale if scale > 0 else err


def write_xyz(path, cfg, type_map):
    with open(path, "w") as f:
        f.write(f"{cfg['natoms']}\n")
        if cfg["periodic"]:
            f.write('Lattice="' + " ".join(repr(x) for x in cfg["cell"]) +
                    '" Properties=species:S:1:pos:R:3 pbc="T T T"\n')
        else:
            f.write("Properties=species:S:1:pos:R:3\n")
        for i in range(cfg["natoms"]):
            xyz = cfg["coords"][3 * i:3 * i + 3]
            f.write(type_map[cfg["types"][i]] + " " + " ".join(repr(x) for x in xyz) + "\n")


def model_path(ref_path, ref):
    here = os.path.dirname(os.path.abspath(ref_path))
    for d in (here, os.path.dirname(here)):
        p = os.path.join(d, ref["model"])
        if os.path.exists(p):
            return p
    raise SystemExit(f"{ref_path}: model {ref['model']} not found beside it")


def main(argv):
    exe, refs, extra, only = None, [], [], []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--device", "--mode"):
            extra += [a, argv[i + 1]]
            i += 2
            continue
        if a == "--only":
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                only.append(argv[i])
                i += 1
            continue
        if exe is None:
            exe = a
        else:
            refs.append(a)
        i += 1
    if exe is None or not refs:
        raise SystemExit(__doc__)
    worst_all = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for path in refs:
            ref = json.load(open(path))
            model = model_path(path, ref)
            worst = {q: 0.0 for q in QUANTITIES}
            for cfg in ref["configs"]:
                if only and cfg["name"] not in only:
                    continue
                xyz = os.path.join(tmp, "s.xyz")
                write_xyz(xyz, cfg, ref["type_map"])
                args = [exe, model, xyz, "--json"] + extra
                if "atom_virial" in cfg:
                    args.append("--atom-virial")
                head = cfg.get("head", ref.get("head"))
                if head is not None:
                    args += ["--head", str(head)]
                cs = cfg.get("charge_spin")
                if cs is not None:
                    args += ["--charge-spin", repr(cs[0]), repr(cs[1])]
                run = subprocess.run(args, capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"{os.path.basename(path)} {cfg['name']}: sezm-eval failed: {run.stderr.strip()}")
                    worst_all = float("inf")
                    continue
                got = json.loads(run.stdout)
                line = f"{os.path.basename(path)} {cfg['name']}"
                for q in QUANTITIES:
                    if q in cfg and q in got:
                        e = rel(got[q], cfg[q])
                        worst[q] = max(worst[q], e)
                        line += f" {q} {e:.1e}"
                print(line, flush=True)
            print(f"{os.path.basename(path)} MAX " +
                  " ".join(f"{q} {worst[q]:.1e}" for q in QUANTITIES), flush=True)
            worst_all = max([worst_all] + list(worst.values()))
    print(f"overall max relative error {worst_all:.1e}")


if __name__ == "__main__":
    main(sys.argv[1:])
