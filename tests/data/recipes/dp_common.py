"""Helpers shared by the generator scripts of tests/data (run under deepmd-kit 3.2.0)."""
import json
import os

import numpy as np


def write_system(path, cfg, type_map, shift=None):
    """One labelled frame of a reference configuration in deepmd-kit's npy layout; the energy
    label is moved by shift[t] eV per atom of type t when shift is given."""
    os.makedirs(os.path.join(path, "set.000"))
    with open(os.path.join(path, "type.raw"), "w") as f:
        f.write("\n".join(str(t) for t in cfg["types"]) + "\n")
    with open(os.path.join(path, "type_map.raw"), "w") as f:
        f.write("\n".join(type_map) + "\n")
    s = os.path.join(path, "set.000")
    energy = cfg["energy"] + (sum(shift[t] for t in cfg["types"]) if shift else 0.0)
    np.save(os.path.join(s, "coord.npy"), np.array(cfg["coords"]).reshape(1, -1))
    np.save(os.path.join(s, "box.npy"), np.array(cfg["cell"]).reshape(1, 9))
    np.save(os.path.join(s, "energy.npy"), np.array([energy]))
    np.save(os.path.join(s, "force.npy"), np.array(cfg["forces"]).reshape(1, -1))


def write_refs(model_path, ref, out_path, extra=None, label="1.1 file"):
    """deepmd-kit's DeepPot on every configuration of the reference file `ref` (same
    coordinates, cells, types): energy, forces, virial (W_ab = sum_i r_ia F_ib, the LAMMPS sign)
    and atomic energies, in the references' schema; `extra` adds top-level fields."""
    import deepmd
    from deepmd.infer import DeepPot

    dp = DeepPot(model_path)
    out = {"model": os.path.basename(model_path), "deepmd_kit": deepmd.__version__}
    out.update(extra or {})
    out.update({"type_map": dp.get_type_map(), "precision": "float64", "configs": []})
    for c in ref["configs"]:
        coords = np.array(c["coords"]).reshape(1, -1)
        cell = np.array(c["cell"]).reshape(1, 9) if c["periodic"] else None
        e, f, v, ae, _ = dp.eval(coords, cell, np.array(c["types"]), atomic=True)
        out["configs"].append({
            "name": c["name"], "natoms": c["natoms"], "periodic": c["periodic"],
            "cell": c["cell"], "coords": c["coords"], "types": c["types"],
            "energy": float(e.ravel()[0]), "forces": f.ravel().tolist(),
            "virial": v.ravel().tolist(), "atom_energy": ae.ravel().tolist()})
        print(f"  {c['name']}: E = {out['configs'][-1]['energy']:.12f} ({label}: {c['energy']:.12f})")
    with open(out_path, "w") as f:
        json.dump(out, f)
    return out
