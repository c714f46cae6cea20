#!/usr/bin/env python3
"""Writes water.data: liquid-density water (LAMMPS atomic data file, types 1 = O, 2 = H).

    python3 make_data.py [N_PER_SIDE]     (default 4: 4^3 = 64 molecules, 192 atoms)

Molecules sit on a simple cubic grid with the TIP3P geometry (O-H 0.9572 A, H-O-H 104.52 deg),
each turned by a random rotation (fixed seed), in a cube sized for 1.0 g/cm^3. The structure is
made here from those numbers alone; nothing is read from elsewhere."""
import math
import random
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
molecules = n ** 3
mass_o, mass_h = 15.9994, 1.00794
grams = molecules * (mass_o + 2 * mass_h) / 6.02214076e23
side = (grams / 1.0) ** (1.0 / 3.0) * 1e8          # cm -> A at 1.0 g/cm^3
spacing = side / n
r_oh, angle = 0.9572, math.radians(104.52)
local = [(r_oh * math.sin(angle / 2), 0.0, r_oh * math.cos(angle / 2)),
         (-r_oh * math.sin(angle / 2), 0.0, r_oh * math.cos(angle / 2))]
rng = random.Random(20261201)


def random_rotation():
    """A uniformly random rotation matrix (from a random unit quaternion)."""
    u1, u2, u3 = rng.random(), rng.random(), rng.random()
    w = math.sqrt(1 - u1) * math.sin(2 * math.pi * u2)
    x = math.sqrt(1 - u1) * math.cos(2 * math.pi * u2)
    y = math.sqrt(u1) * math.sin(2 * math.pi * u3)
    z = math.sqrt(u1) * math.cos(2 * math.pi * u3)
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]


atoms = []
for i in range(n):
    for j in range(n):
        for k in range(n):
            o = [(i + 0.5) * spacing, (j + 0.5) * spacing, (k + 0.5) * spacing]
            rot = random_rotation()
            atoms.append((1, o))
            for h in local:
                atoms.append((2, [o[a] + sum(rot[a][b] * h[b] for b in range(3)) for a in range(3)]))

with open("water.data", "w") as f:
    f.write(f"water: {molecules} molecules at 1.0 g/cm^3 (examples/water/make_data.py)\n\n")
    f.write(f"{len(atoms)} atoms\n2 atom types\n\n")
    for axis in ("x", "y", "z"):
        f.write(f"0.0 {side:.10f} {axis}lo {axis}hi\n")
    f.write(f"\nMasses\n\n1 {mass_o}\n2 {mass_h}\n\nAtoms # atomic\n\n")
    for idx, (t, r) in enumerate(atoms, 1):
        f.write(f"{idx} {t} {r[0] % side:.10f} {r[1] % side:.10f} {r[2] % side:.10f}\n")
print(f"wrote water.data: {len(atoms)} atoms ({molecules} molecules), cube {side:.4f} A")
