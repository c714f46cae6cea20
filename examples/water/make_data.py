#!/usr/bin/env python3
"""Writes water.data (LAMMPS atomic data file) from a configuration of ../shared's deepmd-kit
water reference (reference/forces/ref_water_pretrained.json). The structure and the model are
deepmd-kit's files: they are read from ../shared at run time and never copied into this tree."""
import json
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "../../../shared/reference/forces/ref_water_pretrained.json"
name = sys.argv[2] if len(sys.argv) > 2 else "water192_lmp"
ref = json.load(open(src))
cfg = next(c for c in ref["configs"] if c["name"] == name)
cell, xyz, types = cfg["cell"], cfg["coords"], cfg["types"]
assert cell[1] == cell[2] == cell[5] == 0.0, "cell must be lower-triangular"
masses = {"O": 15.9994, "H": 1.00794}
with open("water.data", "w") as f:
    f.write(f"water {name} from {src}\n\n{cfg['natoms']} atoms\n{len(ref['type_map'])} atom types\n\n")
    f.write(f"0 {cell[0]!r} xlo xhi\n0 {cell[4]!r} ylo yhi\n0 {cell[8]!r} zlo zhi\n")
    f.write(f"{cell[3]!r} {cell[6]!r} {cell[7]!r} xy xz yz\n\nMasses\n\n")
    for t, e in enumerate(ref["type_map"]):
        f.write(f"{t + 1} {masses[e]}\n")
    f.write("\nAtoms # atomic\n\n")
    for i in range(cfg["natoms"]):
        f.write(f"{i + 1} {types[i] + 1} {xyz[3 * i]!r} {xyz[3 * i + 1]!r} {xyz[3 * i + 2]!r}\n")
print("wrote water.data:", cfg["natoms"], "atoms, type_map", ref["type_map"])
