#!/usr/bin/env python3
"""Writes se_e2_a_tiny.pt: a real deepmd-kit 3.2.0 (PyTorch backend) checkpoint of a model that
is NOT DPA4 (descriptor se_e2_a), laid out as deepmd-kit's trainer saves one
({"model": ModelWrapper.state_dict()}, _extra_state holding model_params). The loaders must
refuse it saying what it is (tests/test_hostile_checkpoint.cpp). Tiny sizes keep it ~10 kB.

Run under deepmd-kit 3.2.0:  python make_se_e2_a.py
"""
import torch

from deepmd.pt.model.model import get_model
from deepmd.pt.train.wrapper import ModelWrapper

params = {
    "type_map": ["O", "H"],
    "descriptor": {"type": "se_e2_a", "sel": [4, 8], "rcut_smth": 0.5, "rcut": 4.0,
                   "neuron": [2, 4], "axis_neuron": 2, "seed": 1},
    "fitting_net": {"neuron": [4], "seed": 1},
}
torch.manual_seed(1)
model = get_model(params)
with torch.no_grad():  # perturbed, so that it is not an all-zero initialisation
    for p in model.parameters():
        p.add_(0.1 * torch.randn_like(p))
wrapper = ModelWrapper(model, model_params=params)
torch.save({"model": wrapper.state_dict()}, "se_e2_a_tiny.pt")
