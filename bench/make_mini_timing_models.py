#!/usr/bin/env python3
"""Timing-only checkpoints for the cost of the DPA4-Mini extras (run with deepmd-kit 3.2.0).

    /path/to/venv/bin/python bench/make_mini_timing_models.py OUT_DIR

Writes OUT_DIR/mini_on.pt: the option set of deepmd-kit's DPA4 tutorial (that of
tests/data/mini_float64.pt: 32 channels, lmax 2, kmax 1, message-node SO(3) product, SO(3)-grid
branch FFN, MLP read-out) for carbon alone, float32; and OUT_DIR/mini_off.pt: the same with the
Mini extras switched off (message_node_so3 false, ffn_so3_grid false, grid_branch 0,
so3_readout "none": the S2 FFN and plain read-out). deepmd-kit builds each model; every floating
parameter gets seeded random changes so nothing is trivially zero. They are for
`sezm-bench OUT_DIR/mini_on.pt --cells 8` (a 4096-atom diamond) only: untrained, not a test.
"""
import copy
import os
import sys

import torch
from deepmd.pt.model.model import get_model
from deepmd.pt.train.wrapper import ModelWrapper

HERE = os.path.dirname(os.path.abspath(__file__))


def make(extras, path):
    ck = torch.load(os.path.join(HERE, "..", "tests", "data", "mini_float64.pt"), map_location="cpu",
                    weights_only=False)
    params = copy.deepcopy(ck["model"]["_extra_state"]["model_params"])
    params["type_map"] = ["C"]
    params["descriptor"]["precision"] = params["fitting_net"]["precision"] = "float32"
    if not extras:
        params["descriptor"].update(message_node_so3=False, ffn_so3_grid=False, grid_branch=0,
                                    so3_readout="none")
    wrapper = ModelWrapper(get_model(copy.deepcopy(params)), model_params=params)
    gen = torch.Generator().manual_seed(5)
    state = wrapper.state_dict()
    for key, value in state.items():
        if (isinstance(value, torch.Tensor) and value.is_floating_point()
                and "version" not in key and "expand_index" not in key):
            value.add_(0.05 * torch.randn(value.shape, generator=gen, dtype=value.dtype))
    wrapper.load_state_dict(state)
    torch.save({"model": wrapper.state_dict()}, path)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    make(True, os.path.join(out, "mini_on.pt"))
    make(False, os.path.join(out, "mini_off.pt"))
