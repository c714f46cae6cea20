#!/usr/bin/env python3
"""Small perturbed checkpoints of deepmd-kit's DPA4 recipes and deepmd-kit 3.2.0's numbers for them.

Run with deepmd-kit 3.2.0 (`pip install "deepmd-kit[torch]==3.2.0"` in a virtual environment
outside the clone; CPU is enough, a few minutes per family):

    /path/to/venv/bin/python tests/data/recipes/make_recipes.py [FAMILY ...]   # default: all
    /path/to/venv/bin/python tests/data/recipes/make_recipes.py --list
    /path/to/venv/bin/python tests/data/recipes/make_recipes.py --example OUT.pt

The recipes are deepmd-kit's examples/water/dpa4/ (input.json = DPA4-Mini, input-zbl.json,
input_multitask.json, lora_ft.json). Every family keeps its recipe's distinguishing options and
shrinks only the sizes (channels, n_radial) so that each checkpoint stays small. For each family:

 1. Make: 3.2.0's own trainer (`dp --pt train`) runs ONE step from scratch on labelled frames
    (synthetic labels; they only seed the energy-bias statistics), so the checkpoint is exactly
    what 3.2.0 writes for that input (model_params as 3.2.0 normalises and stores them; for
    multitask, its shared-parameter links and case embeddings; for LoRA, --init-model on the
    base and adapters injected by the trainer).
 2. Perturb: a fresh DPA4 model has many all-zero tensors and one step barely moves them, so
    every floating parameter, the energy bias out_bias and the fitting's bias_atom_e get seeded
    random changes (perturb()); tensors that multitask branches share get the SAME change in
    every branch. The script checks that every one moved and that no floating tensor is
    all-zero, and prints a summary. Only the model entry is saved (no optimizer state).
 3. References: 3.2.0's `deepmd.infer.DeepPot(model[, head=...]).eval(coords, cells, types,
    atomic=True[, charge_spin=[[q, m]]])` on the family's configurations -> ref_<family>.json
    (schema in README.md: energy, forces, virial, atom_energy, atom_virial per configuration,
    virial with the LAMMPS sign W_ab = sum_i r_ia F_ib), checked for the same conventions as
    make_existing.py.

Outputs <family>.pt and ref_<family>.json next to this file; the tests never need deepmd-kit.
"""
import argparse
import copy
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from dp_common import write_system  # noqa: E402
from make_existing import evaluate as existing_evaluate, new_configs, rel  # noqa: E402

# Types: C and Cu first so that make_existing.new_configs() (types 0 = C, 1 = Cu) is used as it
# is; O and H for the water-like configurations of the recipes. ZBL takes Z from these symbols.
TYPE_MAP = ["C", "Cu", "O", "H"]
C, CU, O, H = range(4)
SEED = 20261201

# ---------------------------------------------------------------------------------------------
# Descriptors
# ---------------------------------------------------------------------------------------------


def mini_descriptor(precision, channels=8, n_radial=6):
    """examples/water/dpa4/input.json's descriptor (DPA4-Mini), sizes shrunk, seed changed."""
    return {
        "rcut": 6.0, "channels": channels, "n_radial": n_radial, "edge_norm": False,
        "use_env_seed": True, "lmax": 2, "mmax": 1, "n_blocks": 2, "mixing_layers": 3,
        "radial_so2_mode": "degree_channel", "radial_so2_rank": 1, "n_focus": 1,
        "focus_dim": 0, "n_atten_head": 1, "message_node_so3": True, "ffn_neurons": 0,
        "ffn_so3_grid": True, "grid_mlp": False, "grid_branch": [0, 0, 1], "ffn_blocks": 1,
        "so3_readout": "mlp", "use_amp": True, "precision": precision, "seed": 42,
    }


def plain_descriptor(precision, channels=8, n_radial=6, focus_dim=16):
    """The option set of tests/data/c32_l3_f2_float64.pt (lmax 3, mmax 1, n_focus 2, edge_norm,
    so3_readout none, ...: none of the Mini options), sizes shrunk; focus_dim != channels so that
    a swapped dimension shows, and n_focus * focus_dim = 32, a width the CUDA engine takes."""
    return {
        "rcut": 6.0, "channels": channels, "n_radial": n_radial, "lmax": 3, "mmax": 1,
        "n_blocks": 2, "mixing_layers": 3, "radial_so2_mode": "degree_channel",
        "radial_so2_rank": 1, "n_focus": 2, "focus_dim": focus_dim, "n_atten_head": 1,
        "so3_readout": "none", "use_env_seed": True, "edge_norm": True, "use_amp": True,
        "precision": precision, "seed": 1234,
    }


def fitting(precision, **kw):
    return {"neuron": [0], "precision": precision, "seed": 42, **kw}


def single_model(descriptor, precision, **extra):
    return {"type": "dpa4", "type_map": list(TYPE_MAP), "descriptor": descriptor,
            "fitting_net": fitting(precision), "use_compile": False, "enable_tf32": True, **extra}


ZBL = {"bridging_method": "zbl", "bridging_r_inner": 0.5, "bridging_r_outer": 0.8}


def multitask_model(descriptor, precision, branches, dim_case_embd):
    """input_multitask.json's layout: one shared descriptor, one shared case-conditioned
    (FiLM) fitting net, branches with aliases."""
    model_dict = {}
    for name, alias in branches:
        model_dict[name] = {"type": "dpa4", "type_map": "type_map", "descriptor": "descriptor",
                            "fitting_net": "shared_fit_with_id", "model_branch_alias": alias,
                            "info": {"description": f"branch {name} (test)"}}
    return {
        "use_compile": False, "enable_tf32": True,
        "shared_dict": {
            "type_map": list(TYPE_MAP),
            "descriptor": dict(descriptor, type="dpa4"),
            "shared_fit_with_id": {"type": "dpa4_ener", "neuron": [0], "precision": precision,
                                   "dim_case_embd": dim_case_embd, "case_film_embd": True,
                                   "seed": 42},
        },
        "model_dict": model_dict,
    }


# ---------------------------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------------------------


def _cfg(name, coords, types, cell=None):
    coords = np.asarray(coords, float).reshape(-1, 3)
    return {"name": name, "periodic": cell is not None,
            "cell": None if cell is None else np.asarray(cell, float).reshape(9).tolist(),
            "coords": coords.reshape(-1).tolist(), "types": [int(t) for t in types]}


def _water(rng, n, box=None, centre=None, spread=None):
    """n rigid-ish water molecules (O-H 0.96 A, HOH 104.5 deg), random orientations, O atoms on
    a jittered grid in a triclinic box or around a centre."""
    out, types = [], []
    if box is not None:
        cell = np.asarray(box, float).reshape(3, 3)
        m = int(np.ceil(n ** (1 / 3)))
        grid = [(i, j, k) for i in range(m) for j in range(m) for k in range(m)][:n]
        centres = [(np.array(g, float) + 0.5) / m @ cell for g in grid]
    else:
        centres = [np.asarray(centre, float) + v for v in spread]
    a = np.deg2rad(104.5) / 2
    local = np.array([[0, 0, 0], [0.96 * np.sin(a), 0, 0.96 * np.cos(a)],
                      [-0.96 * np.sin(a), 0, 0.96 * np.cos(a)]])
    for c in centres:
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        w, x, y, z = q
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        out.extend(local @ R.T + c + rng.normal(scale=0.03, size=(3, 3)))
        types.extend([O, H, H])
    return np.array(out), types


def water_configs():
    rng = np.random.default_rng(SEED + 1)
    out = []
    cell = [6.3, 0, 0, 0.8, 6.1, 0, -0.6, 0.5, 6.5]  # < 2 rcut: self-images are neighbours
    x, t = _water(rng, 8, box=cell)
    out.append(_cfg("water_tric24", x, t, cell))
    spread = [np.array(v) for v in ([0, 0, 0], [2.8, 0.3, 0.1], [0.2, 2.9, -0.3], [2.6, 2.7, 0.4])]
    x, t = _water(rng, 4, centre=[1.0, -0.5, 0.25], spread=spread)
    out.append(_cfg("water_cluster12_open", x, t))
    # single H2O with one Cu and one C nearby: all four types in one open frame
    x, t = _water(rng, 1, centre=[0, 0, 0], spread=[np.zeros(3)])
    x = np.vstack([x, [[2.1, 0.4, -0.3], [-1.6, 1.5, 0.9]]])
    out.append(_cfg("h2o_cu_c_open", x, t + [CU, C]))
    return out


def zbl_configs():
    """Pairs inside r_inner (0.5 A), between r_inner and r_outer (0.8 A), and normal ones."""
    rng = np.random.default_rng(SEED + 2)
    out = []
    # Open: H-H 0.33 (inside), C-O 0.45 (inside), O-H 0.61 and C-Cu 0.74 (transition), every
    # other pair >= 2 A apart.
    x = np.array([[0.0, 0.0, 0.0], [0.32, 0.0, 0.0],            # H-H 0.32
                  [3.0, 0.0, 0.0], [3.0, 0.45, 0.0],            # C-O 0.45
                  [0.0, 3.2, 0.0], [0.62 * 0.6, 3.2 + 0.62 * 0.8, 0.0],  # O-H 0.62
                  [1.6, 1.5, 2.0], [1.6, 1.5, 2.74],            # C-Cu 0.74
                  [-1.5, 1.2, 1.0], [3.2, 2.8, -1.4]])
    t = [H, H, C, O, O, H, C, CU, CU, O]
    out.append(_cfg("zbl_open10", x + rng.normal(scale=0.004, size=x.shape), t))
    # Periodic triclinic, < 2 rcut: a Cu-Cu pair at 0.48 A ACROSS the periodic boundary (one
    # atom near the a = 0 face, its partner moved by -0.48 A and wrapped by +a), an O-H pair
    # at 0.70 A, a C with two H inside r_inner (0.42, 0.46 A: several frozen edges on one
    # source; the two H are 0.62 A apart) and normal atoms (>= 1.98 A).
    cell = np.array([[5.8, 0, 0], [0.9, 5.6, 0], [-0.7, 0.6, 6.0]])
    frac = np.array([[0.02, 0.3, 0.3], [0.55, 0.55, 0.55], [0.3, 0.8, 0.2],
                     [0.75, 0.2, 0.7], [0.2, 0.25, 0.8]])
    base = frac @ cell
    cu_a = base[0]
    cu_b = cu_a + np.array([-0.46, 0.13, 0.0]) + cell[0]  # image pair at 0.478 A
    oh = base[1] + np.array([0.0, 0.70, 0.0])
    c0 = base[2]
    h1 = c0 + np.array([0.42, 0.0, 0.0])
    h2 = c0 + np.array([0.0, -0.23, 0.46 * np.sqrt(1 - 0.25)])
    pts = [cu_a, cu_b, base[1], oh, c0, h1, h2, base[3], base[4]]
    typ = [CU, CU, O, H, C, H, H, CU, O]
    pts = np.array(pts) + rng.normal(scale=0.003, size=(len(pts), 3))
    out.append(_cfg("zbl_tric9", pts, typ, cell.reshape(9)))
    # A larger periodic frame with one pair in the transition zone among normal neighbours.
    cell = [8.4, 0, 0, -1.1, 8.2, 0, 0.8, -0.9, 8.6]
    rng2 = np.random.default_rng(SEED + 3)
    g = np.array([(i, j, k) for i in range(3) for j in range(3) for k in range(3)], float)
    x = (g + 0.5) / 3 @ np.asarray(cell).reshape(3, 3) + rng2.normal(scale=0.1, size=g.shape)
    t = list(rng2.integers(0, 4, size=len(g)))
    x = np.vstack([x, x[13] + np.array([0.35, 0.4, -0.3])])  # |d| = 0.61 A from atom 13
    t = t + [H]
    out.append(_cfg("zbl_tric28", x, t, cell))
    return out


def pair_distances(c, below=1.0):
    """The pair distances below `below` A, periodic images included (a diagnostic)."""
    x = np.asarray(c["coords"]).reshape(-1, 3)
    shifts = [np.zeros(3)]
    if c["periodic"]:
        cell = np.asarray(c["cell"]).reshape(3, 3)
        shifts = [np.array([i, j, k]) @ cell for i in (-1, 0, 1) for j in (-1, 0, 1)
                  for k in (-1, 0, 1)]
    d = []
    for i in range(len(x)):
        for j in range(i, len(x)):
            for s in shifts:
                if i == j and not s.any():
                    continue
                r = float(np.linalg.norm(x[j] + s - x[i]))
                if r < below:
                    d.append((round(r, 3), i, j))
    return sorted(d)


def train_frames():
    """Two periodic frames holding all four types, with synthetic labels (E = sum of per-type
    constants + noise, small random forces); they only seed 3.2.0's bias statistics."""
    rng = np.random.default_rng(SEED + 4)
    frames = []
    for k, cell in enumerate(([7.0, 0, 0, 0.6, 6.8, 0, -0.4, 0.5, 7.2],
                              [6.6, 0, 0, -0.7, 6.9, 0, 0.3, -0.6, 6.4])):
        g = np.array([(i, j, l) for i in range(3) for j in range(3) for l in range(2)], float)
        x = (g + 0.5) / [3, 3, 2] @ np.asarray(cell).reshape(3, 3) + rng.normal(scale=0.1, size=g.shape)
        t = [int(v) for v in rng.permutation(np.arange(len(g)) % 4)]
        e = float(sum((-4.0, -3.0, -6.0, -2.5)[v] for v in t) + rng.normal(scale=0.5))
        frames.append(dict(_cfg(f"train{k}", x, t, cell), energy=e,
                           forces=rng.normal(scale=0.2, size=3 * len(t)).tolist()))
    return frames


# ---------------------------------------------------------------------------------------------
# Make (3.2.0's trainer, one step) and perturb
# ---------------------------------------------------------------------------------------------


def write_train_system(path, frame, charge_spin=None):
    write_system(path, frame, TYPE_MAP)
    if charge_spin is not None:  # frame label read by 3.2.0 when the model has no default
        np.save(os.path.join(path, "set.000", "charge_spin.npy"),
                np.asarray(charge_spin, float).reshape(1, 2))


def run_trainer(model, work, branches=None, charge_spin=None, init_model=None):
    """3.2.0's trainer, one step; returns the step's checkpoint (a dict with "model")."""
    systems = []
    for f in train_frames():
        systems.append(os.path.join(work, f["name"]))
        write_train_system(systems[-1], f, charge_spin)
    loss = {"type": "ener", "start_pref_e": 1.0, "limit_pref_e": 1.0,
            "start_pref_f": 1.0, "limit_pref_f": 1.0}
    training = {"numb_steps": 1, "save_freq": 1, "disp_freq": 1, "save_ckpt": "model.ckpt",
                "seed": 7}
    inp = {"model": model,
           "learning_rate": {"type": "exp", "start_lr": 1e-4, "stop_lr": 1e-5, "decay_steps": 2}}
    if branches:
        inp["loss_dict"] = {b: dict(loss) for b in branches}
        training["model_prob"] = {b: 1.0 for b in branches}
        training["data_dict"] = {b: {"training_data": {"systems": systems, "batch_size": 1}}
                                 for b in branches}
    else:
        inp["loss"] = loss
        training["training_data"] = {"systems": systems, "batch_size": 1}
    inp["training"] = training
    with open(os.path.join(work, "input.json"), "w") as f:
        json.dump(inp, f, indent=1)
    cmd = [os.path.join(os.path.dirname(sys.executable), "dp"), "--pt", "train", "input.json"]
    if init_model:
        cmd += ["--init-model", init_model]
    subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL)
    return torch.load(os.path.join(work, "model.ckpt-1.pt"), map_location="cpu", weights_only=False)


def _gen(tag):
    return torch.Generator().manual_seed(SEED + zlib.crc32(tag.encode()))


def _randn(t, gen):
    return torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)


def perturbed(key, t, gen):
    """The perturbed value of parameter `key` (value t after 3.2.0's one training step).
    Every entry gets Gaussian noise of std max(half the tensor's spread, a natural size): 0.3 /
    (fan_out fan_in)^(1/4) for matrices, 0.25 for scales and vectors, 0.05 for biases. (One
    step moves a zero-initialised tensor to ~1e-4 only: without the floor those would stay
    near zero and the model would barely depend on the geometry.)"""
    leaf = key.split(".")[-1]
    if leaf.endswith("_log"):  # FiLM strengths, exp() of it, initially log(0.01)
        return t + (1.5 + 1.5 * torch.rand(t.shape, generator=gen, dtype=torch.float64)).to(t.dtype)
    if leaf.endswith("freqs"):  # radial basis frequencies: keep their order of magnitude
        return t * (1 + 0.1 * _randn(t, gen))
    spread = float(t.double().std()) if t.numel() > 1 else 0.0
    if leaf == "bias":
        natural = 0.05
    elif t.dim() <= 1 or "scale" in leaf or min(t.shape) == 1:
        natural = 0.25
    else:
        natural = 0.3 / (t.shape[-1] * t.shape[-2]) ** 0.25
    return t + max(0.5 * spread, natural) * _randn(t, gen)


def param_names(model_params):
    """Names (state-dict keys below "model.<branch>.") of the floating parameters of one
    branch built by 3.2.0 from its stored model_params."""
    from deepmd.pt.model.model import get_model

    m = get_model(copy.deepcopy(model_params))
    return {n for n, p in m.named_parameters(remove_duplicate=False) if p.is_floating_point()}


def perturb(sd, shared_prefixes=(), desc_gain=1.0):
    """Perturb the state dict `sd` in place: every floating parameter, out_bias, bias_atom_e.
    Keys whose part after "model.<branch>." starts with one of `shared_prefixes` get the same
    change in every branch (their values are equal in every branch to start with: checked).
    desc_gain multiplies the perturbed descriptor weights (not scales, FiLM strengths, radial
    frequencies): the Mini descriptor's grid products make its geometry dependence grow very
    fast with the weight size (here max|F| on tric_small12 ~1e-3 eV/A at gain 1, ~0.4 at 1.7,
    ~300 at 2.5), so its families use 1.7."""
    params = sd["_extra_state"]["model_params"]
    branches = list(params["model_dict"]) if "model_dict" in params else ["Default"]
    init = {k: v.clone() for k, v in sd.items() if torch.is_tensor(v)}
    moved = []
    for b in branches:
        names = param_names(params["model_dict"][b] if "model_dict" in params else params)
        names |= {"atomic_model.out_bias", "atomic_model.fitting_net.bias_atom_e"}
        for n in sorted(names):
            key = f"model.{b}.{n}"
            shared = n.startswith(tuple(shared_prefixes)) and "bias_atom_e" not in n
            if shared:
                for b2 in branches:
                    assert torch.equal(init[key], init[f"model.{b2}.{n}"]), ("not shared", key, b2)
            gen = _gen(n if shared else key)
            if n == "atomic_model.out_bias":
                v = init[key] + 1.0 * _randn(init[key], gen)
            elif n == "atomic_model.fitting_net.bias_atom_e":
                v = init[key] + 0.3 * _randn(init[key], gen)
            else:
                v = perturbed(n, init[key], gen)
                leaf = n.split(".")[-1]
                if (n.startswith("atomic_model.descriptor.") and "scale" not in leaf
                        and not leaf.endswith(("_log", "freqs"))):
                    v = v * desc_gain
            sd[key] = v
            moved.append(key)
    # Checks: every perturbed tensor moved in every entry; no floating tensor is all-zero.
    stuck = [k for k in moved if sd[k].numel() and bool((sd[k] == init[k]).any())]
    assert not stuck, ("entries not moved", stuck)
    tiny = [k for k in moved if sd[k].numel() and float(sd[k].abs().max()) < 0.02]
    assert not tiny, ("near-zero tensors", tiny)
    zero = [k for k, v in sd.items() if torch.is_tensor(v) and v.is_floating_point()
            and v.numel() and not bool(v.any())]
    assert not zero, ("all-zero tensors", zero)
    fl = [k for k, v in sd.items() if torch.is_tensor(v) and v.is_floating_point()]
    untouched = sorted(set(fl) - set(moved))
    nel = sum(sd[k].numel() for k in moved)
    print(f"  perturbed {len(moved)} tensors ({nel} values) in {len(branches)} branch(es); "
          f"floating tensors left as 3.2.0 wrote them (buffers): "
          f"{sorted({k.split('.', 2)[-1] for k in untouched})}")
    return moved


# ---------------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------------


def evaluate(dp, c, tol, charge_spin=None):
    """3.2.0's DeepPot on one configuration, with make_existing.py's convention checks; a lone
    atom must have no forces and no virial."""
    r = existing_evaluate(dp, c, tol, charge_spin)
    if len(c["types"]) == 1:
        assert not np.any(r["forces"]) and not np.any(r["virial"])
    return r


def entry(c, r, **extra):
    return {"name": c["name"], "natoms": len(c["types"]), "periodic": c["periodic"],
            "cell": c["cell"], "coords": c["coords"], "types": c["types"], **extra, **r}


ZBL_A = (0.18175, 0.50986, 0.28022, 0.028171)
ZBL_B = (3.1998, 0.94229, 0.4029, 0.20162)
Z_OF = {"H": 1, "C": 6, "O": 8, "Cu": 29}


def zbl_numpy(c, type_map, rcut=6.0):
    """The ZBL term written out independently (README: ZBL): every pair closer than rcut,
    half of its energy on each atom. Returns energy, atom energies, forces, virial, atom
    virials (each directed edge's -g_k d_j, half on each endpoint, as in the README)."""
    x = np.asarray(c["coords"], float).reshape(-1, 3)
    z = np.array([Z_OF[type_map[t]] for t in c["types"]], float)
    n = len(x)
    shifts = [np.zeros(3)]
    if c["periodic"]:
        cell = np.asarray(c["cell"]).reshape(3, 3)
        shifts = [np.array([i, j, k]) @ cell for i in range(-2, 3) for j in range(-2, 3)
                  for k in range(-2, 3)]
    S = np.array(shifts)
    ae, f, w, av = np.zeros(n), np.zeros((n, 3)), np.zeros((3, 3)), np.zeros((n, 3, 3))
    for i in range(n):  # receiver i, senders j (all images)
        d = (x[None, :, :] + S[:, None, :] - x[i]).reshape(-1, 3)
        zj = np.tile(z, len(S))
        src = np.tile(np.arange(n), len(S))
        r = np.linalg.norm(d, axis=1)
        keep = (r > 1e-8) & (r < rcut)
        d, zj, src, r = d[keep], zj[keep], src[keep], r[keep]
        a = 0.88534 * 0.5291772109 / (z[i] ** 0.23 + zj ** 0.23)
        phi = sum(p * np.exp(-q * r / a) for p, q in zip(ZBL_A, ZBL_B))
        dphi = sum(-p * q / a * np.exp(-q * r / a) for p, q in zip(ZBL_A, ZBL_B))
        k = 14.3996 * z[i] * zj
        e, de = k * phi / r, k * (dphi / r - phi / r ** 2)
        ae[i] += 0.5 * e.sum()               # each directed edge: half to its receiver
        g = (0.5 * de / r)[:, None] * d      # d(0.5 e)/d(edge vector)
        np.add.at(f, src, -g)
        f[i] += g.sum(0)
        w -= d.T @ g                         # W_ab = -sum_e edge_a g_b (symmetric here)
        we = -g[:, :, None] * d[:, None, :]  # per edge [k, j] = -g_k d_j
        av[i] += 0.5 * we.sum(0)
        np.add.at(av, src, 0.5 * we)
    return ae.sum(), ae, f.reshape(-1), w.reshape(-1), av.reshape(-1)


def zbl_split(dp, c, r, tol):
    """3.2.0's own ZBL share: the same DeepPot with the model's inter_potential removed gives
    the learned part; the difference (ZBL) is compared with zbl_numpy()."""
    model = dp.deep_eval.dp.model["Default"]
    pot = model.inter_potential
    model.inter_potential = None
    try:
        learned = evaluate(dp, c, tol)
    finally:
        model.inter_potential = pot
    diff = {k: np.asarray(r[k]) - np.asarray(learned[k]) for k in
            ("energy", "atom_energy", "forces", "virial", "atom_virial")}
    e, ae, f, w, av = zbl_numpy(c, dp.get_type_map())
    err = {"energy": rel(diff["energy"], e) if e else abs(diff["energy"]),
           "atom_energy": rel(diff["atom_energy"], ae), "forces": rel(diff["forces"], f) if np.any(f) else float(np.abs(diff["forces"]).max()),
           "virial": rel(diff["virial"], w) if np.any(w) else float(np.abs(diff["virial"]).max()),
           "atom_virial": rel(diff["atom_virial"], av) if np.any(av) else float(np.abs(diff["atom_virial"]).max())}
    print(f"    ZBL part: E_zbl = {e:.10g} eV of E = {r['energy']:.10g}; 3.2.0 vs written-out ZBL: "
          + " ".join(f"{k} {v:.1e}" for k, v in err.items()))
    assert max(err.values()) < 1e-9, err
    return {"zbl_energy": float(diff["energy"]), "zbl_atom_energy": diff["atom_energy"].tolist()}


# ---------------------------------------------------------------------------------------------
# Families
# ---------------------------------------------------------------------------------------------

MINI_GAIN = 1.7                            # perturb(): see there
CS_DEFAULT = [-1, 2]                       # chgspin_plain_f64's default_chg_spin
CS_STATES = ([0, 1], [1, 2], [-2, 3])      # explicit (charge, multiplicity) pairs


def _by(configs, *names):
    d = {c["name"]: c for c in configs}
    return [d[n] for n in names]


def family(name):
    """name -> dict(model=<model section>, recipe, configs, ...)."""
    f64, f32 = "float64", "float32"
    base = new_configs() + water_configs()
    if name in ("mini_f64", "mini_f32"):
        p = f64 if name.endswith("64") else f32
        return dict(model=single_model(mini_descriptor(p), p), precision=p,
                    recipe="input.json", configs=base, desc_gain=MINI_GAIN)
    if name in ("zbl_plain_f64", "zbl_mini_f64"):
        d = plain_descriptor(f64) if "plain" in name else mini_descriptor(f64)
        return dict(model=single_model(d, f64, **ZBL), precision=f64,
                    recipe="input-zbl.json", configs=zbl_configs() + new_configs(), zbl=True,
                    desc_gain=1.0 if "plain" in name else MINI_GAIN)
    if name in ("chgspin_plain_f64", "chgspin_mini_f64"):
        plain = "plain" in name
        d = plain_descriptor(f64) if plain else mini_descriptor(f64)
        d["add_chg_spin_ebd"] = True
        if plain:
            d["default_chg_spin"] = list(CS_DEFAULT)
        runs = []
        default = [None] if plain else []
        for c in base:
            if c["name"] in ("tric_small12", "water_tric24", "h2o_cu_c_open"):
                states = list(CS_STATES) + default + ([] if plain else [[0, 0], [3, 4]])
            elif c["name"] == "tric_large125":
                states = [[1, 2]]
            else:
                states = [[0, 1], [-2, 3]] + default
            runs += [(c, s) for s in states]
        return dict(model=single_model(d, f64), precision=f64,
                    recipe="input.json + descriptor.add_chg_spin_ebd", runs=runs,
                    train_charge_spin=None if plain else [0, 1],
                    desc_gain=1.0 if plain else MINI_GAIN)
    if name == "multitask_plain_f64":
        # two branches (each branch stores its own copy of the shared tensors), no "Default"
        branches = [("cu_bulk", ["CuBulk", "bulk"]), ("carbon", [])]
        return dict(model=multitask_model(plain_descriptor(f64), f64, branches, 2), precision=f64,
                    recipe="input_multitask.json", configs=base, branches=branches,
                    head_requests=["cu_bulk", "carbon", "CUBULK", "bulk", "Carbon", 0, 1, None,
                                   "Default", "nope"])
    if name == "multitask_mini_f64":
        branches = [("water_1", ["Default", "Water"]), ("water_2", ["Water2"])]
        return dict(model=multitask_model(mini_descriptor(f64), f64, branches, 2), precision=f64,
                    recipe="input_multitask.json", configs=base, branches=branches,
                    desc_gain=MINI_GAIN,
                    head_requests=["water_1", "water_2", None, "Default", "default", "water",
                                   "WATER2", 1, "Water_1"])
    if name == "lora_f32":
        return dict(model=single_model(plain_descriptor(f32), f32), precision=f32,
                    recipe="lora_ft.json (lora on the plain option set)", configs=base,
                    lora={"rank": 4, "alpha": 8.0})
    raise SystemExit(f"unknown family {name}")


FAMILIES = ["zbl_plain_f64", "chgspin_plain_f64", "multitask_plain_f64", "zbl_mini_f64",
            "chgspin_mini_f64", "multitask_mini_f64", "mini_f64", "mini_f32", "lora_f32"]


def make_checkpoint(name, fam):
    """Steps 1-2: 3.2.0's trainer for one step, then perturb; writes <name>.pt."""
    work = tempfile.mkdtemp(prefix=f"recipe-{name}-")
    try:
        branches = [b for b, _ in fam.get("branches", [])]
        ck = run_trainer(copy.deepcopy(fam["model"]), work, branches,
                         fam.get("train_charge_spin"))
        sd = ck["model"]
        shared = ("atomic_model.descriptor.", "atomic_model.fitting_net.") if branches else ()
        perturb(sd, shared, fam.get("desc_gain", 1.0))
        if "lora" in fam:
            sd = make_lora_from(sd, fam["lora"], work, branches)
    finally:
        shutil.rmtree(work)
    path = os.path.join(HERE, name + ".pt")
    torch.save({"model": sd}, path)
    print(f"  wrote {path}: {os.path.getsize(path)} bytes")
    return path


def make_lora_from(base_sd, lora, work, branches):
    """make_lora.py's procedure on a perturbed base: 3.2.0's trainer with --init-model and
    `lora` for one step (adapters injected), then make_lora.perturb() on every adapter."""
    import make_lora

    params = copy.deepcopy(base_sd["_extra_state"]["model_params"])
    init = os.path.join(work, "base.pt")
    torch.save({"model": base_sd, "optimizer": None}, init)
    lw = os.path.join(work, "lora")
    os.makedirs(lw)
    model = {k: v for k, v in params.items() if k not in ("info", "model_branch_alias")}
    model["lora"] = dict(lora)
    sd = run_trainer(model, lw, branches, init_model=init)["model"]
    names = make_lora.perturb(sd)
    mp = sd["_extra_state"]["model_params"]
    assert mp.get("lora") == lora, mp.get("lora")
    scal = {float(v) for k, v in sd.items() if k.endswith("lora_scaling")}
    assert scal == {lora["alpha"] / lora["rank"]}, scal
    base_moved = [k for k in base_sd if k != "_extra_state" and k in sd
                  and not torch.equal(base_sd[k], sd[k])]
    print(f"  LoRA: {len(names)} adapter tensors perturbed; base tensors changed by the "
          f"fine-tuning step: {len(base_moved)} (kept: the checkpoint is what 3.2.0 wrote)")
    zero = [k for k, v in sd.items() if torch.is_tensor(v) and v.is_floating_point()
            and v.numel() and not bool(v.any())]
    assert not zero, zero
    return sd


def check_load(path):
    """The file loads into 3.2.0's model for every branch with no missing/unexpected key."""
    from deepmd.pt.model.model import get_model
    from deepmd.pt.train.wrapper import ModelWrapper

    sd = torch.load(path, map_location="cpu", weights_only=True)["model"]
    params = sd["_extra_state"]["model_params"]
    if "model_dict" in params:
        models = {b: get_model(copy.deepcopy(p)) for b, p in params["model_dict"].items()}
    else:
        models = get_model(copy.deepcopy(params))
    w = ModelWrapper(models, model_params=params)
    missing, unexpected = w.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return params


def references(name, fam, path):
    """Step 3: ref_<name>.json."""
    import deepmd
    from deepmd.infer import DeepPot

    tol = 1e-12 if fam["precision"] == "float64" else 1e-5
    params = check_load(path)
    out = {"model": os.path.basename(path), "type_map": list(TYPE_MAP),
           "precision": fam["precision"], "deepmd_kit": deepmd.__version__,
           "recipe": "deepmd-kit examples/water/dpa4/" + fam["recipe"],
           "made_by": "tests/data/recipes/make_recipes.py " + name,
           "date": datetime.date.today().isoformat(), "configs": []}
    if fam.get("zbl"):
        out["bridging"] = {k: fam["model"][k] for k in ZBL}
    if "lora" in fam:
        out["lora"] = fam["lora"]
    if "branches" in fam:
        out["heads"] = {b: a for b, a in fam["branches"]}
        for b, _ in fam["branches"]:
            dp = DeepPot(path, head=b)
            assert list(dp.get_type_map()) == TYPE_MAP
            for c in fam["configs"]:
                r = evaluate(dp, c, tol)
                out["configs"].append(entry(c, r, head=b))
                out["configs"][-1]["name"] = f"{c['name']}@{b}"
                print(f"  [{b}] {c['name']}: N={len(c['types'])} E={r['energy']:.12g} "
                      f"max|F|={np.max(np.abs(r['forces'])):.3g}", flush=True)
        out["head_resolution"] = head_resolution(path, fam, out["configs"])
    elif "runs" in fam:
        dp = DeepPot(path)
        out["default_chg_spin"] = fam["model"]["descriptor"].get("default_chg_spin")
        assert dp.has_chg_spin_ebd() and dp.has_default_chg_spin() == (out["default_chg_spin"] is not None)
        for c, cs in fam["runs"]:
            r = evaluate(dp, c, tol, cs)
            tag = "default" if cs is None else f"q{cs[0]}_m{cs[1]}".replace("-", "n")
            e = entry(c, r, charge_spin=cs)
            e["name"] = f"{c['name']}@{tag}"
            out["configs"].append(e)
            print(f"  {e['name']}: E={r['energy']:.12g} max|F|={np.max(np.abs(r['forces'])):.3g}",
                  flush=True)
        if out["default_chg_spin"] is None:  # no default: 3.2.0 refuses a frame without one
            try:
                evaluate(dp, fam["runs"][0][0], tol)
                raise AssertionError("no charge_spin accepted without a default")
            except ValueError as err:
                out["without_charge_spin"] = f"ValueError: {err}"
                print("  without charge_spin:", out["without_charge_spin"])
        else:  # the default equals passing it explicitly
            c = fam["runs"][0][0]
            e0 = evaluate(dp, c, tol)["energy"]
            e1 = evaluate(dp, c, tol, out["default_chg_spin"])["energy"]
            assert e0 == e1, (e0, e1)
    else:
        dp = DeepPot(path)
        assert list(dp.get_type_map()) == TYPE_MAP
        for c in fam["configs"]:
            r = evaluate(dp, c, tol)
            extra = zbl_split(dp, c, r, tol) if fam.get("zbl") else {}
            out["configs"].append(entry(c, r, **extra))
            print(f"  {c['name']}: N={len(c['types'])} E={r['energy']:.12g} "
                  f"max|F|={np.max(np.abs(r['forces'])):.3g}", flush=True)
        if "lora" in fam:
            check_live_lora(path, fam["configs"][0], out["configs"][0]["energy"], fam["lora"])
        if fam["precision"] == "float32":
            out["float32_vs_float64_twin"] = f32_conditioning(path, out["configs"])
    ref = os.path.join(HERE, f"ref_{name}.json")
    with open(ref, "w") as fp:
        json.dump(out, fp)
        fp.write("\n")
    print(f"  wrote {ref}: {os.path.getsize(ref)} bytes, {len(out['configs'])} configurations")
    return out


def f32_conditioning(path, configs):
    """How far 3.2.0's float32 numbers are from the same weights evaluated in float64 (the
    float32 rounding level a float32 engine can be held to): max over the configurations of
    |f32 - f64| / max|f64| per quantity."""
    from deepmd.infer import DeepPot

    ck = torch.load(path, map_location="cpu", weights_only=False)
    sd = ck["model"]
    mp = copy.deepcopy(sd["_extra_state"]["model_params"])
    mp["descriptor"]["precision"] = "float64"
    mp["fitting_net"]["precision"] = "float64"
    sd64 = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
            for k, v in sd.items()}
    sd64["_extra_state"] = dict(sd["_extra_state"], model_params=mp)
    fd, tmp = tempfile.mkstemp(suffix=".pt")
    os.close(fd)
    try:
        torch.save({"model": sd64}, tmp)
        dp = DeepPot(tmp)
        worst = {}
        for c in configs:
            r = evaluate(dp, c, 1e-12)
            for k in ("energy", "forces", "virial", "atom_energy", "atom_virial"):
                if np.any(r[k]):
                    worst[k] = max(worst.get(k, 0.0), rel(c[k], r[k]))
    finally:
        os.remove(tmp)
    print("  float32 file vs its float64 twin: " + " ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    return worst


def check_live_lora(path, c, energy, lora):
    """make_lora.py's cross-check in float32: the LoRA-injected model (adapters live, scaling
    alpha/rank) gives DeepPot's (adapters folded) energy to float32 rounding."""
    from deepmd.pt.model.descriptor.sezm_nn import apply_lora_to_sezm
    from deepmd.pt.train.training import get_model_for_wrapper
    from deepmd.pt.train.wrapper import ModelWrapper

    sd = torch.load(path, map_location="cpu", weights_only=False)["model"]
    params = sd["_extra_state"]["model_params"]
    wrapper = ModelWrapper(get_model_for_wrapper(params), model_params=params)
    apply_lora_to_sezm(wrapper.model["Default"], rank=lora["rank"], alpha=lora["alpha"])
    wrapper.load_state_dict(sd)
    model = wrapper.model["Default"].eval()
    x = torch.tensor(c["coords"], dtype=torch.float64).reshape(1, -1, 3)
    cell = torch.tensor(c["cell"], dtype=torch.float64).reshape(1, 9) if c["periodic"] else None
    e = float(model(x, torch.tensor(c["types"]).reshape(1, -1), box=cell)["energy"].ravel()[0])
    print(f"  live LoRA model on {c['name']}: E = {e:.9g}, DeepPot {energy:.9g}, "
          f"relative difference {abs(e - energy) / abs(energy):.1e}")
    assert abs(e - energy) <= 1e-5 * abs(energy), (e, energy)


def head_resolution(path, fam, configs):
    """How DeepPot(model, head=request) resolves each request: evaluated on one small
    configuration and matched (to 1e-12, DeepPot's run-to-run scatter) against the per-branch
    energies, which differ by far more."""
    from deepmd.infer import DeepPot

    c = _by(fam["configs"], "h2o_cu_c_open")[0]
    energies = {e["head"]: e["energy"] for e in configs if e["name"] == f"{c['name']}@{e['head']}"}
    res = []
    for req in fam["head_requests"]:
        try:
            dp = DeepPot(path, head=req)
        except (AssertionError, ValueError, KeyError) as err:
            res.append({"request": req, "branch": None,
                        "error": f"{type(err).__name__}: {str(err).splitlines()[0]}"})
            print(f"  head={req!r}: {res[-1]['error']}")
            continue
        e = evaluate(dp, c, 1e-5)["energy"]
        hit = [b for b, v in energies.items() if abs(v - e) <= 1e-12 * abs(v)]
        assert len(hit) == 1, (req, e, energies)
        res.append({"request": req, "branch": hit[0]})
        print(f"  head={req!r} -> {hit[0]}")
    return res


def make_example(out_path):
    """An untrained example of the tutorial's model (input.json as it is: water, O H, channels
    32, float32): 3.2.0's trainer, one step on water frames, model entry only."""
    rng = np.random.default_rng(SEED + 9)
    work = tempfile.mkdtemp(prefix="recipe-example-")
    try:
        systems = []
        for k in range(2):
            cell = [6.3 + 0.2 * k, 0, 0, 0.5, 6.2, 0, -0.4, 0.3, 6.4]
            x, t = _water(rng, 8, box=cell)
            frame = dict(_cfg(f"w{k}", x, [0 if v == O else 1 for v in t], cell),
                         energy=-14.0 * 8 + float(rng.normal()),
                         forces=rng.normal(scale=0.2, size=3 * len(t)).tolist())
            systems.append(os.path.join(work, frame["name"]))
            write_system(systems[-1], frame, ["O", "H"])
        d = mini_descriptor("float32", channels=32, n_radial=16)
        model = {"type": "dpa4", "type_map": ["O", "H"], "descriptor": d,
                 "fitting_net": fitting("float32"), "use_compile": False, "enable_tf32": True}
        inp = {"model": model,
               "learning_rate": {"type": "exp", "start_lr": 1e-4, "stop_lr": 1e-5, "decay_steps": 2},
               "loss": {"type": "ener", "start_pref_e": 1.0, "limit_pref_e": 1.0,
                        "start_pref_f": 1.0, "limit_pref_f": 1.0},
               "training": {"training_data": {"systems": systems, "batch_size": 1},
                            "numb_steps": 1, "save_freq": 1, "save_ckpt": "model.ckpt", "seed": 7}}
        with open(os.path.join(work, "input.json"), "w") as f:
            json.dump(inp, f, indent=1)
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "dp"), "--pt", "train",
                        "input.json"], cwd=work, check=True, stdout=subprocess.DEVNULL)
        ck = torch.load(os.path.join(work, "model.ckpt-1.pt"), map_location="cpu", weights_only=False)
    finally:
        shutil.rmtree(work)
    torch.save({"model": ck["model"]}, out_path)
    print(f"wrote {out_path}: {os.path.getsize(out_path)} bytes")


def main():
    import deepmd

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("families", nargs="*", help=f"default: all of {FAMILIES}")
    ap.add_argument("--list", action="store_true", help="list the families")
    ap.add_argument("--refs-only", action="store_true",
                    help="keep the committed <family>.pt, recompute ref_<family>.json only")
    ap.add_argument("--example", metavar="OUT.pt", help="write the untrained tutorial example")
    args = ap.parse_args()
    if args.list:
        print("\n".join(FAMILIES))
        return
    if deepmd.__version__ != "3.2.0":
        sys.exit(f"needs deepmd-kit 3.2.0, found {deepmd.__version__}")
    if args.example:
        make_example(args.example)
        return
    for name in args.families or FAMILIES:
        fam = family(name)
        print(f"== {name}", flush=True)
        path = os.path.join(HERE, name + ".pt")
        if not args.refs_only:
            path = make_checkpoint(name, fam)
        references(name, fam, path)


if __name__ == "__main__":
    main()
