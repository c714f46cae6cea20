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
