#!/usr/bin/env python3
"""A test committee for the model-deviation output (pair_style sezm M1 M2 ... out_freq N) and
deepmd-kit 3.2.0's own model deviations on it.

Run with deepmd-kit 3.2.0 (`pip install "deepmd-kit[torch]==3.2.0"`, CPU is enough, about a
minute):

    python tests/data/model_devi/make_committee.py

Writes, next to this file:
 - mini_devi{1,2,3}.pt: copies of tests/data/recipes/mini_f64.pt (deepmd-kit's DPA4-Mini recipe,
   channels 8, type_map C Cu O H, perturbed weights; see tests/data/recipes/README.md) whose
   floating parameters and out_bias are multiplied elementwise by (1 + SCALE * N(0, 1)), a seeded
   draw per copy. NOT a trained committee: the four models (mini_f64.pt first) only disagree
   the way a committee does, by a few per cent of the forces.
 - frames.data, frames.dump: one 36-atom C/Cu/O/H system in a triclinic cell (all three tilts,
   smaller than 2 rcut), four frames (steps 0, 5, 10, 15: rattled positions, cell scaled),
   a LAMMPS data file (types 1..4 = C Cu O H = the model's type indices + 1) and a text dump
   with full-precision coordinates for `rerun ... dump x y z box yes`.
 - ref_model_devi.json: per frame the coordinates and cell (as written to the dump), and
   deepmd-kit 3.2.0's numbers: each model's energy, forces and virial from
   `DeepPot(model).eval(coords, cell, types)`, and `deepmd.infer.model_devi.calc_model_devi`
   (the function behind `dp model-devi`) on the four models: plain (with atomic=True), with
   `relative` RELATIVE_F, and with `relative_v` RELATIVE_V (one frame per call: 3.2.0's
   calc_model_devi_v fails on several frames with relative_v, a numpy broadcast error). pair_style deepmd (LAMMPS) scales
   the virial deviation per component instead (source/lmp/pair_deepmd.cpp: compute_relative_std
   with stride 1, |Vbar_c| + E) where calc_model_devi_v divides by the norm of the mean virial;
   that variant ("relative_v_per_component") is computed here with numpy from deepmd-kit's own
   per-model virials, by the pair style's formula.
"""
import datetime
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)  # tests/data
sys.path.insert(0, os.path.join(DATA, "recipes"))
from make_recipes import param_names  # noqa: E402  (3.2.0's floating parameters of a model)

BASE = os.path.join(DATA, "recipes", "mini_f64.pt")
MEMBERS = ["mini_devi1.pt", "mini_devi2.pt", "mini_devi3.pt"]
SCALE = 0.03
STEPS = [0, 5, 10, 15]
RELATIVE_F = 0.5   # eV/A
RELATIVE_V = 0.05  # eV per atom
TYPE_MAP = ["C", "Cu", "O", "H"]


def make_member(path, seed):
    ck = torch.load(BASE, map_location="cpu", weights_only=False)
    sd = ck["model"]
    names = param_names(sd["_extra_state"]["model_params"]) | {"atomic_model.out_bias"}
    gen = torch.Generator().manual_seed(seed)
    for n in sorted(names):
        key = f"model.Default.{n}"
        t = sd[key]
        noise = torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)
        sd[key] = t * (1 + SCALE * noise)
    torch.save(ck, path)
    print(f"  {os.path.basename(path)}: {len(names)} tensors perturbed by {SCALE} relative (seed {seed})")


def make_frames():
    """36 atoms on a rattled 3 x 3 x 4 grid of a triclinic cell; per frame a new rattle and scale."""
    rng = np.random.default_rng(20261202)
    cell0 = np.array([[6.9, 0, 0], [0.8, 6.9, 0], [-0.6, 0.5, 9.2]])
    frac = np.array([[(i + 0.5) / 3, (j + 0.5) / 3, (k + 0.5) / 4]
                     for i in range(3) for j in range(3) for k in range(4)])
    types = np.array([0] * 14 + [1] * 8 + [2] * 8 + [3] * 6)
    rng.shuffle(types)
    frames = []
    for f, step in enumerate(STEPS):
        cell = cell0 * (1 + 0.02 * (f - 1.5))
        coords = frac @ cell + rng.normal(scale=0.1, size=frac.shape)
        frames.append({"step": step, "cell": cell.reshape(9).tolist(),
                       "coords": coords.reshape(-1).tolist(), "types": types.tolist()})
    return frames


def g(v):  # shortest round-trip text of a double: LAMMPS's strtod reads back the same value
    return repr(float(v))


def write_lammps(frames):
    c = np.array(frames[0]["cell"]).reshape(3, 3)
    x = np.array(frames[0]["coords"]).reshape(-1, 3)
    n = len(x)
    with open(os.path.join(HERE, "frames.data"), "w") as fp:
        fp.write("36 C/Cu/O/H atoms, triclinic (tests/data/model_devi/make_committee.py); first frame\n\n")
        fp.write(f"{n} atoms\n4 atom types\n\n")
        fp.write(f"0 {g(c[0, 0])} xlo xhi\n0 {g(c[1, 1])} ylo yhi\n0 {g(c[2, 2])} zlo zhi\n")
        fp.write(f"{g(c[1, 0])} {g(c[2, 0])} {g(c[2, 1])} xy xz yz\n\n")
        fp.write("Masses\n\n1 12.011\n2 63.546\n3 15.999\n4 1.008\n\nAtoms # atomic\n\n")
        for i, (t, p) in enumerate(zip(frames[0]["types"], x)):
            fp.write(f"{i + 1} {t + 1} {g(p[0])} {g(p[1])} {g(p[2])}\n")
    with open(os.path.join(HERE, "frames.dump"), "w") as fp:
        for fr in frames:
            c = np.array(fr["cell"]).reshape(3, 3)
            x = np.array(fr["coords"]).reshape(-1, 3)
            lx, ly, lz, xy, xz, yz = c[0, 0], c[1, 1], c[2, 2], c[1, 0], c[2, 0], c[2, 1]
            # LAMMPS's dump box of a triclinic cell with lo = 0: the bounding box and the tilts.
            fp.write(f"ITEM: TIMESTEP\n{fr['step']}\nITEM: NUMBER OF ATOMS\n{len(x)}\n")
            fp.write("ITEM: BOX BOUNDS xy xz yz pp pp pp\n")
            fp.write(f"{g(min(0, xy, xz, xy + xz))} {g(lx + max(0, xy, xz, xy + xz))} {g(xy)}\n")
            fp.write(f"{g(min(0, yz))} {g(ly + max(0, yz))} {g(xz)}\n")
            fp.write(f"0 {g(lz)} {g(yz)}\nITEM: ATOMS id type x y z\n")
            for i, (t, p) in enumerate(zip(fr["types"], x)):
                fp.write(f"{i + 1} {t + 1} {g(p[0])} {g(p[1])} {g(p[2])}\n")


def per_component_relative_v(virials, natoms, eps):
    """pair_style deepmd's virial deviation with `relative_v eps` (pair_deepmd.cpp): per
    component std over models of W/N, divided by |mean| + eps; max, min, sqrt(mean of squares)."""
    v = np.asarray(virials) / natoms                 # models x frames x 9
    s = np.std(v, axis=0) / (np.abs(np.mean(v, axis=0)) + eps)
    return np.max(s, -1), np.min(s, -1), np.sqrt(np.mean(s * s, -1))


def main():
    import deepmd
    from deepmd.infer import DeepPot
    from deepmd.infer.model_devi import calc_model_devi

    for k, m in enumerate(MEMBERS):
        make_member(os.path.join(HERE, m), 1801 + k)
    frames = make_frames()
    write_lammps(frames)
    paths = [BASE] + [os.path.join(HERE, m) for m in MEMBERS]
    dps = [DeepPot(p) for p in paths]
    assert all(dp.get_type_map() == TYPE_MAP for dp in dps)
    coords = np.array([f["coords"] for f in frames])
    cells = np.array([f["cell"] for f in frames])
    types = np.array(frames[0]["types"])
    natoms = len(types)
    per_model = []
    for dp in dps:
        e, f, v = dp.eval(coords, cells, types)
        per_model.append({"energy": e.reshape(-1).tolist(), "forces": f.reshape(len(frames), -1).tolist(),
                          "virial": v.reshape(len(frames), 9).tolist()})
    plain = calc_model_devi(coords, cells, types, dps, atomic=True)
    rel_f = calc_model_devi(coords, cells, types, dps, relative=RELATIVE_F)
    # 3.2.0's calc_model_devi_v cannot apply `relative_v` to several frames at once (it divides
    # the (frames, 9) deviations by a (frames,) norm: a numpy broadcast error): one frame a call.
    rel_v = np.vstack([calc_model_devi(coords[i:i + 1], cells[i:i + 1], types, dps, relative_v=RELATIVE_V)
                       for i in range(len(frames))])
    vir = [pm["virial"] for pm in per_model]
    mx, mn, av = per_component_relative_v(vir, natoms, RELATIVE_V)
    rel_v_pc = plain[:, :8].copy()
    rel_v_pc[:, 1], rel_v_pc[:, 2], rel_v_pc[:, 3] = mx, mn, av
    for r in (plain, rel_f, rel_v, rel_v_pc):
        r[:, 0] = STEPS
    cols = "step max_devi_v min_devi_v avg_devi_v max_devi_f min_devi_f avg_devi_f devi_e".split()
    fmax = max(np.abs(np.array(pm["forces"])).max() for pm in per_model)
    print(f"  max|F| {fmax:.3f} eV/A; max_devi_f per frame {plain[:, 4]}; max_devi_v {plain[:, 1]}")
    out = {
        "made_by": "tests/data/model_devi/make_committee.py", "deepmd_kit": deepmd.__version__,
        "date": datetime.date.today().isoformat(),
        "models": [os.path.relpath(p, HERE) for p in paths], "type_map": TYPE_MAP,
        "scale": SCALE, "natoms": natoms, "relative_f": RELATIVE_F, "relative_v": RELATIVE_V,
        "frames": frames, "per_model": per_model, "columns": cols,
        "calc_model_devi": {
            "plain": plain[:, :8].tolist(), "atomic": plain[:, 8:].tolist(),
            "relative_f": rel_f.tolist(), "relative_v": rel_v.tolist()},
        "relative_v_per_component": rel_v_pc.tolist(),
    }
    with open(os.path.join(HERE, "ref_model_devi.json"), "w") as fp:
        json.dump(out, fp, indent=1)
    print("  wrote ref_model_devi.json")


if __name__ == "__main__":
    main()
