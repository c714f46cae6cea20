#!/usr/bin/env python3
"""Writes the tiny hand-made checkpoints used by tests/test_checkpoint.cpp.

They mimic torch.save's zip format (protocol-2 data.pkl + data/<key> storages) without
needing torch: fake `torch` modules make pickle emit the same GLOBAL/REDUCE/BINPERSID
opcodes torch does. Each file exercises a case the real deepmd-kit checkpoints do not:
non-contiguous and offset tensors, shared storages, int32/float32/0-d tensors, a bare state
dict, optimizer state with unknown classes and storages that are absent from the archive,
multi-task branches, damaged storages and big-endian byte order.

Run from this directory:  python3 make_synthetic.py
"""
import collections
import pickle
import struct
import sys
import types
import zipfile


def fake_module(name):
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    return mod


torch = fake_module("torch")
torch_utils = fake_module("torch._utils")
torch_optim = fake_module("torch.optim.adam")


def _rebuild_tensor_v2(*args):
    raise NotImplementedError


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2


class Adam:  # stands in for an optimizer object pickled by class (NEWOBJ + BUILD)
    def __init__(self, state):
        self.state = state


Adam.__module__ = "torch.optim.adam"
torch_optim.Adam = Adam

STORAGE_FORMATS = {"FloatStorage": "<f", "DoubleStorage": "<d", "LongStorage": "<q",
                   "IntStorage": "<i"}
for _name in STORAGE_FORMATS:
    _cls = type(_name, (), {"__module__": "torch"})
    setattr(torch, _name, _cls)


class Storage:
    def __init__(self, kind, key, values):
        self.kind, self.key, self.values = kind, key, values

    def raw(self):
        return b"".join(struct.pack(STORAGE_FORMATS[self.kind], v) for v in self.values)


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.kind), obj.key, "cpu", len(obj.values))
        return None


def write(filename, root, storages, byteorder=b"little", truncate=None):
    import io
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(root)
    prefix = filename[:-3]
    with zipfile.ZipFile(filename, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "/data.pkl", buf.getvalue())
        z.writestr(prefix + "/byteorder", byteorder)
        for s in storages:
            raw = s.raw()
            z.writestr(prefix + "/data/" + s.key, raw[:truncate] if truncate else raw)


def state_dict(branches=("Default",)):
    # storage "0": 7 doubles 0.5, 1.5, ..., 6.5
    s0 = Storage("DoubleStorage", "0", [i + 0.5 for i in range(7)])
    s1 = Storage("IntStorage", "1", [-3, 7, 2**31 - 1])
    s2 = Storage("FloatStorage", "2", [0.25, -2.0])
    sd = collections.OrderedDict()
    sd["_extra_state"] = {"model_params": {"type": "dpa4", "rcut": 6.0, "type_map": ["C", "Cu"],
                                           "nested": {"list": [1, 2.5, None, True]}},
                          "train_infos": {"lr": 0.001, "step": 3}}
    for b in branches:
        # (2, 3) view at offset 1 with strides (1, 2): element [i][j] = storage[1 + i + 2 j]
        sd["model.%s.transposed" % b] = Tensor(s0, 1, (2, 3), (1, 2))
        sd["model.%s.shared_tail" % b] = Tensor(s0, 5, (2,), (1,))   # same storage as above
        sd["model.%s.ints" % b] = Tensor(s1, 0, (3,), (1,))
        sd["model.%s.scalar" % b] = Tensor(s2, 1, (), ())           # 0-d float32
        sd["model.%s.empty" % b] = Tensor(s2, 0, (0, 4), (4, 1))
    return sd, [s0, s1, s2]


sd, storages = state_dict()
write("synthetic_bare.pt", sd, storages)

# {"model": ..., "optimizer": ...}: the optimizer is an unknown class holding a tensor whose
# storage "77" is deliberately absent from the archive: a reader must never touch it.
sd, storages = state_dict()
ghost = Storage("DoubleStorage", "77", [1.0, 2.0])
write("synthetic_wrapped.pt",
      {"model": sd, "optimizer": Adam({"exp_avg": Tensor(ghost, 0, (2,), (1,))}), "step": 12},
      storages)

sd, storages = state_dict(branches=("water", "metal"))
write("synthetic_multitask.pt", {"model": sd}, storages)

sd, storages = state_dict()
write("synthetic_short_storage.pt", {"model": sd}, storages, truncate=20)

sd, storages = state_dict()
write("synthetic_missing_storage.pt", {"model": sd}, storages[1:])

sd, storages = state_dict()
write("synthetic_bigendian.pt", {"model": sd}, storages, byteorder=b"big")

# A complete DPA4-Mini model_params (tests/data/mini_float64.pt's) with one option the engines
# refuse, so3_readout "glu" (docs/model-options.md): the front ends' refusal tests load it. The
# config is parsed before any tensor is read, so the state dict carries no weights.
MINI_GLU_PARAMS = {
    "type": "dpa4", "type_map": ["O", "H", "C", "Cu"],
    "descriptor": {
        "rcut": 6.0, "channels": 32, "n_radial": 16, "edge_norm": False, "use_env_seed": True,
        "lmax": 2, "mmax": 1, "n_blocks": 2, "mixing_layers": 3,
        "radial_so2_mode": "degree_channel", "radial_so2_rank": 1, "n_focus": 1, "focus_dim": 0,
        "n_atten_head": 1, "message_node_so3": True, "ffn_neurons": 0, "ffn_so3_grid": True,
        "grid_mlp": False, "grid_branch": [0, 0, 1], "ffn_blocks": 1, "so3_readout": "glu",
        "precision": "float64", "seed": 1234, "type": "dpa4", "sel": 256, "env_exp": [7, 5],
        "basis_type": "bessel", "radial_mlp": [0], "random_gamma": True, "edge_cartesian": False,
        "node_cartesian": "none", "l_schedule": None, "kmax": 1, "m_schedule": None,
        "extra_node_l": 0, "so2_norm": False, "so2_attn_res": "none", "atten_f_mix": False,
        "atten_v_proj": False, "atten_o_proj": False, "sandwich_norm": [False, True, True, False],
        "mlp_bias": False, "layer_scale": False, "full_attn_res": "none", "block_attn_res": "none",
        "s2_activation": [False, True], "node_wise_s2": False, "node_wise_so3": False,
        "message_node_s2": False, "readout_layers": 1, "lebedev_quadrature": True,
        "activation_function": "silu", "glu_activation": True, "use_amp": True,
        "add_chg_spin_ebd": False, "default_chg_spin": None, "exclude_types": [], "eps": 1e-07,
        "trainable": True},
    "fitting_net": {
        "neuron": [0], "precision": "float64", "seed": 1234, "type": "dpa4_ener", "numb_fparam": 0,
        "numb_aparam": 0, "default_fparam": None, "dim_case_embd": 0, "activation_function": "silu",
        "resnet_dt": False, "trainable": True, "rcond": None, "atom_ener": [],
        "use_aparam_as_mask": False, "case_film_embd": False},
    "data_stat_nbatch": 10, "data_stat_protect": 0.01, "data_bias_nsample": 10,
    "pair_exclude_types": [], "atom_exclude_types": [], "preset_out_bias": None,
    "srtab_add_bias": True, "use_compile": False, "enable_tf32": True, "model_branch_alias": [],
    "info": {}, "bridging_method": "None", "bridging_r_inner": 0.5, "bridging_r_outer": 0.8,
    "lora": None}
sd = collections.OrderedDict()
sd["_extra_state"] = {"model_params": MINI_GLU_PARAMS, "train_infos": {"lr": 0.001, "step": 3}}
version = Storage("DoubleStorage", "0", [1.1])
sd["model.Default.atomic_model.descriptor.version_tensor"] = Tensor(version, 0, (), ())
write("synthetic_unsupported.pt", {"model": sd}, [version])
