#!/usr/bin/env python3
"""A LoRA fine-tuning checkpoint written by deepmd-kit 3.2.0, and 3.2.0's own numbers for it.

Run with deepmd-kit 3.2.0 (`pip install "deepmd-kit[torch]==3.2.0"` in a virtual environment
outside the clone; CPU is enough, about a minute):

    /path/to/venv/bin/python tests/data/recipes/make_lora.py

 1. Fine-tune: `dp --pt train --init-model tests/data/c32_l3_f2_float64.pt` with the same
    model_params plus `lora: {rank: 4, alpha: 8}` runs 3.2.0's trainer for one step on two
    labelled reference frames. The trainer injects its LoRA adapters into every SO3Linear and
    SO2Linear of the model after loading the base weights; the step's checkpoint keeps them
    separate (A_by_l / B_by_l / lora_scaling beside each SO(3) weight, A_m0 / B_m0 / A_m.* /
    B_m.* / lora_scaling beside each SO(2) weight_m0 / weight_m.*) with `lora` in model_params.
 2. Perturb: one training step leaves B nearly zero, so every adapter tensor A and B gets
    seeded random values of a size that moves the energies well away from the base model's
    (a merge that dropped or transposed an adapter would show). Only the model entry is saved
    (no optimizer state): c32_lora.pt. The file is checked to still hold every adapter
    separately and `lora` in its model_params.
 3. References: 3.2.0's DeepPot on every configuration of ../ref_c32_l3_f2_float64.json (same
    coordinates, cells, types): energy, forces, virial (W_ab = sum_i r_ia F_ib, as in the other
    references) and atomic energies -> ref_c32_lora.json. DeepPot builds a plain model and
    folds the adapters into the base weights while loading the state dict; as a cross-check
    the script also evaluates the LoRA-injected model itself (adapters live, scaling
    alpha/rank) on the first configuration and requires the same energy.

Both outputs are committed; the tests never need deepmd-kit.
"""
import json
import os
import subprocess
import sys
import tempfile
import shutil

import torch

from dp_common import write_refs, write_system

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
SRC_MODEL = os.path.join(DATA, "c32_l3_f2_float64.pt")
SRC_REF = os.path.join(DATA, "ref_c32_l3_f2_float64.json")
NAME = "c32_lora"
LORA = {"rank": 4, "alpha": 8.0}
TRAIN_FRAMES = ("cuc_mixed108", "diamond64_rattled")
SEED = 20260814
A_STD = 0.5   # adapter A entries
B_STD = 0.02  # adapter B entries (zero-initialised by deepmd-kit)
ADAPTER_LEAVES = ("A_by_l", "B_by_l", "A_m0", "B_m0")


def is_adapter(key):
    leaf = key.split(".")
    return leaf[-1] in ADAPTER_LEAVES or (len(leaf) > 1 and leaf[-2] in ("A_m", "B_m"))


def finetune(old, params, ref, work):
    by_name = {c["name"]: c for c in ref["configs"]}
    systems = []
    for name in TRAIN_FRAMES:
        systems.append(os.path.join(work, name))
        write_system(systems[-1], by_name[name], ref["type_map"])
    model = {k: v for k, v in params.items() if k not in ("info", "model_branch_alias")}
    model["lora"] = dict(LORA)
    inp = {
        "model": model,
        "learning_rate": {"type": "exp", "start_lr": 1e-4, "stop_lr": 1e-5, "decay_steps": 2},
        "loss": {"type": "ener", "start_pref_e": 1.0, "limit_pref_e": 1.0,
                 "start_pref_f": 1.0, "limit_pref_f": 1.0},
        "training": {"training_data": {"systems": systems, "batch_size": 1},
                     "numb_steps": 1, "save_freq": 1, "disp_freq": 1,
                     "save_ckpt": "model.ckpt", "seed": 7},
    }
    with open(os.path.join(work, "input.json"), "w") as f:
        json.dump(inp, f, indent=1)
    init = os.path.join(work, "init.pt")
    torch.save({"model": old["model"], "optimizer": None}, init)
    dp = os.path.join(os.path.dirname(sys.executable), "dp")
    subprocess.run([dp, "--pt", "train", "input.json", "--init-model", init], cwd=work, check=True)
    return torch.load(os.path.join(work, "model.ckpt-1.pt"), map_location="cpu", weights_only=False)


def perturb(sd):
    gen = torch.Generator().manual_seed(SEED)
    names = sorted(k for k in sd if k != "_extra_state" and is_adapter(k))
    for k in names:
        std = A_STD if k.split(".")[-1].startswith("A") or ".A_m." in k else B_STD
        sd[k] = torch.randn(sd[k].shape, generator=gen, dtype=sd[k].dtype) * std
    return names


def check_saved(path, base_sd):
    sd = torch.load(path, map_location="cpu", weights_only=False)["model"]
    mp = sd["_extra_state"]["model_params"]
    print(f"{os.path.basename(path)}: lora = {mp.get('lora')}")
    assert mp.get("lora") and mp["lora"]["rank"] == LORA["rank"], mp.get("lora")
    adapters = [k for k in sd if k != "_extra_state" and is_adapter(k)]
    scalings = {k: float(v) for k, v in sd.items() if k.endswith("lora_scaling")}
    assert adapters and all(torch.count_nonzero(sd[k]) == sd[k].numel() for k in adapters)
    assert set(scalings.values()) == {LORA["alpha"] / LORA["rank"]}, scalings
    so3 = sum(k.endswith("A_by_l") for k in adapters)
    so2 = sum(k.endswith("A_m0") for k in adapters)
    outside = [k for k in adapters if ".descriptor." not in k]
    print(f"  {len(adapters)} adapter tensors: {so3} SO(3) linears, {so2} SO(2) linears, "
          f"{len(scalings)} lora_scaling, outside the descriptor: {outside}")
    extra = sorted(set(sd) - set(base_sd) - set(adapters) - set(scalings))
    print("  other keys not in the base file:", extra)


def check_live_lora(path, ref0, energy):
    """The LoRA-injected model (adapters not folded) gives DeepPot's energy."""
    from deepmd.pt.model.descriptor.sezm_nn import apply_lora_to_sezm
    from deepmd.pt.train.training import get_model_for_wrapper
    from deepmd.pt.train.wrapper import ModelWrapper

    sd = torch.load(path, map_location="cpu", weights_only=False)["model"]
    params = sd["_extra_state"]["model_params"]
    wrapper = ModelWrapper(get_model_for_wrapper(params), model_params=params)
    apply_lora_to_sezm(wrapper.model["Default"], rank=LORA["rank"], alpha=LORA["alpha"])
    wrapper.load_state_dict(sd)
    model = wrapper.model["Default"].eval()
    coords = torch.tensor(ref0["coords"], dtype=torch.float64).reshape(1, -1, 3)
    cell = torch.tensor(ref0["cell"], dtype=torch.float64).reshape(1, 9) if ref0["periodic"] else None
    atype = torch.tensor(ref0["types"]).reshape(1, -1)
    e = float(model(coords, atype, box=cell)["energy"].ravel()[0])
    print(f"  live LoRA model on {ref0['name']}: E = {e:.12f}, DeepPot {energy:.12f}, "
          f"diff {e - energy:.3e}")
    assert abs(e - energy) <= 1e-9 * abs(energy), (e, energy)


def main():
    import deepmd

    if deepmd.__version__ != "3.2.0":
        sys.exit(f"needs deepmd-kit 3.2.0, found {deepmd.__version__}")
    old = torch.load(SRC_MODEL, map_location="cpu", weights_only=False)
    params = old["model"]["_extra_state"]["model_params"]
    ref = json.load(open(SRC_REF))

    work = tempfile.mkdtemp(prefix="lora-")
    ck = finetune(old, params, ref, work)
    shutil.rmtree(work)
    sd = ck["model"]
    names = perturb(sd)
    print(f"perturbed {len(names)} adapter tensors")
    model = os.path.join(HERE, NAME + ".pt")
    torch.save({"model": sd}, model)
    check_saved(model, old["model"])
    out = write_refs(model, ref, os.path.join(HERE, "ref_" + NAME + ".json"), {"lora": LORA}, "base")
    check_live_lora(model, ref["configs"][0], out["configs"][0]["energy"])


if __name__ == "__main__":
    main()
