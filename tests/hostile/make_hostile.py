#!/usr/bin/env python3
"""Writes hostile checkpoints for tests/test_hostile_checkpoint.cpp and the fuzz crash corpus.

Each file is a real torch.save checkpoint altered programmatically (never hand-edited bytes):
data.pkl is decoded with pickle (fake `torch` globals, no torch needed), one thing is changed
(a storage's element count, a tensor's shape/stride/offset, a weight's bytes, nesting injected
into the pickle stream), and the archive is written back in torch.save's layout. Every case is
one that crashed, exhausted memory or gave a silently wrong answer before the reader was
hardened (docs/checkpoint-reader.md lists the limits each one hits now).

    python3 make_hostile.py OUT_DIR [BASE.pt]          hostile cases (tests)
    python3 make_hostile.py --crash-corpus OUT_DIR BASE.pt   the same, for tests/fuzz/crashes
    python3 make_hostile.py --seeds OUT_DIR BASE.pt...       shrunk real checkpoints (fuzz seeds)

BASE defaults to tests/data/recipes/mini_f32.pt (a complete DPA4-Mini model, so the cases that
load are evaluated as a whole model); tests/fuzz/crashes is made from
tests/data/synthetic/synthetic_bare.pt (1.5 kB) with `--crash-corpus`, deflating data.pkl so
that a 10^6-deep list stays a few kB.
Python 3 standard library only.
"""
import collections
import io
import json
import os
import pickle
import struct
import sys
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")


# ---- stand-ins for the torch globals a checkpoint names -----------------------------------

def fake_module(name):
    mod = sys.modules.get(name) or types.ModuleType(name)
    sys.modules[name] = mod
    return mod


torch = fake_module("torch")
torch_utils = fake_module("torch._utils")
STORAGE_TYPES = {"FloatStorage": 4, "DoubleStorage": 8, "LongStorage": 8, "IntStorage": 4,
                 "BoolStorage": 1}
for _name in STORAGE_TYPES:
    setattr(torch, _name, type(_name, (), {"__module__": "torch"}))


class Storage:
    def __init__(self, kind, key, location, numel):
        self.kind, self.key, self.location, self.numel = kind, key, location, numel


class Tensor:
    def __init__(self, storage, offset, size, stride, *rest):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)
        self.rest = rest

    def __reduce__(self):
        return (_rebuild_tensor_v2, (self.storage, self.offset, self.size, self.stride) + self.rest)


def _rebuild_tensor_v2(*args):
    return Tensor(*args)


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2


class Unpickler(pickle.Unpickler):
    def __init__(self, f):
        super().__init__(f)
        self.storages = {}

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch" and name in STORAGE_TYPES:
            return getattr(torch, name)
        raise pickle.UnpicklingError("unexpected global %s.%s" % (module, name))

    def persistent_load(self, pid):
        tag, cls, key, location, numel = pid
        assert tag == "storage"
        if key not in self.storages:
            self.storages[key] = Storage(cls.__name__, key, location, numel)
        return self.storages[key]


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.kind), obj.key, obj.location, obj.numel)
        return None


class Checkpoint:
    """A torch.save zip: prefix, the decoded data.pkl root, raw storage bytes by key."""

    def __init__(self, path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            pkl = min((n for n in names if n.endswith("data.pkl")), key=len)
            self.prefix = pkl[: -len("data.pkl")]
            u = Unpickler(io.BytesIO(z.read(pkl)))
            self.root = u.load()
            self.storages = u.storages
            self.extra = {n[len(self.prefix):]: z.read(n) for n in names
                          if not n.startswith(self.prefix + "data/") and n != pkl}
            self.blobs = {k: z.read(self.prefix + "data/" + k) for k in self.storages}

    @property
    def state(self):
        return self.root["model"] if "model" in self.root else self.root

    def tensors(self):
        return [(k, v) for k, v in self.state.items() if isinstance(v, Tensor)]

    def tensor(self, suffix):
        matches = [(k, v) for k, v in self.tensors() if k.endswith(suffix)]
        assert matches, suffix
        return matches[0]

    def model_params(self):
        return self.state["_extra_state"]["model_params"]

    def pickle_bytes(self):
        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump(self.root)
        return buf.getvalue()

    def write(self, path, pkl=None, deflate=False):
        pkl = self.pickle_bytes() if pkl is None else pkl
        def entry(name, compress=zipfile.ZIP_STORED):  # fixed date: the same bytes every run
            info = zipfile.ZipInfo(self.prefix + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compress
            return info

        with zipfile.ZipFile(path, "w") as z:
            z.writestr(entry("data.pkl", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED), pkl)
            for name, data in self.extra.items():
                z.writestr(entry(name), data)
            for key, data in self.blobs.items():
                z.writestr(entry("data/" + key), data)


# ---- pickle-stream surgery: a placeholder string replaced by raw opcodes --------------------

PLACEHOLDER = "@@HOSTILE@@"


def splice(pkl, opcodes):
    """Replaces the protocol-2 BINUNICODE of PLACEHOLDER by `opcodes` (one value pushed)."""
    raw = PLACEHOLDER.encode()
    needle = b"X" + struct.pack("<I", len(raw)) + raw
    assert pkl.count(needle) == 1
    return pkl.replace(needle, opcodes)


def deep_list(depth):
    # ']' x depth then 'a' x (depth - 1): [[[...]]] nested `depth` deep.
    return b"]" * depth + b"a" * (depth - 1)


def self_list():
    # l = []; l.append(l), through the memo (LONG_BINPUT / LONG_BINGET at an index no pickler uses).
    idx = struct.pack("<I", 0xFFFFFF00)
    return b"]r" + idx + b"j" + idx + b"a"


def doubling_list(levels):
    # L0 = []; L(k+1) = [Lk, Lk]: 19 bytes a level, 2^levels values when expanded.
    out = b"]"
    for k in range(levels):
        idx = struct.pack("<I", 0xFFFF0000 + k)
        out += b"r" + idx + b"0]j" + idx + b"aj" + idx + b"a"
    return out


def inject(ck, where, opcodes, deflate=False):
    """data.pkl with `opcodes` as the value of model_params[where] (or of the root dict)."""
    target = ck.model_params() if where == "model_params" else ck.root
    target["hostile"] = PLACEHOLDER
    try:
        return splice(ck.pickle_bytes(), opcodes)
    finally:
        del target["hostile"]


def lie_about_size(path, suffix, size):
    """Rewrites the uncompressed size that `path`'s local and central headers record for the
    entry ending in `suffix` (both, so that libzip's consistency check agrees with itself)."""
    data = bytearray(open(path, "rb").read())
    eocd = len(data) - 22  # written without an archive comment
    assert data[eocd:eocd + 4] == b"PK\x05\x06"
    count, cd = struct.unpack_from("<H", data, eocd + 10)[0], struct.unpack_from("<I", data, eocd + 16)[0]
    for _ in range(count):
        n, m, k = struct.unpack_from("<HHH", data, cd + 28)
        if data[cd + 46:cd + 46 + n].decode().endswith(suffix):
            local = struct.unpack_from("<I", data, cd + 42)[0]
            struct.pack_into("<I", data, cd + 24, size)
            struct.pack_into("<I", data, local + 22, size)
        cd += 46 + n + m + k
    open(path, "wb").write(data)


def largest_2d(ck):
    """The tensor with the most rows (>= 3), 2-D if there is one: a weight matrix."""
    best = None
    for k, t in ck.tensors():
        if len(t.size) in (1, 2) and t.size[0] >= 3 and (
                best is None or (len(t.size), t.size[0]) > (len(best[1].size), best[1].size[0])):
            best = (k, t)
    return best


def signed_wrap(x):
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def make_cases(base):
    """name -> callable(out_path, deflate) writing that case from a fresh copy of `base`."""
    cases = collections.OrderedDict()

    def case(fn):
        cases[fn.__name__] = fn
        return fn

    def weight_case(alter):
        """A case that alters the weight matrix with the most rows: alter(checkpoint, tensor)."""
        def make(out, deflate):
            ck = Checkpoint(base)
            name, t = largest_2d(ck)
            alter(ck, t)
            ck.write(out, deflate=deflate)
            return {"tensor": name, "storage": t.storage.key}
        make.__name__ = alter.__name__
        return case(make)

    # 1. numel x element size wraps to one element's bytes: 2^64 / size + 1 elements (2^61 + 1
    # for float64, 2^62 + 1 for float32); the tensor then reads far past the storage's bytes
    # (before: SIGSEGV).
    def wrapping_numel(t):
        return (1 << 64) // STORAGE_TYPES[t.storage.kind] + 1

    @weight_case
    def numel_overflow(ck, t):
        t.storage.numel = wrapping_numel(t)
        t.offset = 1 << 40

    # 1b. The same with the tensor moved just past its real storage bytes: the over-read heap
    # bytes became weights (before: exit 0 with a wrong energy).
    @weight_case
    def numel_overflow_offset(ck, t):
        t.storage.numel = wrapping_numel(t)
        t.offset = len(ck.blobs[t.storage.key]) // STORAGE_TYPES[t.storage.kind]

    # 2. stride x (shape - 1) wraps to a small number and passed the bounds check.
    @weight_case
    def stride_overflow(ck, t):
        rows = t.size[0]
        # (rows - 1) * stride0 wraps to a little above 2^64 (or just below, -2, for 3 rows)
        stride0 = min(-(-(1 << 64) // (rows - 1)), (1 << 63) - 1)
        assert -rows < signed_wrap((rows - 1) * stride0) < rows
        t.stride = (stride0,) + t.stride[1:]

    # 3. nesting: 10^6-deep list in data.pkl (recursive destructor), 2x10^5-deep and
    # self-containing lists in model_params (recursive to_json), 2^60-value shared lists.
    def nesting_case(name, where, opcodes, always_deflate=False):
        def make(out, deflate):
            ck = Checkpoint(base)
            ck.write(out, pkl=inject(ck, where, opcodes), deflate=deflate or always_deflate)
        make.__name__ = name
        case(make)

    nesting_case("deep_list_pickle", "root", deep_list(10 ** 6), always_deflate=True)
    nesting_case("deep_list_params", "model_params", deep_list(2 * 10 ** 5), always_deflate=True)
    nesting_case("self_list_params", "model_params", self_list())
    nesting_case("doubling_list_params", "model_params", doubling_list(60))

    # 4. declared sizes far beyond the file: (2^30, 4) and (2^28,) broadcasts with stride 0.
    @weight_case
    def huge_shape(ck, t):
        t.size, t.stride = (2 ** 30, 4), (0, 0)

    @weight_case
    def stride0_broadcast(ck, t):
        t.size, t.stride = (2 ** 28,), (0,)

    # A zip entry declaring ~4 GiB from a few stored bytes: read() allocated the declared size
    # before libzip found the lie (before: a 4 GiB allocation, or std::bad_alloc).
    @case
    def zip_size_lie(out, deflate):
        Checkpoint(base).write(out)
        lie_about_size(out, "data.pkl", 0xFFFFFF00)
        return {"entry": "data.pkl"}

    # Two storages under one key with different types: the second, larger one was checked
    # against nothing once the first had been read (before: over-read).
    @case
    def storage_key_reused(out, deflate):
        ck = Checkpoint(base)
        tensors = [t for _, t in ck.tensors()]
        first = tensors[0]  # the state dict's first tensor is decoded first
        big = max(tensors[1:], key=lambda t: len(ck.blobs[t.storage.key]))
        small = min((t.storage for t in tensors if ck.blobs[t.storage.key] and t.storage is not big.storage),
                    key=lambda st: len(ck.blobs[st.key]))
        # `first` reads the small storage's key; then `big` names the same key with its own
        # (larger) type and element count.
        first.storage, first.offset, first.size, first.stride = small, 0, (1,), (1,)
        big.storage = Storage(big.storage.kind, small.key, big.storage.location, big.storage.numel)
        ck.write(out, deflate=deflate)
        return {"tensor": next(k for k, t in ck.tensors() if t is big), "storage": small.key}

    # Delivery 3: a NaN (and an infinity) in a weight the model uses.
    @weight_case
    def nan_weight(ck, t):
        fmt = "<f" if t.storage.kind == "FloatStorage" else "<d"
        size = struct.calcsize(fmt)
        blob = bytearray(ck.blobs[t.storage.key])
        for element, value in ((t.offset + 5, float("nan")), (t.offset + 7, float("inf"))):
            struct.pack_into(fmt, blob, element * size, value)
        ck.blobs[t.storage.key] = bytes(blob)

    return cases


def shrink(base, out):
    """A fuzz seed: `base`'s whole pickle (real deepmd-kit structure: memo, OrderedDicts,
    model_params, every tensor) with every storage cut to one element and every tensor to
    shape (1, ..., 1), so that mutations land on structure rather than on weight bytes."""
    ck = Checkpoint(base)
    for s in ck.storages.values():
        if s.numel:
            s.numel = 1
            ck.blobs[s.key] = ck.blobs[s.key][:STORAGE_TYPES[s.kind]]
    for _, t in ck.tensors():
        if all(t.size):
            t.offset, t.size, t.stride = 0, (1,) * len(t.size), (1,) * len(t.size)
    ck.write(out)


def main(argv):
    crash_corpus = "--crash-corpus" in argv
    seeds = "--seeds" in argv
    argv = [a for a in argv if a not in ("--crash-corpus", "--seeds")]
    if seeds and len(argv) >= 3:
        os.makedirs(argv[1], exist_ok=True)
        for base in argv[2:]:
            shrink(base, os.path.join(argv[1], "shrunk_" + os.path.basename(base)))
        return
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    out_dir = argv[1]
    base = argv[2] if len(argv) == 3 else os.path.join(DATA, "recipes", "mini_f32.pt")
    os.makedirs(out_dir, exist_ok=True)
    manifest = {}
    for name, fn in make_cases(base).items():
        if crash_corpus and name == "nan_weight":
            continue  # refused by the model loader, not the reader: nothing to fuzz
        manifest[name] = fn(os.path.join(out_dir, name + ".pt"), crash_corpus) or {}
    if not crash_corpus:  # what each case altered, for the test's expected messages
        with open(os.path.join(out_dir, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
