#!/usr/bin/env python3
"""deepmd-kit 3.2.0's numbers, per-atom virials included, for the existing test checkpoints.

Run with deepmd-kit 3.2.0 (`pip install "deepmd-kit[torch]==3.2.0"` in a virtual environment
outside the clone; CPU is enough, a few minutes per model):

    python tests/data/recipes/make_existing.py [MODEL ...]     # default: all of MODELS

For each checkpoint of tests/data/ (random perturbed weights written by the deepmd-kit source
of 2026-08-08) it evaluates `deepmd.infer.DeepPot(...).eval(coords, cells, types, atomic=True)`
on
 (a) configurations of tests/data/ref_<model>.json (same coordinates, cells, types), printing
     how far 3.2.0's energy / atomic energies / forces / virial are from that file's;
 (b) new configurations (NEW_CONFIGS): triclinic cells with all three tilts non-zero (one
     smaller than 2 rcut, so periodic self-images are neighbours, one larger), mixed C/Cu,
     rattled; one Cu atom alone in a large periodic box and one alone with no cell;
and writes tests/data/recipes/ref3_<model>.json in the schema of the other references
(schema in tests/data/recipes/README.md) plus "atom_virial": [9N], deepmd-kit's per-atom virials.

Conventions (checked here on every frame, the script stops otherwise):
 - virial: W_ab = sum_i r_i,a F_i,b (the LAMMPS sign), 9 values row-major, = sum of atom_virial;
 - atom_virial: deepmd-kit 3.2.0's SeZM edge path (pt/model/model/transform_output.py): each
   edge e (receiver dst, sender src, edge_vec = r_src - r_dst, g_e = dE/d edge_vec) carries
   w_e[k, j] = -g_e,k edge_vec_e,j (k: force component = row, j: coordinate component =
   column), half on each endpoint, periodic images folded onto their atom. This is the
   project's convention too (src/engine/engine.cpp assemble_forces_virial).
Cells are lower-triangular (rows a = (lx,0,0), b = (xy,ly,0), c = (xz,yz,lz), tilts within
LAMMPS's limits) so that the same configurations run in LAMMPS.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
MODELS = {  # model -> existing configs to re-evaluate (None: all)
    "c32_l3_f2_float64": None,
    "c32_l3_f2_float32": None,
    "defaults_float64": ["cuc_cluster32_open", "cuc_mixed108"],  # slow model: a few configs
}


def lattice_config(name, cell, grid, rng, rattle, cu_fraction):
    """Grid points in fractional coordinates of a (triclinic) cell, rattled, mixed types."""
    cell = np.asarray(cell, dtype=float).reshape(3, 3)
    n0, n1, n2 = grid
    frac = np.array([[(i + 0.5 * (j % 2)) / n0, (j + 0.5 * (k % 2)) / n1, k / n2]
                     for i in range(n0) for j in range(n1) for k in range(n2)])
    coords = frac @ cell + rng.normal(scale=rattle, size=frac.shape)
    types = (rng.random(len(frac)) < cu_fraction).astype(int)
    return {"name": name, "periodic": True, "cell": cell.reshape(9).tolist(),
            "coords": coords.reshape(-1).tolist(), "types": types.tolist()}


def new_configs():
    rng = np.random.default_rng(20261201)
    out = []
    # 5.6 x 5.3 x 5.9 A, tilts xy xz yz all non-zero: smaller than 2 rcut (12 A), self-images
    # are neighbours; 12 atoms.
    out.append(lattice_config("tric_small12", [5.6, 0, 0, 1.3, 5.3, 0, -0.9, 0.7, 5.9],
                              (2, 2, 3), rng, 0.12, 0.5))
    # 12.6 x 12.9 x 13.2 A (> 2 rcut), tilts all non-zero; 5 x 5 x 5 grid, 125 atoms.
    out.append(lattice_config("tric_large125", [12.6, 0, 0, -2.1, 12.9, 0, 1.7, -2.6, 13.2],
                              (5, 5, 5), rng, 0.15, 0.4))
    # One Cu atom, alone: in a periodic box larger than 2 rcut (no neighbours) and with no cell.
    out.append({"name": "single_cu_box", "periodic": True,
                "cell": [14.0, 0, 0, 0.5, 14.5, 0, -0.3, 0.4, 15.0],
                "coords": [3.25, 7.5, 1.125], "types": [1]})
    out.append({"name": "single_c_open", "periodic": False, "cell": None,
                "coords": [0.25, -1.5, 2.0], "types": [0]})
    return out


def rel(a, b):
    a, b = np.asarray(a, float).reshape(-1), np.asarray(b, float).reshape(-1)
    s = np.max(np.abs(b))
    return float(np.max(np.abs(a - b)) / (s if s > 0 else 1.0))


def evaluate(dp, c, tol, charge_spin=None):
    """DeepPot on one configuration (with the frame's [charge, spin] when given), checked for the
    conventions below; make_recipes.py uses it too."""
    n = len(c["types"])
    x = np.asarray(c["coords"], float).reshape(1, 3 * n)
    cell = None if c["cell"] is None else np.asarray(c["cell"], float).reshape(1, 9)
    kw = {} if charge_spin is None else {"charge_spin": np.asarray(charge_spin, float).reshape(1, 2)}
    e, f, v, ae, av = dp.eval(x, cell, np.asarray(c["types"]), atomic=True, **kw)
    r = {"energy": float(np.asarray(e).reshape(-1)[0]), "forces": np.asarray(f, float).reshape(-1).tolist(),
         "virial": np.asarray(v, float).reshape(-1).tolist(),
         "atom_energy": np.asarray(ae, float).reshape(-1).tolist(),
         "atom_virial": np.asarray(av, float).reshape(-1).tolist()}
    # Conventions: sum of atom_virial = virial; E = sum AE; open: virial = sum r (x) F.
    av9 = np.asarray(r["atom_virial"]).reshape(n, 9)
    assert rel(av9.sum(0), r["virial"]) < tol, ("sum av != v", rel(av9.sum(0), r["virial"]))
    assert abs(sum(r["atom_energy"]) - r["energy"]) <= tol * max(1.0, np.abs(r["atom_energy"]).sum())
    if cell is None and n > 1:
        X, F = x.reshape(n, 3), np.asarray(r["forces"]).reshape(n, 3)
        assert rel(np.einsum("ia,ib->ab", X, F).reshape(9), r["virial"]) < tol
    return r


def main(models):
    from deepmd.infer import DeepPot

    for m in models:
        old = json.load(open(os.path.join(DATA, f"ref_{m}.json")))
        dp = DeepPot(os.path.join(DATA, old["model"]))
        assert list(dp.get_type_map()) == old["type_map"]
        keep = MODELS[m]
        tol = 1e-12 if old["precision"] == "float64" else 1e-5
        configs = []
        worst = {}
        for c in old["configs"]:
            if keep is not None and c["name"] not in keep:
                continue
            r = evaluate(dp, c, tol)
            d = {"energy": rel(r["energy"], c["energy"]), "atom_energy": rel(r["atom_energy"], c["atom_energy"]),
                 "forces": rel(r["forces"], c["forces"]), "virial": rel(r["virial"], c["virial"])}
            print(f"{m} {c['name']}: 3.2.0 vs ref_{m}.json (relative to max |ref|): "
                  + " ".join(f"{k} {v:.2e}" for k, v in d.items()), flush=True)
            for k, v in d.items():
                worst[k] = max(worst.get(k, 0.0), v)
            configs.append({"name": c["name"], "natoms": c["natoms"], "periodic": c["periodic"],
                            "cell": c["cell"], "coords": c["coords"], "types": c["types"], **r})
        print(f"{m}: max over the existing configs: " + " ".join(f"{k} {v:.2e}" for k, v in worst.items()))
        for c in new_configs():
            r = evaluate(dp, c, tol)
            print(f"{m} {c['name']}: N={len(c['types'])} E={r['energy']:.12g} "
                  f"max|F|={np.max(np.abs(r['forces'])):.3g} max|W|={np.max(np.abs(r['virial'])):.3g}", flush=True)
            configs.append({"name": c["name"], "natoms": len(c["types"]), "periodic": c["periodic"],
                            "cell": c["cell"], "coords": c["coords"], "types": c["types"], **r})
        out = {"model": "../" + old["model"], "type_map": old["type_map"], "precision": old["precision"],
               "deepmd_kit": "3.2.0", "configs": configs}
        path = os.path.join(HERE, f"ref3_{m}.json")
        with open(path, "w") as fp:
            json.dump(out, fp)
            fp.write("\n")
        print("wrote", path, os.path.getsize(path), "bytes", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODELS))
