#!/usr/bin/env python3
"""Writes a copy of a checkpoint with another descriptor cutoff (model_params descriptor.rcut),
the weights unchanged: a committee member of another cutoff for the LAMMPS tests (its own edge
list, lammps/pair_sezm_devi.h). Python 3 standard library only (the checkpoint is rewritten by
tests/hostile/make_hostile.py's torch-free reader and writer).

    python3 make_rcut_variant.py BASE.pt OUT.pt RCUT
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hostile"))
from make_hostile import Checkpoint  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ck = Checkpoint(sys.argv[1])
    params = ck.model_params()
    old = params["descriptor"]["rcut"]
    params["descriptor"]["rcut"] = float(sys.argv[3])
    ck.write(sys.argv[2])
    print(f"{sys.argv[2]}: descriptor rcut {old} -> {params['descriptor']['rcut']} (weights of {sys.argv[1]})")
