#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the diamond MD example (LAMMPS
# pair_style sezm with the shipped potentials/C.pt: 300 K NVT, then NVE) on 2 MPI ranks.
# Extra arguments go to LAMMPS, e.g. -var cells 2 -var nvt 400 -var nve 400.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup-deps.sh"
build="$(bash "$here/scripts/build.sh" | tail -n 1)"
lmp="$build/lammps/lmp_sezm"
[ -x "$lmp" ] || { echo "run-example: $lmp was not built (see the configure summary)" >&2; exit 1; }
root=(); [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
cd "$here/examples/diamond"
OMP_NUM_THREADS=1 mpirun "${root[@]}" --oversubscribe -np 2 "$lmp" -in in.diamond -log none "$@"
