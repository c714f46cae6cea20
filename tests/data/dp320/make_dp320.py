#!/usr/bin/env python3
"""A checkpoint saved by deepmd-kit 3.2.0 (descriptor version 1.2) and 3.2.0's own numbers.

Run with deepmd-kit 3.2.0 (`pip install "deepmd-kit[torch]==3.2.0"` in a virtual environment
outside the clone, its bin/ on PATH; CPU is enough, a few minutes):

    python tests/data/dp320/make_dp320.py [--trained DIR]

 1. Migration: loads tests/data/c32_l3_f2_float64.pt (written by the deepmd-kit source of
    2026-08-08, descriptor version 1.1; perturbed random weights) into 3.2.0's model and checks
    that the load-time migration 1.1 -> 1.2 changes no tensor but version_tensor.
 2. Re-save: `dp --pt change-bias -s DATA` (3.2.0's own command; its `-b` form refuses DPA4
    models) fits a new per-type energy bias on two reference frames whose energy labels are
    shifted by BIAS_SHIFT eV per atom of each type, and writes the model back through 3.2.0
    and its torch: c32_l3_f2_float64_dp320.pt (version_tensor 1.2). The bias change makes
    every energy differ from the 1.1 file's.
 3. References: 3.2.0's DeepPot on every configuration of ref_c32_l3_f2_float64.json (same
    coordinates, cells, types): energy, forces, virial (W_ab = sum_i r_ia F_ib, the LAMMPS sign,
    as in the other references) and atomic energies -> ref_c32_l3_f2_float64_dp320.json.
 --trained DIR: also continues the training of the 1.1 file for a few steps with
    `dp --pt train --init-model` (3.2.0's trainer: moved weights, optimizer state, ~16 MB, so
    not committed) and writes that checkpoint and its references into DIR.

Both outputs of steps 2 and 3 are committed; the tests never need deepmd-kit.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes"))
from dp_common import write_refs, write_system  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
SRC_MODEL = os.path.join(DATA, "c32_l3_f2_float64.pt")
SRC_REF = os.path.join(DATA, "ref_c32_l3_f2_float64.json")
NAME = "c32_l3_f2_float64_dp320"
BIAS_SHIFT = (0.25, -0.5)  # eV per atom of C, Cu
TRAIN_FRAMES = ("cuc_mixed108", "diamond64_rattled")
TRAIN_STEPS = 4


def check_migration(old_sd, params):
    from deepmd.pt.train.training import get_model_for_wrapper
    from deepmd.pt.train.wrapper import ModelWrapper

    wrapper = ModelWrapper(get_model_for_wrapper(params))
    wrapper.load_state_dict(old_sd)
    new_sd = wrapper.state_dict()
    changed = [k for k, v in old_sd.items() if k != "_extra_state" and not torch.equal(v, new_sd[k])]
    extra = sorted(set(new_sd) - set(old_sd))
    print("migration 1.1 -> 1.2 changed:", changed, "new keys:", extra)
    assert changed == ["model.Default.atomic_model.descriptor.version_tensor"], changed
    assert not extra, extra


def check_saved(path, old_sd, params):
    ck = torch.load(path, map_location="cpu", weights_only=False)
    sd = ck["model"]
    version = [float(v) for k, v in sd.items() if k.endswith("descriptor.version_tensor")]
    print(f"{os.path.basename(path)}: entries {sorted(ck)}, version_tensor {version}")
    assert version == [1.2], version

    def diff(a, b, pfx=""):
        for k in sorted(set(a) | set(b)):
            if isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
                diff(a[k], b[k], pfx + k + ".")
            elif a.get(k, "<absent>") != b.get(k, "<absent>"):
                print(f"  model_params {pfx}{k}: {a.get(k, '<absent>')!r} -> {b.get(k, '<absent>')!r}")

    print("  model_params differences from the 1.1 file (none printed: same):")
    diff(params, sd["_extra_state"]["model_params"])
    moved = [k for k, v in old_sd.items() if k != "_extra_state" and not torch.equal(v, sd[k])]
    print(f"  tensors differing from the 1.1 file: {len(moved)} of {len(old_sd) - 1}",
          moved if len(moved) < 4 else "")


def train(old, params, ref, out_dir):
    """3.2.0's trainer continues the 1.1 model's training on two labelled reference frames."""
    by_name = {c["name"]: c for c in ref["configs"]}
    work = tempfile.mkdtemp(prefix="dp320-")
    systems = []
    for name in TRAIN_FRAMES:
        systems.append(os.path.join(work, name))
        write_system(systems[-1], by_name[name], ref["type_map"])
    inp = {
        "model": {k: v for k, v in params.items() if k not in ("info", "model_branch_alias")},
        "learning_rate": {"type": "exp", "start_lr": 1e-4, "stop_lr": 1e-5, "decay_steps": 2},
        "loss": {"type": "ener", "start_pref_e": 1.0, "limit_pref_e": 1.0,
                 "start_pref_f": 1.0, "limit_pref_f": 1.0},
        "training": {"training_data": {"systems": systems, "batch_size": 1},
                     "numb_steps": TRAIN_STEPS, "save_freq": TRAIN_STEPS, "disp_freq": 1,
                     "save_ckpt": "model.ckpt", "seed": 7},
    }
    with open(os.path.join(work, "input.json"), "w") as f:
        json.dump(inp, f, indent=1)
    # 3.2.0's trainer reads an "optimizer" entry even for --init-model (which then ignores it);
    # the 1.1 test checkpoint was written without one.
    init = os.path.join(work, "init.pt")
    torch.save({"model": old["model"], "optimizer": None}, init)
    subprocess.run(["dp", "--pt", "train", "input.json", "--init-model", init], cwd=work, check=True)
    os.makedirs(out_dir, exist_ok=True)
    model = os.path.join(out_dir, NAME + "_trained.pt")
    shutil.copyfile(os.path.join(work, f"model.ckpt-{TRAIN_STEPS}.pt"), model)
    shutil.rmtree(work)
    return model


def main():
    import deepmd

    ap = argparse.ArgumentParser()
    ap.add_argument("--trained", metavar="DIR", help="also write a 3.2.0-trained checkpoint here")
    args = ap.parse_args()
    if deepmd.__version__ != "3.2.0":
        sys.exit(f"needs deepmd-kit 3.2.0, found {deepmd.__version__}")
    old = torch.load(SRC_MODEL, map_location="cpu", weights_only=False)
    params = old["model"]["_extra_state"]["model_params"]
    ref = json.load(open(SRC_REF))

    check_migration(old["model"], params)

    model = os.path.join(HERE, NAME + ".pt")
    by_name = {c["name"]: c for c in ref["configs"]}
    data = tempfile.mkdtemp(prefix="dp320-bias-")
    for name in TRAIN_FRAMES:
        write_system(os.path.join(data, name), by_name[name], ref["type_map"], BIAS_SHIFT)
    subprocess.run(["dp", "--pt", "change-bias", SRC_MODEL, "-s", data, "-o", model], check=True)
    shutil.rmtree(data)
    check_saved(model, old["model"], params)
    write_refs(model, ref, os.path.join(HERE, "ref_" + NAME + ".json"))

    if args.trained:
        trained = train(old, params, ref, args.trained)
        check_saved(trained, old["model"], params)
        write_refs(trained, ref, os.path.join(args.trained, "ref_" + NAME + "_trained.json"))


if __name__ == "__main__":
    main()
