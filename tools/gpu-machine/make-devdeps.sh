#!/usr/bin/env bash
# Bundles the build dependencies that a machine without a package manager lacks (the GPU machine:
# CUDA and a compiler, but no libzip, Eigen, nlohmann-json or GoogleTest) into .devdeps/ (ignored
# by git), copied from this Debian machine's packages. Optional ../shared material the GPU tests
# can use (water_pretrained.pt, never committed) goes to .devdeps/shared.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$here/.devdeps"
rm -rf "$out"
mkdir -p "$out/include" "$out/lib"
cp -r /usr/include/eigen3 /usr/include/nlohmann /usr/include/gtest "$out/include/"
cp /usr/include/zip.h /usr/include/zipconf.h "$out/include/"
cp -L /usr/lib/x86_64-linux-gnu/libzip.so.4 "$out/lib/"
ln -s libzip.so.4 "$out/lib/libzip.so"
cp /usr/lib/x86_64-linux-gnu/libgtest.a /usr/lib/x86_64-linux-gnu/libgtest_main.a "$out/lib/"
shared="$here/../shared/reference"
if [ -f "$shared/models/water_pretrained.pt" ]; then
  mkdir -p "$out/shared/reference/models" "$out/shared/reference/forces"
  cp "$shared/models/water_pretrained.pt" "$out/shared/reference/models/"
  cp "$shared/forces/ref_water_pretrained.json" "$out/shared/reference/forces/"
fi
# One archive of the above (~1.5 MB instead of ~12 MB): the device tool's working tree is limited
# to 64 MiB, so a call carries .devdeps/devdeps.tar.xz (and lammps-gpu.tar.xz) rather than the folder;
# gpu-check.sh unpacks it when .devdeps/include is missing.
tar cJf "$out/devdeps.tar.xz" -C "$out" include lib $( [ -d "$out/shared" ] && echo shared )
du -sh "$out" "$out/devdeps.tar.xz"
