#!/usr/bin/env python3
"""Small DPA4-Mini variants written by deepmd-kit 3.2.0, and 3.2.0's own numbers for them.

The Mini checkpoint of tests/data (mini_float64.pt) exercises one setting of each SO(3) grid
net: the message-node grid product (glu), the branch FFN with one branch, the MLP read-out, at
lmax 2 and kmax 1. These variants reach the other settings the engines accept
(docs/model-options.md): the message-node MLP and branch nets, several router branches (the
softmax live), the FFN's glu and MLP nets, kmax 0 and 2, lmax 1 and 3, a focus width below the
channel count, and Mini with some nets off.

Run with deepmd-kit 3.2.0 (`pip install "deepmd-kit[torch]==3.2.0"`, CPU is enough, a few
minutes):

    /path/to/venv/bin/python tests/data/mini_variants/make_mini_variants.py

For each variant: the model_params of ../mini_float64.pt with the listed descriptor keys
changed (16 channels), a model built by deepmd-kit from them, every parameter perturbed with
seeded random values (deepmd-kit initialises several to zero) and a non-zero per-type energy
bias; only the model entry is saved (<name>.pt). Its references: deepmd-kit's DeepPot on three
configurations of ../ref_mini_float64.json (same coordinates, cells, types): energy, forces,
virial (W_ab = sum_i r_ia F_ib, as in the other references) and atomic energies ->
ref_<name>.json. Both are committed; the tests never need deepmd-kit.
"""
import copy
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
CONFIGS = ("cuc_cluster32_open", "diamond64_rattled", "water192_lmp")
SEED = 20261201

VARIANTS = {
    # message-node grid MLP, FFN grid product (glu), frames up to |k| = 2
    "mini_v_mlp_k2": {"grid_mlp": [False, True, False], "grid_branch": 0, "kmax": 2},
    # message-node branch net (2 branches), FFN branch net (3 branches): router softmax live; lmax 3
    "mini_v_branch_l3": {"grid_branch": [0, 2, 3], "lmax": 3, "kmax": 1},
    # FFN grid MLP, message-node product, kmax 0 (one frame), lmax 1, focus width 8 < 16 channels
    "mini_v_ffnmlp_k0": {"grid_mlp": [False, False, True], "grid_branch": 0, "kmax": 0, "lmax": 1,
                         "focus_dim": 8},
    # only the SO(3)-grid FFN (branch, 1 branch): no message-node net, the plain read-out
    "mini_v_ffn_only": {"message_node_so3": False, "so3_readout": "none"},
}


def perturb(sd, names, gen):
    for k in sorted(names):
        p = sd[k]
        noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
        leaf = k.split(".")[-1]
        if "scale" in leaf or leaf.endswith("strength_log"):
            sd[k] = p + 0.1 * noise  # norm scales, residual scales, FiLM strengths
        elif p.dim() >= 2:
            sd[k] = p + noise * (0.5 / np.sqrt(p.shape[-2]))
        else:
            sd[k] = p * (1 + 0.05 * noise) + 0.05 * torch.randn(p.shape, generator=gen, dtype=p.dtype)


def references(model_path, ref, out_path, changes):
    import deepmd
    from deepmd.infer import DeepPot

    dp = DeepPot(model_path)
    out = {"model": os.path.basename(model_path), "deepmd_kit": deepmd.__version__,
           "descriptor_changes": changes, "type_map": dp.get_type_map(), "precision": "float64",
           "configs": []}
    for c in ref["configs"]:
        if c["name"] not in CONFIGS:
            continue
        coords = np.array(c["coords"]).reshape(1, -1)
        cell = np.array(c["cell"]).reshape(1, 9) if c["periodic"] else None
        e, f, v, ae, _ = dp.eval(coords, cell, np.array(c["types"]), atomic=True)
        out["configs"].append({
            "name": c["name"], "natoms": c["natoms"], "periodic": c["periodic"],
            "cell": c["cell"], "coords": c["coords"], "types": c["types"],
            "energy": float(e.ravel()[0]), "forces": f.ravel().tolist(),
            "virial": v.ravel().tolist(), "atom_energy": ae.ravel().tolist()})
        print(f"  {c['name']}: E = {out['configs'][-1]['energy']:.12f}")
    with open(out_path, "w") as f:
        json.dump(out, f)


def main():
    import deepmd
    from deepmd.pt.model.model import get_model
    from deepmd.pt.train.wrapper import ModelWrapper

    if deepmd.__version__ != "3.2.0":
        sys.exit(f"needs deepmd-kit 3.2.0, found {deepmd.__version__}")
    base = torch.load(os.path.join(DATA, "mini_float64.pt"), map_location="cpu", weights_only=False)["model"]
    ref = json.load(open(os.path.join(DATA, "ref_mini_float64.json")))
    gen = torch.Generator().manual_seed(SEED)
    for name, changes in VARIANTS.items():
        params = copy.deepcopy(base["_extra_state"]["model_params"])
        params["descriptor"]["channels"] = 16
        params["descriptor"].update(changes)
        torch.manual_seed(SEED)
        wrapper = ModelWrapper(get_model(params), model_params=params)
        sd = wrapper.state_dict()
        names = [n for n, _ in wrapper.named_parameters()]
        perturb(sd, names, gen)
        for k in sd:
            if k.endswith("out_bias") or k.endswith("bias_atom_e"):
                sd[k] = torch.randn(sd[k].shape, generator=gen, dtype=sd[k].dtype)
        path = os.path.join(HERE, name + ".pt")
        torch.save({"model": sd}, path)
        print(f"{name}: {changes}, {len(names)} parameters perturbed")
        references(path, ref, os.path.join(HERE, "ref_" + name + ".json"), changes)


if __name__ == "__main__":
    main()
